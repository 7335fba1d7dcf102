"""Stage 4: one planned bucket of one topic built, with its topic's cursors."""

from __future__ import annotations

import pyarrow as pa

from cursorkit.pipeline.partitions.buckets import BUCKET_ID_SCHEMA, BUCKETS_SCHEMA, build_buckets
from cursorkit.pipeline.topic_stages.split import with_topic

__all__ = ["TOPIC_BUCKETS_SCHEMA", "build_topic_buckets"]

TOPIC_BUCKETS_SCHEMA = pa.schema([pa.field("topic", pa.string()), *BUCKETS_SCHEMA])
"""``build_buckets`` rows of one topic."""


def build_topic_buckets(
    tagged: pa.Table, cursors: pa.Table, *, max_time_step_ms: int, max_indexes_per_segment: int
) -> pa.Table:
    """Builds one planned bucket of one topic (``build_buckets`` on its rows, its topic's cursors)."""
    if not tagged.num_rows:
        return TOPIC_BUCKETS_SCHEMA.empty_table()
    topic = tagged.column("topic")[0].as_py()
    pickled: dict[str, bytes] = {}
    if cursors.num_rows:
        names = cursors.column("names")[0].as_py()
        blobs = cursors.column("cursors")[0].as_py()
        pickled = dict(zip(names, blobs, strict=True))
    rows = tagged.select([f.name for f in BUCKET_ID_SCHEMA]).cast(BUCKET_ID_SCHEMA)
    built = list(
        build_buckets(
            rows.to_batches(),
            max_time_step_ms=max_time_step_ms,
            max_indexes_per_segment=max_indexes_per_segment,
            cursors=pickled,
        )
    )
    return pa.Table.from_batches(
        [with_topic(topic, b, TOPIC_BUCKETS_SCHEMA) for b in built], TOPIC_BUCKETS_SCHEMA
    )
