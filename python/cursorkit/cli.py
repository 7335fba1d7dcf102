"""``cursorkit``: the command line (generate, rebuild, demo, inspect, bench, broker, admin, completion).

The pipeline's commands come from :mod:`cursorkit.pipeline.cli` (which spark-submit also runs as a
script); this entry point adds ``bench``, ``broker``, ``admin`` and ``completion``, and reads a
broker's data directory for ``inspect``. Exit status: 0 done, 1 damage found or a publish failed (or,
for ``admin``, the broker refused), 2 unusable input or arguments, 3 an internal error (with its
traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cursorkit.pipeline.cli import (
    COMMANDS,
    parse_command_line,
    parser_with_commands,
    run_command,
    run_guarded,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["main", "parser"]

BENCH_EXAMPLES = """examples:
  cursorkit bench --quick                          every group, small sizes (about a minute)
  cursorkit bench --only rangeset --only cursor --json before.json
  cursorkit bench --compare before.json after.json
"""


def parser() -> argparse.ArgumentParser:
    """Every command of ``cursorkit``."""
    from cursorkit.pipeline.cli_parser import HelpFormatter

    p, sub = parser_with_commands()
    b = sub.add_parser(
        "bench",
        help="benchmark the library against the peers installed here",
        description=(
            "Run the standard workloads (range sets, cursors, delayed delivery, hashing, selectors,\n"
            "the Key_Shared dispatcher, a small rebuild when Spark is installed) beside whichever\n"
            "peers are installed (pyroaring, sortedcontainers, mmh3, heapq), with a CPython\n"
            "call-floor calibration, and print the ratio tables."
        ),
        epilog=BENCH_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    b.add_argument("--quick", action="store_true", help="small sizes, one round each (a smoke run)")
    b.add_argument(
        "--only", action="append", default=None, metavar="GROUP", help="run only this group (repeatable)"
    )
    b.add_argument("--json", type=str, default=None, metavar="FILE", help="also write the results as JSON")
    b.add_argument(
        "--compare", nargs=2, default=None, metavar=("A.json", "B.json"), help="compare two results and exit"
    )
    b.add_argument("--list", action="store_true", help="list the groups and their workloads and exit")
    c = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script for bash or zsh.",
        epilog='example:\n  eval "$(cursorkit completion bash)"\n',
        formatter_class=HelpFormatter,
    )
    c.add_argument("shell", choices=["bash", "zsh"], help="the shell")
    from cursorkit.admin.command import add_parser as add_admin
    from cursorkit.broker.server.command import add_parser

    add_parser(sub, HelpFormatter)
    add_admin(sub, HelpFormatter)
    return p


def _bench(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.bench.cli import run_bench

    return run_bench(args, console)


def _completion(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.completion import script

    sys.stdout.write(script(parser(), args.shell))
    return 0


def _broker(args: argparse.Namespace) -> int:
    from cursorkit.broker.server.command import run_broker

    return run_broker(args)


def _inspect(args: argparse.Namespace, console: Console) -> int:
    """A broker's data directory here; every other kind of path in the pipeline's inspector."""
    from cursorkit.broker.data_dir import is_data_dir

    if "://" in args.path or not is_data_dir(args.path):
        return COMMANDS["inspect"](args, console)
    from cursorkit.broker.data_dir import as_json, inspect_data_dir
    from cursorkit.broker.data_dir_render import render_data_dir
    from cursorkit.errors import InvalidArgument

    if args.objects is not None:
        raise InvalidArgument("--objects applies to zk:// locations only")
    summary = inspect_data_dir(args.path, topic=args.topic)
    if args.json:
        print(as_json(summary))
    else:
        render_data_dir(summary, console)
    return 1 if summary.damaged else 0


def _admin(args: argparse.Namespace) -> int:
    from cursorkit.admin.command import run_admin
    from cursorkit.pipeline.cli import console_for_output

    return run_admin(args, console_for_output)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one ``cursorkit`` command; returns the exit status."""
    args = parse_command_line(parser(), argv)
    if args.command == "broker":  # no rich console: the broker prints plain lines, and starts sooner
        return run_guarded(args, lambda: _broker(args))
    if args.command == "admin":  # rich only for a table
        return run_guarded(args, lambda: _admin(args))
    commands = {**COMMANDS, "inspect": _inspect, "bench": _bench, "completion": _completion}
    return run_command(args, commands)


if __name__ == "__main__":
    sys.exit(main())
