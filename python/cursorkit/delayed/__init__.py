"""Delayed message delivery: Pulsar's in-memory tracker and PIP-195's bucket tracker, with storage.

* ``InMemoryDelayedDeliveryTracker``: one (deliver-at, ledger, entry) queue in Rust.
* ``BucketDelayedDeliveryTracker``: a mutable tail, immutable buckets with durable segment snapshots
  (``FileBucketSnapshotStorage``), merge, recovery; bucket pointers in the cursor properties
  (``FileCursorProperties``).
* ``ObjectStoreBucketSnapshotStorage``: the same snapshots on an object store (``s3://...``), for
  brokers that hand topics over; its bucket keys then live in ``ZkCursorStore.cursor_properties``.
* ``SharedDelayedIndex``: one index per topic for all subscriptions.
* ``DelayedDeliveryCollector``: PIP-195's Prometheus metrics.
"""

from __future__ import annotations

from cursorkit.ackstate.store.properties import FileCursorProperties, MemoryCursorProperties
from cursorkit.delayed.bucket import ImmutableBucket
from cursorkit.delayed.bucket_tracker import BucketDelayedDeliveryTracker
from cursorkit.delayed.config import BucketTrackerConfig
from cursorkit.delayed.counters import BucketCounters
from cursorkit.delayed.in_memory import InMemoryDelayedDeliveryTracker
from cursorkit.delayed.merge import select_merged_buckets
from cursorkit.delayed.metrics import DelayedDeliveryCollector
from cursorkit.delayed.recovery_report import RecoveryReport
from cursorkit.delayed.shared import SharedDelayedIndex, SubscriptionView
from cursorkit.delayed.storage.api import BucketSnapshotStorage
from cursorkit.delayed.storage.file import FileBucketSnapshotStorage
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage

__all__ = [
    "BucketCounters",
    "BucketDelayedDeliveryTracker",
    "BucketSnapshotStorage",
    "BucketTrackerConfig",
    "DelayedDeliveryCollector",
    "FileBucketSnapshotStorage",
    "FileCursorProperties",
    "ImmutableBucket",
    "InMemoryDelayedDeliveryTracker",
    "MemoryCursorProperties",
    "ObjectStoreBucketSnapshotStorage",
    "RecoveryReport",
    "SharedDelayedIndex",
    "SubscriptionView",
    "select_merged_buckets",
]
