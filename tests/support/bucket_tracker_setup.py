"""A bucket tracker with small limits on a hand-driven clock, and its snapshot directory opened alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage, FileCursorProperties
from manual_clock import Clock


def tracker(tmp_path: Path, clock: Clock, **kw: Any) -> BucketDelayedDeliveryTracker:
    settings: dict[str, Any] = {
        "tick_time_ms": 1,
        "min_index_count_per_bucket": 10,
        "max_time_step_per_segment_ms": 100,
        "max_indexes_per_segment": 4,
        "background": False,
    }
    settings.update(kw)
    props = settings.pop("props", None) or FileCursorProperties(tmp_path / "props")
    return BucketDelayedDeliveryTracker(
        FileBucketSnapshotStorage(tmp_path / "snaps"), props, clock=clock, **settings
    )


def open_storage(tmp_path: Path) -> FileBucketSnapshotStorage:
    """The tracker's snapshot directory, opened on its own (while no tracker holds it)."""
    s = FileBucketSnapshotStorage(tmp_path / "snaps")
    s.start()
    return s


def fill(t: BucketDelayedDeliveryTracker, ledger: int, n: int, at0: int, step: int = 10) -> None:
    for e in range(n):
        assert t.add_message(ledger, e, at0 + e * step)
