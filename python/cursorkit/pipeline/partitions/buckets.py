"""Stage 3: not-yet-due delayed messages tagged with their planned bucket, and each bucket built.

Sorting, dropping what every subscription acked, cutting into segments and encoding all run in Rust.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from cursorkit import _core
from cursorkit.delayed import snapshot
from cursorkit.pipeline.partitions.columns import int_column

__all__ = ["BUCKETS_SCHEMA", "BUCKET_ID_SCHEMA", "build_buckets", "tag_buckets"]

BUCKET_ID_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("deliver_at", pa.int64()),
    ]
)
"""Not-yet-due delayed messages tagged with the planned bucket they belong to."""

BUCKETS_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("messages", pa.int64()),
        ("dropped_acked", pa.int64()),
        ("metadata", pa.binary()),
        ("segments", pa.list_(pa.binary())),
        ("first_deliver_at", pa.int64()),
        ("last_deliver_at", pa.int64()),
    ]
)
"""One built bucket: its ``SnapshotMetadata`` bytes and encoded segments."""


def tag_buckets(batches: Iterable[pa.RecordBatch], *, starts: list[int]) -> Iterator[pa.RecordBatch]:
    """Tags each (ledger, entry, deliver_at) row with its planned bucket (``starts``: first ledgers)."""
    first = np.asarray(starts, dtype=np.int64)
    for batch in batches:
        if not batch.num_rows:
            continue
        ledgers = int_column(batch, "ledger_id")
        bucket = np.searchsorted(first, ledgers, side="right") - 1
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(bucket.astype(np.int32)),
                batch.column("ledger_id"),
                batch.column("entry_id"),
                batch.column("deliver_at"),
            ],
            schema=BUCKET_ID_SCHEMA,
        )


def build_buckets(
    batches: Iterable[pa.RecordBatch],
    *,
    max_time_step_ms: int,
    max_indexes_per_segment: int,
    cursors: Mapping[str, bytes],
) -> Iterator[pa.RecordBatch]:
    """Builds every bucket of a partition: sort, drop acked, cut into segments, encode (all Rust).

    ``cursors`` are the subscriptions' pickled cursors; a message acked by every one of them is
    dropped (rule ``delayed_acked``). With no subscription nothing is dropped.
    """
    import pickle

    loaded = [pickle.loads(c) for c in cursors.values()]
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return
    table = pa.Table.from_batches(parts, schema=BUCKET_ID_SCHEMA)
    bucket = np.asarray(table.column("bucket").to_numpy(), dtype=np.int64)
    ledgers = np.asarray(table.column("ledger_id").to_numpy(), dtype=np.int64)
    entries = np.asarray(table.column("entry_id").to_numpy(), dtype=np.int64)
    at = np.asarray(table.column("deliver_at").to_numpy(), dtype=np.int64)
    order = np.argsort(bucket, kind="stable")
    bucket, ledgers, entries, at = bucket[order], ledgers[order], entries[order], at[order]
    cuts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[cuts[1:], len(bucket)]
    out: dict[str, list[Any]] = {f.name: [] for f in BUCKETS_SCHEMA}
    for a, b in zip(cuts.tolist(), ends.tolist(), strict=True):
        ts, ls, es = _core.sort_indexes(at[a:b], ledgers[a:b], entries[a:b])
        dropped = 0
        if loaded:
            acked = np.ones(len(ls), dtype=np.bool_)
            for cursor in loaded:
                acked &= cursor.is_acked_many(ls, es)
            dropped = int(np.count_nonzero(acked))
            if dropped:
                keep = ~acked
                ts, ls, es = ts[keep], ls[keep], es[keep]
        meta, blobs = (
            (None, [])
            if not len(ts)
            else snapshot.encode(
                snapshot.cut(
                    ts,
                    ls,
                    es,
                    max_time_step_ms=max_time_step_ms,
                    max_indexes_per_segment=max_indexes_per_segment,
                )
            )
        )
        out["bucket"].append(int(bucket[a]))
        out["messages"].append(int(len(ts)))
        out["dropped_acked"].append(dropped)
        out["metadata"].append(meta.SerializeToString(deterministic=True) if meta is not None else b"")
        out["segments"].append(blobs)
        out["first_deliver_at"].append(int(ts[0]) if len(ts) else -1)
        out["last_deliver_at"].append(int(ts[-1]) if len(ts) else -1)
    yield pa.RecordBatch.from_pydict(out, schema=BUCKETS_SCHEMA)
