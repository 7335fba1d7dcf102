"""``SnapshotIO``: a tracker's snapshot reads and writes, each timed into ``op_stats``, writes retried.

Sorted indexes are cut into segments by the tracker's time step and index limit, encoded, and
written under the tracker's topic and cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import ImmutableBucket, Int64Array, SegmentArrays
from cursorkit.delayed.config import BucketTrackerConfig
from cursorkit.delayed.metrics import OpStats
from cursorkit.delayed.storage.api import BucketSnapshotStorage
from cursorkit.errors import CorruptSnapshot, PersistFailed

T = TypeVar("T")


class SnapshotIO:
    """One tracker's use of its snapshot storage."""

    def __init__(
        self, storage: BucketSnapshotStorage, config: BucketTrackerConfig, *, topic: str, cursor: str
    ) -> None:
        self.storage = storage
        self.config = config
        self.topic = topic
        self.cursor = cursor
        self.op_stats = OpStats()

    def timed(self, op: str, fn: Callable[[], T], *, retries: int = 1) -> T:
        """``fn()``, recorded as one ``op``; a ``PersistFailed`` or ``OSError`` is tried ``retries`` times."""
        for attempt in range(1, retries + 1):
            t0 = time.perf_counter()
            try:
                result = fn()
            except (PersistFailed, OSError):
                self.op_stats.record(op, False, (time.perf_counter() - t0) * 1000)
                if attempt == retries:
                    raise
                continue
            except Exception:
                self.op_stats.record(op, False, (time.perf_counter() - t0) * 1000)
                raise
            self.op_stats.record(op, True, (time.perf_counter() - t0) * 1000)
            return result
        raise AssertionError("unreachable")

    def cut(self, ts: Int64Array, ls: Int64Array, es: Int64Array) -> SegmentArrays:
        """Sorted indexes cut into segments by this tracker's time step and index limit."""
        return snapshot.cut(
            ts,
            ls,
            es,
            max_time_step_ms=self.config.max_time_step_per_segment_ms,
            max_indexes_per_segment=self.config.max_indexes_per_segment,
        )

    def write(self, segs: SegmentArrays, key: str) -> tuple[int, int]:
        """Encodes and writes a snapshot; returns (snapshot id, stored bytes)."""
        meta, blobs = snapshot.encode(segs)
        bucket_id = self.timed(
            "create",
            lambda: self.storage.create_bucket_snapshot(meta, blobs, key, self.topic, self.cursor),
            retries=self.config.storage_retries,
        )
        return bucket_id, self.storage.get_bucket_snapshot_length(bucket_id)

    def delete(self, bucket_id: int) -> None:
        """Deletes a snapshot, retried; the last failure is raised."""
        self.timed(
            "delete",
            partial(self.storage.delete_bucket_snapshot, bucket_id),
            retries=self.config.storage_retries,
        )

    def delete_quietly(self, bucket_id: int) -> bool:
        """Deletes a snapshot nothing needs any more; a failure leaves an orphan for recovery."""
        try:
            self.delete(bucket_id)
        except (PersistFailed, OSError):
            return False
        return True

    def load(self, bucket_id: int, first: int, last: int) -> list[bytes]:
        """Encoded segments ``first..last`` of a stored snapshot, timed as a load."""
        return self.timed("load", partial(self.storage.get_bucket_snapshot_segment, bucket_id, first, last))

    def segment(self, b: ImmutableBucket, segment_id: int) -> tuple[Int64Array, Int64Array, Int64Array]:
        """Columns of a bucket's segment: from its pending arrays, or loaded from its snapshot."""
        if b.pending is not None:
            return b.pending.segment(segment_id - 1)
        assert b.bucket_id is not None
        blobs = self.load(b.bucket_id, segment_id, segment_id)
        if not blobs:
            raise CorruptSnapshot(f"bucket snapshot {b.bucket_id} has no segment {segment_id}")
        return snapshot.decode(blobs).segment(0)
