"""The *delayed* stage: PIP-195 buckets planned at ledger boundaries, built in Rust on executors.

Built inside ``mapInArrow``, written through ``FileBucketSnapshotStorage`` with the cursor-properties
manifest.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed.bucket import bucket_key
from cursorkit.delayed.storage.file import FileBucketSnapshotStorage
from cursorkit.pipeline.partitions.buckets import BUCKET_ID_SCHEMA, BUCKETS_SCHEMA, build_buckets, tag_buckets
from cursorkit.pipeline.plan import PlannedBucket, plan_buckets
from cursorkit.pipeline.results import BucketRow
from cursorkit.pipeline.stages import spark_schema
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from cursorkit.proto.strict import parse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cursorkit.pipeline.message_index import MessageIndex
    from cursorkit.pipeline.rebuild_config import RebuildConfig

__all__ = ["SHARED_CURSOR", "build_delayed_index", "write_buckets"]

SHARED_CURSOR = "shared-delayed-index"
"""Cursor name recorded in the bucket snapshots of the topic's one shared delayed index."""


def build_delayed_index(
    msgs: DataFrame,
    now: int,
    cfg: RebuildConfig,
    index: MessageIndex,
    cursors: Mapping[str, Cursor],
    tmp: Path,
) -> tuple[list[BucketRow], int]:
    """The delayed index of the not-yet-due messages under ``tmp/delayed``; its rows and acked drops."""
    from pyspark.sql import functions as F

    plan = plan_buckets(index.not_yet_due, cfg.min_index_count_per_bucket)
    root = tmp / "delayed"
    root.mkdir()
    if not plan:
        FileCursorProperties(root / "cursor.properties").apply({})
        return [], 0
    nyd = msgs.filter(
        F.col("deliver_at").isNotNull()
        & (F.col("deliver_at") > F.col("publish_time"))
        & (F.col("deliver_at") > F.lit(now))
        & (F.col("deliver_at") <= F.lit(now + cfg.max_delay_ms))
    ).select("ledger_id", "entry_id", "deliver_at")
    tag = partial(tag_buckets, starts=[b.start_ledger_id for b in plan])
    build = partial(
        build_buckets,
        max_time_step_ms=cfg.max_time_step_per_segment_ms,
        max_indexes_per_segment=cfg.max_indexes_per_segment,
        cursors={name: pickle.dumps(c) for name, c in cursors.items()},
    )
    parts = max(1, min(len(plan), int(msgs.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)))
    built = (
        nyd.mapInArrow(tag, spark_schema(BUCKET_ID_SCHEMA))
        .repartition(parts, "bucket")
        .mapInArrow(build, spark_schema(BUCKETS_SCHEMA))
        .toArrow()
    )
    return write_buckets(root, plan, built, topic=cfg.topic, fsync=cfg.fsync)


def write_buckets(
    root: Path, plan: list[PlannedBucket], built: pa.Table, *, topic: str, fsync: bool = True
) -> tuple[list[BucketRow], int]:
    """Writes built buckets (``BUCKETS_SCHEMA`` rows) as snapshots under ``root/buckets``.

    Snapshots are written in plan order, then recorded all at once in ``root/cursor.properties``
    (one atomic write), so a crash before the end leaves only unrecorded snapshots.

    Returns the bucket rows of the report and how many indexes were dropped as acked everywhere.
    """
    rows: list[BucketRow] = []
    dropped = 0
    found = sorted(built.to_pylist(), key=lambda r: r["bucket"])
    storage = FileBucketSnapshotStorage(root / "buckets", fsync=fsync)
    storage.start()
    keys: dict[str, str] = {}
    try:
        for r in found:
            dropped += r["dropped_acked"]
            if not r["messages"]:
                continue
            planned = plan[r["bucket"]]
            meta = parse(SnapshotMetadata, r["metadata"])
            key = bucket_key(planned.start_ledger_id, planned.end_ledger_id)
            bucket_id = storage.create_bucket_snapshot(meta, r["segments"], key, topic, SHARED_CURSOR)
            keys[key] = str(bucket_id)
            rows.append(
                BucketRow(
                    bucket_id=bucket_id,
                    start_ledger_id=planned.start_ledger_id,
                    end_ledger_id=planned.end_ledger_id,
                    messages=r["messages"],
                    segments=len(r["segments"]),
                    snapshot_bytes=storage.get_bucket_snapshot_length(bucket_id),
                    first_deliver_at=r["first_deliver_at"],
                    last_deliver_at=r["last_deliver_at"],
                )
            )
    finally:
        storage.close()
    FileCursorProperties(root / "cursor.properties").apply(keys)
    return rows, dropped
