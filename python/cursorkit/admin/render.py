"""``cursorkit admin``'s tables: a topic's stats and internal stats, readable at a glance.

Only the figures an operator looks for first (backlog, unacked, consumers; mark-delete and read
positions); ``--json`` prints everything the broker answered. A field the broker left out shows
as ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["print_internal_stats", "print_stats"]

_ABSENT = "-"


def _count(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _ABSENT if value is None else str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def _text(value: object) -> str:
    return _ABSENT if value is None or value == "" else str(value)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(console: Console, title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    console.print(title, style="bold", highlight=False, soft_wrap=True)  # never folded into the table
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column()
    table.add_column()
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def print_stats(console: Console, topic: str, stats: Mapping[str, Any]) -> None:
    """A topic's stats: its totals, then one row per subscription and one per publisher."""
    from rich.table import Table

    subs: Mapping[str, Any] = stats.get("subscriptions") or {}
    publishers: list[Mapping[str, Any]] = list(stats.get("publishers") or [])
    _summary(
        console,
        topic,
        [
            ("messages in", f"{_count(stats.get('msgInCounter'))} ({_count(stats.get('msgRateIn'))}/s)"),
            ("messages out", f"{_count(stats.get('msgOutCounter'))} ({_count(stats.get('msgRateOut'))}/s)"),
            ("storage size", f"{_count(stats.get('storageSize'))} B"),
            ("backlog size", f"{_count(stats.get('backlogSize'))} B"),
            ("publishers", _count(len(publishers))),
            ("subscriptions", _count(len(subs))),
        ],
    )
    if subs:
        table = Table(title="Subscriptions", title_justify="left")
        for column in ("subscription", "type", "backlog", "unacked", "delayed", "consumers", "out/s"):
            table.add_column(column, justify="left" if column in ("subscription", "type") else "right")
        for name, sub in sorted(subs.items()):
            table.add_row(
                name,
                _text(sub.get("type")),
                _count(sub.get("msgBacklog")),
                _count(sub.get("unackedMessages")),
                _count(sub.get("msgDelayed")),
                _count(len(sub.get("consumers") or [])),
                _count(sub.get("msgRateOut")),
            )
        console.print(table)
    if publishers:
        table = Table(title="Publishers", title_justify="left")
        for column in ("producer", "access mode", "in/s", "address"):
            table.add_column(column, justify="right" if column == "in/s" else "left")
        for p in publishers:
            table.add_row(
                _text(p.get("producerName")),
                _text(p.get("accessMode")),
                _count(p.get("msgRateIn")),
                _text(p.get("address")),
            )
        console.print(table)


def print_internal_stats(console: Console, topic: str, stats: Mapping[str, Any]) -> None:
    """A topic's internal stats: its log, its ledgers and one row per cursor."""
    from rich.table import Table

    _summary(
        console,
        topic,
        [
            (
                "entries",
                f"{_count(stats.get('numberOfEntries'))} (added {_count(stats.get('entriesAddedCounter'))})",
            ),
            ("total size", f"{_count(stats.get('totalSize'))} B"),
            ("last confirmed entry", _text(stats.get("lastConfirmedEntry"))),
            ("state", _text(stats.get("state"))),
        ],
    )
    ledgers: list[Mapping[str, Any]] = list(stats.get("ledgers") or [])
    if ledgers:
        table = Table(title="Ledgers", title_justify="left")
        for column in ("ledger", "entries", "size"):
            table.add_column(column, justify="right")
        for ledger in ledgers:
            table.add_row(
                _text(ledger.get("ledgerId")), _count(ledger.get("entries")), _count(ledger.get("size"))
            )
        console.print(table)
    cursors: Mapping[str, Any] = stats.get("cursors") or {}
    if cursors:
        table = Table(title="Cursors", title_justify="left")
        for column in ("cursor", "mark-delete", "read position", "acked after mark-delete", "state"):
            table.add_column(column)
        for name, cursor in sorted(cursors.items()):
            table.add_row(
                name,
                _text(cursor.get("markDeletePosition")),
                _text(cursor.get("readPosition")),
                _short(_text(cursor.get("individuallyDeletedMessages"))),
                _text(cursor.get("state")),
            )
        console.print(table)
