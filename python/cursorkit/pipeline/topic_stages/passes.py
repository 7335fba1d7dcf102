"""The columns a pass hands to Spark, beside the stages proper.

Each topic's latest publish time, the batch entries, the not-yet-due delayed messages, the acks by
batch index, and the ledger sizes joined to acks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit.pipeline.partitions.columns import Int64Array
from cursorkit.pipeline.topic_stages.split import split_by_topic, topic_column

__all__ = [
    "BATCH_ENTRY_SCHEMA",
    "LATEST_SCHEMA",
    "NOT_YET_DUE_SCHEMA",
    "LedgerSizes",
    "acks_by_batch_index",
    "batch_entries",
    "latest_publish",
    "not_yet_due",
    "with_ledger_sizes",
]

LATEST_SCHEMA = pa.schema([("topic", pa.string()), ("latest", pa.int64())])
"""Per topic of a partition: its latest ``publish_time`` (the topic's ``now`` unless given)."""

BATCH_ENTRY_SCHEMA = pa.schema(
    [("topic", pa.string()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()), ("batch_size", pa.int64())]
)
"""The batch entries of the message log (``batch_size`` > 1), for the batch-index acks."""

NOT_YET_DUE_SCHEMA = pa.schema(
    [("topic", pa.string()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()), ("deliver_at", pa.int64())]
)
"""The delayed messages not yet due at their topic's ``now`` and within ``max_delay_ms``."""


def latest_publish(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each topic's latest ``publish_time`` in a partition (rows with a null topic are skipped)."""
    latest: dict[str, int] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch.select(["topic", "publish_time"])])
        agg = table.group_by("topic").aggregate([("publish_time", "max")])
        for t, v in zip(
            agg.column("topic").to_pylist(), agg.column("publish_time_max").to_pylist(), strict=True
        ):
            if t is not None and v is not None:
                latest[t] = max(latest.get(t, v), v)
    yield pa.RecordBatch.from_pydict(
        {"topic": list(latest), "latest": list(latest.values())}, schema=LATEST_SCHEMA
    )


def batch_entries(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The rows of batch entries (``batch_size`` > 1) with their size."""
    for batch in batches:
        keep = pc.fill_null(pc.greater(batch.column("batch_size"), 1), False)
        part = batch.filter(keep)
        if part.num_rows:
            yield pa.RecordBatch.from_arrays(
                [
                    part.column("topic"),
                    part.column("ledger_id"),
                    part.column("entry_id"),
                    pc.cast(part.column("batch_size"), pa.int64()),
                ],
                schema=BATCH_ENTRY_SCHEMA,
            )


def not_yet_due(
    batches: Iterable[pa.RecordBatch], *, now_ms: Mapping[str, int], max_delay_ms: int
) -> Iterator[pa.RecordBatch]:
    """The delayed messages each topic's delayed index holds (the single-topic job's filter)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        for topic, part in split_by_topic(batch):
            if topic is None or topic not in now_ms:
                continue
            now = now_ms[topic]
            at = part.column("deliver_at")
            keep = pc.and_(
                pc.and_(pc.greater(at, part.column("publish_time")), pc.greater(at, now)),
                pc.less_equal(at, now + max_delay_ms),
            )
            rows = part.filter(pc.fill_null(keep, False))
            if rows.num_rows:
                yield pa.RecordBatch.from_arrays(
                    [
                        topic_column(topic, rows.num_rows),
                        rows.column("ledger_id"),
                        rows.column("entry_id"),
                        rows.column("deliver_at"),
                    ],
                    schema=NOT_YET_DUE_SCHEMA,
                )


def acks_by_batch_index(batches: Iterable[pa.RecordBatch], *, indexed: bool) -> Iterator[pa.RecordBatch]:
    """The ack rows with (``indexed``) or without a ``batch_index``: only the former need batch sizes."""
    for batch in batches:
        nulls = batch.column("batch_index").is_null()
        part = batch.filter(pc.invert(nulls) if indexed else nulls)
        if part.num_rows:
            yield part


LedgerSizes = Mapping[str, tuple[Int64Array, Int64Array]]
"""Topic -> its ledgers (sorted) and their entry counts."""


def with_ledger_sizes(batch: pa.RecordBatch, topic: str, ledgers: LedgerSizes) -> pa.RecordBatch:
    """``batch`` with a ``ledger_size`` column: the entry count of each row's ledger (null: unknown)."""
    ids, sizes = ledgers.get(topic, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    col = batch.column("ledger_id")
    lg = np.asarray(pc.fill_null(col, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    at = np.searchsorted(ids, lg)
    found = at < len(ids)
    found[found] = ids[at[found]] == lg[found]
    values = np.where(found, sizes[np.minimum(at, max(len(ids) - 1, 0))] if len(ids) else 0, 0)
    return batch.append_column("ledger_size", pa.array(values, pa.int64(), mask=~found))
