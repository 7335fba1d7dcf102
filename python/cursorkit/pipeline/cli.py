"""``cursorkit``: the command line (generate, rebuild, demo, inspect, bench, completion).

``main(argv)`` is the ``[project.scripts]`` entry point and works the same under spark-submit
(``spark-submit … -m``-style drivers call ``main`` with their arguments). Errors of the input or the
arguments print one line and exit 2; nothing else is swallowed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from cursorkit.errors import CursorkitError, InvalidArgument
from cursorkit.pipeline.display import print_summary, stage_progress
from cursorkit.stores.location import is_zk_location

__all__ = ["main"]


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
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
        formatter_class=_Help,
        epilog="Run `cursorkit COMMAND --help` for a command's options and examples.",
    )
    p.add_argument("--version", action="version", version=f"cursorkit {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser(
        "generate",
        help="write synthetic message and ack logs (Parquet)",
        description="Write realistic synthetic logs: a message log and an ack log, as Parquet.",
        epilog=GENERATE_EXAMPLES,
        formatter_class=_Help,
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
        formatter_class=_Help,
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
        formatter_class=_Help,
    )
    d.add_argument("--dir", type=Path, default=Path("cursorkit-demo"), help="working directory")
    d.add_argument("--messages", type=_count(1), default=200_000, help="messages of the topic (count)")
    d.add_argument("--subscriptions", type=_count(1), default=3, help="subscriptions (count)")
    d.add_argument("--seed", type=_count(0), default=7, help="random seed")
    d.add_argument("--master", default=None, help="Spark master (default: local[*])")

    i = sub.add_parser(
        "inspect",
        help="summarise a store, a rebuild output or cursor znodes",
        description=(
            "Summarise what a bucket snapshot store, a cursor store, a rebuild output (local or s3://)\n"
            "or the cursor znodes under a ZooKeeper path hold, and report any damage. Read-only."
        ),
        epilog=INSPECT_EXAMPLES,
        formatter_class=_Help,
    )
    i.add_argument(
        "path",
        help="a store, a rebuild output, an object-store output (s3://...) or cursor znodes (zk://...)",
    )
    i.add_argument("--topic", default=None, help="a topic of a many-topic rebuild output")
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


def _cmd_generate(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.generate import generate
    from cursorkit.pipeline.preflight import check_generate

    check_generate(args.out)
    t0 = time.perf_counter()
    common = {
        "messages": args.messages,
        "keys": args.keys,
        "delayed_fraction": args.delayed_fraction,
        "subscriptions": args.subscriptions,
        "seed": args.seed,
    }
    if args.topics:
        from cursorkit.pipeline.generate_topics import generate_topics

        many = generate_topics(
            args.out,
            topics=args.topics,
            partitioned_fraction=args.partitioned_fraction,
            partitions=args.partitions,
            min_subscriptions=args.min_subscriptions,
            **common,
        )
        console.print(
            f"wrote {sum(many.topics.values()):,} messages over {len(many.topics):,} topics "
            f"(partitions counted apart) and {many.acks:,} acks to {args.out} "
            f"in {time.perf_counter() - t0:.1f} s",
            highlight=False,
        )
        return 0
    s = generate(args.out, ledgers=args.ledgers, **common)
    console.print(
        f"wrote {s.messages:,} messages ({s.delayed:,} delayed) in {s.ledgers} ledgers and "
        f"{s.acks:,} acks of {len(s.subscriptions)} subscriptions to {args.out} "
        f"in {time.perf_counter() - t0:.1f} s; "
        f"now = {s.now_ms}",
        highlight=False,
    )
    return 0


def _config(args: argparse.Namespace) -> object:
    from cursorkit.pipeline.rebuild import RebuildConfig

    return RebuildConfig(
        topic=args.topic,
        now_ms=args.now,
        min_index_count_per_bucket=args.min_index_count_per_bucket,
        max_time_step_per_segment_ms=args.max_time_step_per_segment_ms,
        max_indexes_per_segment=args.max_indexes_per_segment,
        max_delay_ms=args.max_delay_ms,
        consumers=args.consumers,
        report=not args.no_report,
        command=str(getattr(args, "command_line", "")),
    )


def _cmd_rebuild(args: argparse.Namespace, console: Console) -> int:
    """Checks everything it can without Spark (``preflight``), then runs the one- or many-topic job."""
    from cursorkit.pipeline.preflight import check_rebuild
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
    from cursorkit.pipeline.session import parse_conf, start_session

    cfg = _config(args)
    assert isinstance(cfg, RebuildConfig)
    conf = parse_conf(args.conf)
    plan = check_rebuild(
        args.messages,
        args.acks,
        args.out,
        master=args.master,
        cursor_store=args.cursor_store,
        cursor_objects=args.cursor_objects,
        now_ms=args.now,
        allow_empty=args.allow_empty,
    )
    spark = start_session(args.master, conf)
    if plan.many:  # a many-topic log: every topic in one job
        from cursorkit.pipeline.cluster import print_topics, rebuild_topics
        from cursorkit.pipeline.output import RUNS_DIR

        with stage_progress(console) as on_stage:
            topics = rebuild_topics(spark, args.messages, args.acks, args.out, cfg, on_stage=on_stage)
        print_topics(console, topics.topics)
        where = f"output: {topics.out_dir}"
        if cfg.report:
            where += f"  report: {topics.out_dir.rstrip('/')}/{RUNS_DIR}/{topics.run}/report.html"
        console.print(where, highlight=False, soft_wrap=True)
        return _publish(args, console)
    with stage_progress(console) as on_stage:
        summary = rebuild(spark, args.messages, args.acks, args.out, cfg, on_stage=on_stage)
    print_summary(console, summary)
    return _publish(args, console)


def _publish(args: argparse.Namespace, console: Console) -> int:
    """``--cursor-store``: the rebuilt cursors written to their znodes; 1 if any could not be."""
    if args.cursor_store is None:
        return 0
    from cursorkit.pipeline.publish import publish_cursors
    from cursorkit.stores.objects import ObjectStore

    objects = ObjectStore(args.cursor_objects) if args.cursor_objects else None
    done = publish_cursors(
        args.out,
        args.cursor_store,
        one_topic=args.topic,
        objects=objects,
        overwrite=args.overwrite_cursors,
        publish_damaged=args.publish_damaged,
    )
    console.print(
        f"published {len(done.published):,} cursors to {args.cursor_store}; "
        f"{len(done.existing):,} already there (kept; --overwrite-cursors replaces them), "
        f"{len(done.truncated):,} cut at the znode's limit, {len(done.damaged):,} damaged and left out, "
        f"{len(done.failed):,} failed",
        highlight=False,
    )
    for what, items in (("left out (damaged)", done.damaged), ("published though damaged", done.forced)):
        for path, why in sorted(items.items())[:20]:
            console.print(f"  {what} {path}: {why}", highlight=False)
    if done.damaged:
        console.print("  (--publish-damaged writes damaged cursors anyway)", highlight=False)
    for path, why in sorted(done.failed.items())[:20]:
        console.print(f"  failed {path}: {why}", highlight=False)
    if done.damaged or done.failed:
        return 1
    return 0


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.demo import run_demo
    from cursorkit.pipeline.preflight import check_demo

    check_demo(args.dir, args.master)
    ok = run_demo(
        args.dir,
        messages=args.messages,
        subscriptions=args.subscriptions,
        seed=args.seed,
        master=args.master,
        console=console,
    )
    return 0 if ok else 1


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.inspector import inspect_path, render
    from cursorkit.pipeline.inspector.topics import inspect_topic, inspect_topics
    from cursorkit.pipeline.manifest import read_topics_manifest
    from cursorkit.pipeline.output import check_scheme, is_object_store

    check_scheme(args.path, "inspect", also=("zk",))
    if args.objects is not None and not is_zk_location(args.path):
        raise InvalidArgument("--objects applies to zk:// locations only")
    if is_zk_location(args.path):  # cursor znodes, cursorkit's or Pulsar's own
        from cursorkit.pipeline.inspector.znodes import inspect_zk, render_zk
        from cursorkit.stores.objects import ObjectStore

        if args.topic is not None:
            raise InvalidArgument("--topic applies to rebuild outputs; a zk:// path names the znodes itself")
        objects = ObjectStore(args.objects) if args.objects else None
        found = inspect_zk(args.path, objects=objects, limit=args.limit)
        if args.json:
            return _print_json(found)
        render_zk(found, console)
        return 1 if found.at_risk else 0
    summary: Any
    if is_object_store(args.path):  # a many-topic output on an object store
        summary = inspect_topics(args.path) if args.topic is None else inspect_topic(args.path, args.topic)
    else:
        path = Path(args.path)
        many = (path / "manifest.json").is_file() and read_topics_manifest(path) is not None
        if many:  # every topic is checked; --topic shows one in detail
            summary = (
                inspect_topics(str(path)) if args.topic is None else inspect_topic(str(path), args.topic)
            )
        elif args.topic is not None:
            raise InvalidArgument(f"{path} is not a many-topic rebuild output; --topic does not apply")
        else:
            summary = inspect_path(path)
    if args.json:
        return _print_json(summary)
    render(summary, console=console)
    return 1 if summary.damaged else 0


def _print_json(summary: Any) -> int:
    """``--json``: the summary on stdout as one JSON document; the exit status as without it."""
    import json

    from cursorkit.pipeline.inspector.export import as_json

    print(json.dumps(as_json(summary), indent=1))
    return 1 if summary.damaged else 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "generate": _cmd_generate,
    "rebuild": _cmd_rebuild,
    "demo": _cmd_demo,
    "inspect": _cmd_inspect,
}
"""The pipeline's commands (``cursorkit.cli`` adds ``bench`` and ``completion``)."""


