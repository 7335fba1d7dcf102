"""A subscription's delayed-delivery tracker, of the kind the broker was told to use.

``bucket`` (the default): PIP-195's bucket tracker, its sealed buckets snapshotted in the
subscription's directory (``delayed/``) and their keys in the cursor's properties, so a restart
recovers them; the unsealed tail is found again as the backlog is re-read, as in Pulsar.
``memory``: Pulsar's in-memory tracker; a restart re-reads the backlog for every delayed message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cursorkit import Cursor, CursorStore
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    InMemoryDelayedDeliveryTracker,
)

__all__ = ["DelayedTracker", "open_tracker"]

DelayedTracker = BucketDelayedDeliveryTracker | InMemoryDelayedDeliveryTracker


def open_tracker(
    config: BrokerConfig,
    directory: Path,
    store: CursorStore,
    cursor: Cursor,
    *,
    topic: str,
    clock: Callable[[], int],
) -> DelayedTracker:
    """The tracker of a subscription whose cursor is ``cursor`` in ``store``."""
    if config.delayed_tracker == "memory":
        return InMemoryDelayedDeliveryTracker(tick_time_ms=config.tick_time_ms, clock=clock)
    return BucketDelayedDeliveryTracker(
        FileBucketSnapshotStorage(directory / "delayed", fsync=config.sync),
        store.cursor_properties,
        clock=clock,
        topic=topic,
        cursor=cursor.name or "subscription",
        mark_delete=cursor.mark_delete_position,
        tick_time_ms=config.tick_time_ms,
        min_index_count_per_bucket=config.bucket_min_index_count,
    )
