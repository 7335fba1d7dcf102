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
from typing import TYPE_CHECKING

from cursorkit.errors import CursorkitError
from cursorkit.pipeline.cli_commands import COMMANDS
from cursorkit.pipeline.cli_parser import parser_with_commands

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["COMMANDS", "main", "parse_command_line", "parser_with_commands", "run_command", "run_guarded"]


def console_for_output() -> Console:
    """A rich console: a terminal's own, or for logs and pipes without colour codes, ``COLUMNS`` wide.

    Without ``COLUMNS`` a pipe gets 120 columns; long cells (paths, errors) fold rather than get cut.
    """
    from rich.console import Console

    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) >= 20 else 120
    return Console(width=width, no_color=True)


def run_command(
    args: argparse.Namespace, commands: dict[str, Callable[[argparse.Namespace, Console], int]]
) -> int:
    """Runs the parsed command with a console for its output (:func:`run_guarded` says what it returns)."""
    return run_guarded(args, lambda: commands[str(args.command)](args, console_for_output()))


def run_guarded(args: argparse.Namespace, command: Callable[[], int]) -> int:
    """Runs ``command``; exit status 2 for unusable input, 3 for a bug (with its traceback).

    A failure of Spark or its Py4J bridge is one line (2 for a query Spark refused, else 3) and its
    traces go to Spark's log file (``session.spark_log_path``); ZooKeeper's client logs only errors.
    A command that prints nothing through rich (the broker) runs here without importing it.
    """
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # no "Connection dropped" line per retry
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # its errors reach us as exceptions
    try:
        return command()
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