def console_for_output() -> Console:
    """A rich console: a terminal's own, or for logs and pipes without colour codes, ``COLUMNS`` wide.

    Without ``COLUMNS`` a pipe gets 120 columns; long cells (paths, errors) fold rather than get cut.
    """
    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) >= 20 else 120
    return Console(width=width, no_color=True)


def run_command(
    args: argparse.Namespace, commands: dict[str, Callable[[argparse.Namespace, Console], int]]
) -> int:
    """Runs the parsed command; exit status 2 for unusable input, 3 for a bug (with its traceback).

    A failure of Spark or its Py4J bridge is one line (2 for a query Spark refused, else 3) and its
    traces go to Spark's log file (``session.spark_log_path``); ZooKeeper's client logs only errors.
    """
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # no "Connection dropped" line per retry
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # its errors reach us as exceptions
    console = console_for_output()
    try:
        return commands[str(args.command)](args, console)
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as a killed writer would
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (CursorkitError, OSError, RecursionError) as e:
        print(f"cursorkit {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if _is_spark_error(e):
            return _spark_failed(str(args.command), e)
        if type(e).__module__.split(".")[0] == "kazoo":  # a ZooKeeper client error not mapped
            print(f"cursorkit {args.command}: ZooKeeper: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        # a bug: say so, with the traceback, under its own exit status
        traceback.print_exc()
        print(f"cursorkit {args.command}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 3


def _is_spark_error(e: BaseException) -> bool:
    from cursorkit.pipeline.session import is_spark_error

    return is_spark_error(e)


def _spark_failed(command: str, e: BaseException) -> int:
    """One line for a Spark failure; its traces appended to Spark's log file, which the line names."""
    from cursorkit.pipeline.session import describe_spark_error, is_input_error, spark_log_path

    log = spark_log_path()
    where = f"; details in {log}"
    try:
        with log.open("a", encoding="utf-8") as f:
            f.write(f"--- cursorkit {command}: {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            f.write("".join(traceback.format_exception(e)))
    except OSError:
        where = ""
    print(f"cursorkit {command}: Spark failed: {describe_spark_error(e)}{where}", file=sys.stderr)
    return 2 if is_input_error(e) else 3


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the command line itself kept as ``command_line`` (for reports)."""
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(words)
    args.command_line = shlex.join(["cursorkit", *words])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one pipeline command (this file is also what spark-submit runs); returns the exit status."""
    return run_command(parse_command_line(parser_with_commands()[0], argv), COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
