"""The pipeline's argument parsers: ``generate``, ``rebuild``, ``demo``, ``inspect``, their types and help.

``cursorkit.cli`` adds its own commands to the sub-parser set :func:`parser_with_commands` returns.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["HelpFormatter", "parser_with_commands"]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default and keeps the examples' line breaks.

    A default is shown once: not for required options, flags or options without one (None, []), nor
    where the help text already says it (``default: ...``).
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            action.required
            or action.default in (None, False, [], argparse.SUPPRESS)
            or "default:" in text
            or "%(default)" in text
        ):
            return text
        return super()._get_help_string(action)


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (the error names the option)."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def _fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {value}")
    return value


_fraction.__name__ = "fraction"

GENERATE_EXAMPLES = """examples:
  cursorkit generate --out logs --messages 1000000 --subscriptions 3
  cursorkit generate --out cluster --topics 1000 --messages 40000000 --min-subscriptions 3
"""
REBUILD_EXAMPLES = """examples:
  cursorkit rebuild --messages logs/messages --acks logs/acks --out state
  cursorkit rebuild --messages s3://bucket/logs/messages --acks s3://bucket/logs/acks --out s3://bucket/state
  cursorkit rebuild --messages logs/messages --acks logs/acks --out state --cursor-store zk://zk1:2181
  spark-submit --master spark://host:7077 .../cursorkit/pipeline/cli.py rebuild --messages ... --out ...
"""
INSPECT_EXAMPLES = """examples:
  cursorkit inspect state                          a rebuild output: its topics, riskiest first
  cursorkit inspect state --topic persistent://t/ns/orders
  cursorkit inspect state/cursors/orders-sub       one cursor store
  cursorkit inspect zk://zk1:2181/managed-ledgers/t/ns --objects s3://bucket/cursors
  cursorkit inspect broker-data                    a stopped broker's --data: topics, cursors, backlogs
exit status: 0 all readable, 1 damage found or a cursor znode cut (reported: its acks left out
  will be redelivered), 2 unusable input, 3 internal error
