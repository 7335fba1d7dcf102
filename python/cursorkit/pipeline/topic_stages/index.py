"""Stages 1 and 2: the message index per topic of a partition, then one topic's index merged.

The merge gives the topic's dense ledger sizes, its bucket plan and its Key_Shared figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa

from cursorkit.pipeline.keyload import key_load
from cursorkit.pipeline.partitions.columns import Int64Array
from cursorkit.pipeline.partitions.index import INDEX_SCHEMA, SLOTS, index_messages
from cursorkit.pipeline.plan import PlannedBucket, plan_buckets
from cursorkit.pipeline.topic_stages.split import grouped_by_topic, null_topic_stats, with_topic

__all__ = [
    "TOPIC_INDEX_SCHEMA",
    "TOPIC_STATE_SCHEMA",
    "dense_slots",
    "index_topics",
    "merge_topic_index",
    "plan_of",
    "sparse_slots",
]

TOPIC_INDEX_SCHEMA = pa.schema([pa.field("topic", pa.string()), *INDEX_SCHEMA])
"""``index_messages`` rows of one topic of a partition; slot histograms are sparse
(``sparse_slots``) so a small topic's row stays small."""

TOPIC_STATE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("now_ms", pa.int64()),
        ("ledgers", pa.list_(pa.int64())),
        ("sizes", pa.list_(pa.int64())),
        ("not_yet_due", pa.list_(pa.int64())),
        ("bucket_of_ledger", pa.list_(pa.int32())),
        ("plan", pa.list_(pa.int64())),
        ("stats", pa.string()),
    ]
)
"""One topic's merged index: its dense ledgers and sizes, not-yet-due counts, the bucket plan
(start, end, messages per bucket, flattened) and each ledger's bucket (-1: none), and a JSON
``stats`` of counts, problems, the hours histogram, key load and a structural error if any."""


def sparse_slots(dense: bytes) -> bytes:
    """A 65,536-slot int64 histogram as (slot, count) int64 pairs of its non-zero slots."""
    h = np.frombuffer(dense, dtype=np.int64)
    nz = np.flatnonzero(h)
    return np.stack([nz.astype(np.int64), h[nz]]).T.astype("<i8").tobytes()


def dense_slots(pairs: Iterable[bytes]) -> Int64Array:
    """The sum of sparse histograms (``sparse_slots``) as a dense 65,536-slot histogram."""
    out = np.zeros(SLOTS, dtype=np.int64)
    for raw in pairs:
        p = np.frombuffer(raw, dtype="<i8").reshape(-1, 2)
        np.add.at(out, p[:, 0], p[:, 1])
    return out


def index_topics(
    batches: Iterable[pa.RecordBatch], *, now_ms: Mapping[str, int], max_delay_ms: int
) -> Iterator[pa.RecordBatch]:
    """``index_messages`` per topic of a partition (each topic at its own ``now_ms``)."""
    for topic, parts in grouped_by_topic(batches).items():
        if topic is None:
            stats = null_topic_stats(parts)
            yield _index_stats_only(None, stats)
            continue
        for out in index_messages(parts, now_ms=now_ms[topic], max_delay_ms=max_delay_ms):
            for name in ("range_slots", "consistent_slots"):  # only the last (stats) row holds one
                i = out.schema.get_field_index(name)
                slots = out.column(i).to_pylist()
                slots[-1] = sparse_slots(slots[-1])
                out = out.set_column(i, name, pa.array(slots, pa.binary()))
            yield with_topic(topic, out, TOPIC_INDEX_SCHEMA)


def _index_stats_only(topic: str | None, problems_stats: Mapping[str, Any]) -> pa.RecordBatch:
    stats = {
        "rows": problems_stats["rows"],
        "delayed": 0,
        "delayed_due": 0,
        "delayed_beyond_max_delay": 0,
        "batch_entries": 0,
        "max_publish_time": -1,
        "hours": {},
        "problems": problems_stats["problems"],
    }
    return pa.RecordBatch.from_pydict(
        {
            "topic": [topic],
            "ledger_id": [-1],
            "bitmap": [b""],
            "rows": [problems_stats["rows"]],
            "not_yet_due": [0],
            "stats": [json.dumps(stats)],
            "range_slots": [b""],
            "consistent_slots": [b""],
        },
        schema=TOPIC_INDEX_SCHEMA,
    )


def merge_topic_index(
    table: pa.Table, *, now_ms: Mapping[str, int], min_index_count_per_bucket: int, consumers: int
) -> pa.Table:
    """Merges one topic's partial index rows: dense ledger sizes, the bucket plan and the figures."""
    from cursorkit.pipeline.message_index import dense_sizes, merge_index_rows

    rows = table.to_pylist()
    topic = rows[0]["topic"]
    range_raw = [r["range_slots"] for r in rows if r["ledger_id"] == -1]
    consistent_raw = [r["consistent_slots"] for r in rows if r["ledger_id"] == -1]
    for r in rows:
        r["range_slots"] = r["consistent_slots"] = None
    index, problems = merge_index_rows(rows)
    valid = index.positions.total_cardinality()
    counted = index.rows - sum(problems.counts.values())
    sizes, gap = dense_sizes(index.positions)
    plan = plan_buckets(index.not_yet_due, min_index_count_per_bucket) if gap is None else []
    ledgers = sorted(sizes)
    starts = np.asarray([b.start_ledger_id for b in plan], dtype=np.int64)
    bucket = (np.searchsorted(starts, np.asarray(ledgers, dtype=np.int64), side="right") - 1).astype(np.int32)
    loads = key_load(dense_slots(range_raw), dense_slots(consistent_raw), consumers) if topic else []
    stats = {
        "rows": index.rows,
        "delayed": index.delayed,
        "delayed_due": index.due,
        "delayed_beyond_max_delay": index.beyond,
        "batch_entries": index.batch_entries,
        "hours": {str(k): v for k, v in index.hours.items()},
        "problems": problems.to_json(),
        "duplicates_across_partitions": counted - valid if not problems.counts else 0,
        "gap": list(gap) if gap is not None else None,
        "key_load": [asdict(k) for k in loads],
    }
    return pa.Table.from_pydict(
        {
            "topic": [topic],
            "now_ms": [now_ms.get(topic, 0) if topic is not None else 0],
            "ledgers": [ledgers],
            "sizes": [[sizes[lg] for lg in ledgers]],
            "not_yet_due": [[index.not_yet_due.get(lg, 0) for lg in ledgers]],
            "bucket_of_ledger": [bucket.tolist()],
            "plan": [[v for b in plan for v in (b.start_ledger_id, b.end_ledger_id, b.messages)]],
            "stats": [json.dumps(stats)],
        },
        schema=TOPIC_STATE_SCHEMA,
    )


def plan_of(flat: list[int]) -> list[PlannedBucket]:
    """The bucket plan from ``TOPIC_STATE_SCHEMA.plan``."""
    return [PlannedBucket(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
