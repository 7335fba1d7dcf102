"""Problems that make an input log unusable, raised as :class:`InvalidInput` naming the column and a row.

The per-partition functions count them (``Problems``); the driver raises on the first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cursorkit.errors import InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.partitions.problems import Problems

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["duplicate_error", "gap_error", "raise_problems"]

# Problems that make the input unusable: the driver raises on the first it finds.
_ERRORS = {
    "null_ledger_id": ("ledger_id", "is null"),
    "null_entry_id": ("entry_id", "is null"),
    "null_publish_time": ("publish_time", "is null"),
    "negative_ledger_id": ("ledger_id", "is negative"),
    "negative_entry_id": ("entry_id", "is negative"),
    "implausible_publish_time": ("publish_time", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "implausible_deliver_at": ("deliver_at", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "bad_batch_size": ("batch_size", "is below 1 or above 1,048,576"),
    "duplicate_position": ("ledger_id, entry_id", "repeats a position already in the log"),
    "null_topic": ("topic", "is null (a log with a topic column names every row's topic)"),
    "null_subscription": ("subscription", "is null"),
    "null_ack_type": ("ack_type", "is null"),
    "null_ack_time": ("ack_time", "is null"),
    "bad_ack_type": ("ack_type", f"is not one of {', '.join(schema.ACK_TYPES)} (in any case)"),
    "negative_position": ("ledger_id, entry_id", "is negative"),
    "implausible_ack_time": ("ack_time", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "acks_batch_index_out_of_range": ("batch_index", "is outside the entry's batch (see batch_size)"),
}


def _where(what: str, source: str, topic: str | None) -> str:
    """``message log X`` (one topic) or ``message log X, topic 'T'`` (many) for error messages."""
    return f"{what} log {source}" if topic is None else f"{what} log {source}, topic {topic!r}"


def raise_problems(problems: Problems, what: str, source: str, topic: str | None = None) -> None:
    """Raises the first counted problem that makes the log unusable (``_ERRORS``); rules set rows aside."""
    where = _where(what, source, topic)
    for name, count in problems.counts.items():
        if name in _ERRORS:
            column, rule = _ERRORS[name]
            raise InvalidInput(
                f"{where}: {count} row(s) where {column} {rule}",
                source=source,
                column=column,
                row=problems.samples.get(name),
                topic=topic,
            )


def duplicate_error(msgs: DataFrame, source: str, count: int, topic: str | None = None) -> InvalidInput:
    """The error for ``count`` positions repeated across partitions, with a sample row found by Spark.

    For a many-topic log the sample is looked for in ``topic`` only.
    """
    from pyspark.sql import functions as F

    mine = msgs if topic is None else msgs.filter(F.col("topic") == F.lit(topic))
    dup = (
        mine.groupBy("ledger_id", "entry_id")
        .count()
        .filter(F.col("count") > 1)
        .select("ledger_id", "entry_id")
        .limit(1)
        .collect()
    )
    sample = None
    if dup:
        first = (
            mine.filter((F.col("ledger_id") == dup[0][0]) & (F.col("entry_id") == dup[0][1]))
            .limit(1)
            .collect()
        )
        sample = first[0].asDict() if first else None
    return InvalidInput(
        f"{_where('message', source, topic)}: {count} row(s) where ledger_id, entry_id repeats a position "
        "already in the log",
        source=source,
        column="ledger_id, entry_id",
        row=sample,
        topic=topic,
    )


def gap_error(source: str, gap: tuple[int, int, int], topic: str | None = None) -> InvalidInput:
    """The error for a ledger whose entries are not dense (``dense_sizes``' gap)."""
    ledger, n, missing = gap
    return InvalidInput(
        f"{_where('message', source, topic)}: ledger {ledger} has {n} entries but not 0..{n - 1} "
        f"(entry {missing} is missing); a ledger's entries are dense",
        source=source,
        column="entry_id",
        row={"ledger_id": ledger, "entry_id": missing},
        topic=topic,
    )
