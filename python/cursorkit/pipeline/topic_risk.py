"""The topics of a many-topic run by risk: their order, the figures the tables show, the topics table.

Risk is what a broker crash would cost: acknowledged messages Pulsar would redeliver, then ack-hole
ranges, then backlog.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FIGURES", "print_topics", "risk_order"]

FIGURES = ("messages", "subscriptions", "backlog", "ranges", "redeliver_pulsar", "delayed_pending", "buckets")
"""The per-topic figures the topics table shows (each an integer of ``summary.json``)."""


def risk_order(topics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Topics riskiest first: what a crash would make Pulsar redeliver, then ack-hole ranges, backlog.

    Each key is a figure the topics tables show (``ranges`` is the topic's ack-hole ranges in all).
    """
    return sorted(
        topics,
        key=lambda t: (
            -int(topics[t].get("redeliver_pulsar", 0)),
            -int(topics[t].get("ranges", 0)),
            -int(topics[t].get("backlog", 0)),
            t,
        ),
    )


def print_topics(console: Any, topics: Mapping[str, Mapping[str, Any]], limit: int = 30) -> None:
    """The topics table, riskiest first (at most ``limit`` rows, then a count of the rest)."""
    from rich.table import Table

    table = Table(title=f"{len(topics)} topics, riskiest first")
    for name in (
        "topic",
        "messages",
        "subs",
        "backlog",
        "ranges",
        "redeliver (Pulsar)",
        "delayed",
        "buckets",
    ):
        table.add_column(name, justify="left" if name == "topic" else "right")
    order = risk_order(topics)
    for t in order[:limit]:
        f = topics[t]
        table.add_row(
            t,
            f"{f['messages']:,}",
            str(f["subscriptions"]),
            f"{f['backlog']:,}",
            f"{f['ranges']:,}",
            f"{f['redeliver_pulsar']:,}",
            f"{f['delayed_pending']:,}",
            str(f["buckets"]),
        )
    console.print(table)
    if len(order) > limit:
        console.print(f"… and {len(order) - limit} more topics")
