"""The bucket tracker's shared parts, handed as one bundle to the collaborators that work on them.

Each part owns its own state (the index of positions, the mutable tail, the queue of loaded
segments, the sealed buckets, the counters, snapshot I/O and the bucket properties), and the lock
and job runner order the work on them. ``Intake``, ``Delivery``, ``BucketLifecycle``, ``Merges``
and ``Recovery`` each receive this bundle instead of the tracker, so none of them imports it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cursorkit.delayed.bucket_props import BucketProperties
from cursorkit.delayed.counters import Tally
from cursorkit.delayed.mutable_bucket import MutableBucket
from cursorkit.delayed.positions import TrackedPositions
from cursorkit.delayed.sealed import SealedBuckets
from cursorkit.delayed.segment_queue import SegmentQueue
from cursorkit.delayed.snapshot_io import SnapshotIO
from cursorkit.delayed.worker import JobRunner

__all__ = ["TrackerParts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerParts:
    """One tracker's parts (the bundle is fixed; the parts change inside, each under the lock)."""

    lock: threading.RLock
    jobs: JobRunner
    io: SnapshotIO
    props: BucketProperties
    positions: TrackedPositions
    tail: MutableBucket
    queue: SegmentQueue
    sealed: SealedBuckets
    tally: Tally
