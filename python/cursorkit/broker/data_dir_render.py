"""``cursorkit inspect`` of a broker's data directory as tables: its topics, then their subscriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from cursorkit.broker.data_dir import DataDirSummary

__all__ = ["render_data_dir"]


def render_data_dir(summary: DataDirSummary, console: Console) -> None:
    """One table of topics (log, ledgers, damage) and one of subscriptions (mark-delete, backlog)."""
    from rich.table import Table

    partitioned = ", ".join(f"{name} ({n})" for name, n in sorted(summary.partitioned.items()))
    console.print(f"Broker data directory {summary.path}", highlight=False, soft_wrap=True)
    console.print(
        f"{len(summary.topics)} topic{'' if len(summary.topics) == 1 else 's'}"
        + (f"; partitioned topics: {partitioned}" if partitioned else "")
        + f"; status: {'damage found' if summary.damaged else 'ok'}",
        highlight=False,
    )
    if summary.topics:
        topics = Table(title="Topics", title_justify="left")
        for column in ("topic", "ledgers", "entries", "bytes", "first", "last", "status"):
            topics.add_column(
                column, justify="right" if column in ("ledgers", "entries", "bytes") else "left"
            )
        for t in summary.topics:
            status = t.error or "; ".join(t.log_damage) or "ok"
            if t.torn_tail_bytes:
                status += (
                    f" (a write cut short by a crash: {t.torn_tail_bytes:,} bytes, cut off at the next start)"
                )
            topics.add_row(
                t.name,
                f"{len(t.ledgers):,}",
                f"{t.entries:,}",
                f"{t.bytes:,}",
                t.first or "-",
                t.last or "-",
                status,
            )
        console.print(topics)
    rows = [(t.name, s) for t in summary.topics for s in t.subscriptions]
    if rows:
        subs = Table(title="Subscriptions", title_justify="left")
        for column in ("topic", "subscription", "mark-delete", "backlog", "acked ranges", "status"):
            subs.add_column(column, justify="right" if column in ("backlog", "acked ranges") else "left")
        for topic, s in rows:
            if s.error or s.recovered_past:
                status = "; ".join(
                    x for x in (s.error, s.recovered_past and f"recovered past {s.recovered_past}") if x
                )
            elif s.cursor == "elsewhere":
                status = "no cursor here (kept in ZooKeeper by brokers sharing it)"
            else:
                status = "ok"
            subs.add_row(
                topic,
                s.name,
                s.mark_delete or "-",
                "-" if s.backlog is None else f"{s.backlog:,}",
                "-" if s.acked_ranges is None else f"{s.acked_ranges:,}",
                status,
            )
        console.print(subs)
    for problem in summary.problems:
        console.print(f"problem: {problem}", highlight=False, soft_wrap=True)
