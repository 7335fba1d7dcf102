"""``BucketTrackerConfig``: a bucket tracker's settings, with Pulsar's defaults and config names."""

from __future__ import annotations

from dataclasses import dataclass

from cursorkit.errors import InvalidArgument, InvalidInputType


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketTrackerConfig:
    """Settings of a bucket tracker, with Pulsar's defaults (its config names in each docstring)."""

    tick_time_ms: int = 1000
    """``delayedDeliveryTickTimeMillis``: non-strict trackers deliver up to one tick early."""
    strict: bool = False
    """``isDelayedDeliveryDeliverAtTimeStrict``: never deliver before deliver-at."""
    min_index_count_per_bucket: int = 50_000
    """``delayedDeliveryMinIndexCountPerBucket``: seal the tail at a ledger boundary past this."""
    max_time_step_per_segment_ms: int = 300_000
    """``delayedDeliveryMaxTimeStepPerBucketSnapshotSegmentSeconds`` (here in ms)."""
    max_indexes_per_segment: int = 5000
    """``delayedDeliveryMaxIndexesPerBucketSnapshotSegment``; -1 = unlimited."""
    max_num_buckets: int = -1
    """``delayedDeliveryMaxNumBuckets``: merge adjacent buckets beyond this; <= 0 disables."""
    persist_mutable_tail: bool = False
    """Beyond Pulsar: ``checkpoint_tail()`` and ``close()`` persist the tail (no replay after a restart)."""
    storage_retries: int = 3
    """Attempts per storage write/delete (Pulsar's MaxRetryTimes)."""
    max_pending_snapshots: int = 8
    """Snapshot jobs the worker may fall behind by before adds wait for it (bounds the memory of
    sealed buckets not yet written: ~1.2 MB each at 50,000 indexes)."""

    def __post_init__(self) -> None:
        for name in (
            "tick_time_ms",
            "min_index_count_per_bucket",
            "max_time_step_per_segment_ms",
            "storage_retries",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputType(f"{name} must be an int, got {type(value).__name__}")
            if value < (0 if name == "tick_time_ms" else 1):
                raise InvalidArgument(f"{name} must be positive, got {value}")
        if self.max_indexes_per_segment != -1 and self.max_indexes_per_segment < 1:
            raise InvalidArgument(
                f"max_indexes_per_segment must be -1 or positive, got {self.max_indexes_per_segment}"
            )
