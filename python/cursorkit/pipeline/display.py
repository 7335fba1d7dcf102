"""What the CLI shows while and after a job runs: stage progress and the rebuild summary."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from cursorkit.pipeline.results import RebuildSummary

__all__ = ["print_summary", "stage_progress"]


@contextlib.contextmanager
def stage_progress(console: Console) -> Iterator[Callable[[str, str], None]]:
    """A stage callback: a live spinner per stage on a terminal, one line per stage otherwise."""
    if console.is_terminal:
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            tasks: dict[str, TaskID] = {}

            def on_tty(name: str, event: str) -> None:
                if event == "start":
                    tasks[name] = progress.add_task(name, total=1)
                else:
                    progress.update(tasks[name], completed=1)

            yield on_tty
        return
    started: dict[str, float] = {}

    def on_log(name: str, event: str) -> None:
        if event == "start":
            started[name] = time.perf_counter()
        else:
            console.print(f"{name}: {time.perf_counter() - started[name]:.1f} s", highlight=False)

    yield on_log


def print_summary(console: Console, summary: RebuildSummary) -> None:
    """The cursors table, delayed-index line, stage times and output paths of a rebuild."""
    t = Table(title=f"rebuild of {summary.topic} at {summary.now_ms}", show_header=True)
    for col in (
        "subscription",
        "mark-delete",
        "ranges",
        "backlog",
        "compact B",
        "Pulsar B",
        "redeliver Pulsar/ours",
    ):
        t.add_column(col)
    for c in summary.cursors:
        t.add_row(
            c.subscription,
            c.mark_delete,
            f"{c.ranges:,}",
            f"{c.backlog:,}",
            f"{c.compact_bytes:,}",
            f"{c.message_range_bytes:,}",
            f"{c.redeliver_pulsar:,} / {c.redeliver_ours:,}",
        )
    console.print(t)
    indexed = sum(b.messages for b in summary.buckets)
    console.print(
        f"delayed index: {indexed:,} messages in {len(summary.buckets)} buckets; "
        + ", ".join(f"{k}={v:,}" for k, v in summary.rules.items()),
        highlight=False,
    )
    console.print(
        "stages: "
        + ", ".join(f"{s.name} {s.seconds:.1f} s" for s in summary.stages)
        + f"; total {summary.total_seconds:.1f} s",
        highlight=False,
    )
    report = Path(summary.out_dir) / "report.html"
    where = f"output: {summary.out_dir}" + (f"  report: {report}" if report.is_file() else "")
    console.print(where, highlight=False, soft_wrap=True)