"""


def parser_with_commands() -> tuple[
    argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]
]:
    """The parser of the pipeline's commands and its sub-parser set (``cursorkit.cli`` adds more)."""
    p = argparse.ArgumentParser(
        prog="cursorkit",
        description=(
            "The subscription state of a message broker: rebuild delayed indexes and cursors from logs\n"
            "on Spark, inspect stores (files, object stores, ZooKeeper), and benchmark the library."
        ),
        formatter_class=HelpFormatter,
        epilog="Run `cursorkit COMMAND --help` for a command's options and examples.",
    )
    p.add_argument("--version", action="version", version=f"cursorkit {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser(
        "generate",
        help="write synthetic message and ack logs (Parquet)",
        description="Write realistic synthetic logs: a message log and an ack log, as Parquet.",
        epilog=GENERATE_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    g.add_argument("--out", required=True, type=Path, help="directory to write messages/ and acks/ into")
    g.add_argument("--messages", type=_count(1), default=1_000_000, help="messages in all (count)")
    g.add_argument("--ledgers", type=_count(1), default=100, help="ledgers of the topic (count)")
    g.add_argument(
        "--keys", type=_count(1), default=10_000, help="distinct message keys, Zipf-skewed (count)"
    )
    g.add_argument(
        "--delayed-fraction", type=_fraction, default=0.3, help="share of messages with a deliver-at (0 to 1)"
    )
    g.add_argument(
        "--subscriptions", type=_count(0), default=3, help="subscriptions acking the topic (count)"
    )
    g.add_argument("--seed", type=_count(0), default=1, help="random seed (the same seed, the same logs)")
    g.add_argument(
        "--topics", type=_count(0), default=0, help="many topics, with a topic column (count); 0 = one topic"
    )
    g.add_argument(
        "--partitioned-fraction",
        type=_fraction,
        default=0.02,
        help="with --topics: share of topics that are partitioned (0 to 1)",
    )
    g.add_argument(
        "--partitions", type=_count(1), default=16, help="with --topics: partitions of a partitioned topic"
    )
    g.add_argument(
        "--min-subscriptions",
        type=_count(0),
        default=1,
        help="with --topics: each topic gets --min-subscriptions to --subscriptions subscriptions",
    )

    r = sub.add_parser(
        "rebuild",
        help="rebuild delayed indexes and cursors from logs on Spark",
        description=(
            "Rebuild a topic's (or, with a topic column, every topic's) delayed-delivery index and\n"
            "cursors from a message log and an ack log, on local Spark or a cluster."
        ),
        epilog=REBUILD_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    r.add_argument(
        "--messages",
        required=True,
        help="message log: Parquet/CSV/JSON file or directory; s3://... for a log with a topic column",
    )
    r.add_argument(
        "--acks",
        help="ack log: Parquet/CSV/JSON file or directory; s3://... for a log with a topic column "
        "(default: no acks)",
    )
    r.add_argument(
        "--out",
        required=True,
        help="output directory; an object-store prefix (s3://...) for logs with a topic column",
    )
    _rebuild_options(r)

    d = sub.add_parser(
        "demo",
        help="generate a small topic, rebuild it on local Spark, verify it, report",
        description="Generate a topic, rebuild it on local Spark, check it against a single-process run.",
        epilog="example:\n  cursorkit demo --dir cursorkit-demo --messages 200000\n",
        formatter_class=HelpFormatter,
    )
    d.add_argument("--dir", type=Path, default=Path("cursorkit-demo"), help="working directory")
    d.add_argument("--messages", type=_count(1), default=200_000, help="messages of the topic (count)")
    d.add_argument("--subscriptions", type=_count(1), default=3, help="subscriptions (count)")
    d.add_argument("--seed", type=_count(0), default=7, help="random seed")
    d.add_argument("--master", default=None, help="Spark master (default: local[*])")

    i = sub.add_parser(
        "inspect",
        help="summarise a store, a rebuild output, cursor znodes or a broker's data directory",
        description=(
            "Summarise what a bucket snapshot store, a cursor store, a rebuild output (local or s3://),\n"
            "the cursor znodes under a ZooKeeper path or a stopped broker's data directory hold, and\n"
            "report any damage. Read-only."
        ),
        epilog=INSPECT_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    i.add_argument(
        "path",
        help="a store, a rebuild output, an object-store output (s3://...), cursor znodes (zk://...) "
        "or a broker's data directory",
    )
    i.add_argument(
        "--topic", default=None, help="a topic of a many-topic rebuild output or of a broker's data directory"
    )
    i.add_argument(
        "--objects",
        default=None,
        metavar="LOCATION",
        help="with zk://: the object store of state objects, checked",
    )
    i.add_argument(
        "--limit", type=_count(1), default=10_000, help="with zk://: at most this many znodes visited"
    )
    i.add_argument(
        "--json",
        action="store_true",
        help="print the findings as one JSON document instead of tables (same exit status)",
    )

    return p, sub


def _version() -> str:
    try:
        from cursorkit import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover - the native module is missing
        return "unknown"


def _rebuild_options(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--now",
        type=_count(0),
        default=None,
        help="the moment to rebuild for, ms since the epoch (default: last publish_time)",
    )
    r.add_argument(
        "--topic", default="persistent://public/default/topic", help="the topic of a one-topic log"
    )
    r.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    r.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    r.add_argument(
        "--min-index-count-per-bucket",
        type=_count(1),
        default=50_000,
        help="PIP-195: delayed messages a bucket holds before it is sealed at the next ledger (count)",
    )
    r.add_argument(
        "--max-time-step-per-segment-ms",
        type=_count(1),
        default=300_000,
        help="PIP-195: deliver-at span of one snapshot segment (ms)",
    )
    r.add_argument(
        "--max-indexes-per-segment",
        type=_count(1),
        default=5000,
        help="PIP-195: indexes of one segment (count)",
    )
    r.add_argument(
        "--max-delay-ms",
        type=_count(1),
        default=365 * 24 * 3_600_000,
        help="deliver-at further than this after now is set aside and counted (ms; default: one year)",
    )
    r.add_argument("--consumers", type=_count(1), default=8, help="consumers of the Key_Shared load figures")
    r.add_argument("--no-report", action="store_true", help="skip report.html")
    r.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept a message log without rows (a one-topic log then needs --now)",
    )
    r.add_argument(
        "--cursor-store",
        default=None,
        metavar="zk://HOST:PORT[/CHROOT]",
        help="also publish every rebuilt cursor to its Pulsar znode in this ZooKeeper ensemble",
    )
    r.add_argument(
        "--cursor-objects",
        default=None,
        metavar="LOCATION",
        help="with --cursor-store: object store (s3://...) for cursor state beyond the znode "
        "(default: none; the state is cut at Pulsar's 1,000-range metadata-store limit, and reported)",
    )
    r.add_argument(
        "--overwrite-cursors",
        action="store_true",
        help="with --cursor-store: replace cursor znodes that already exist (their owners are fenced)",
    )
    r.add_argument(
        "--publish-damaged",
        action="store_true",
        help="with --cursor-store: also publish cursors whose store in the output is damaged "
        "(by default they are left out and listed: a rewound cursor makes Pulsar redeliver acked messages)",
    )
