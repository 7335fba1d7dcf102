"""Moving a topic between brokers: A flushes and closes (or dies), B opens the same locations.

B recovers every ack A flushed and every delayed message A indexed; A's later writes are fenced and
leave nothing B or a reader would see.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from child_lines import Lines
from cursorkit import Position, errors
from cursorkit.ackstate import CursorStore, ZkCursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage
from cursorkit.stores import ObjectStore

pytestmark = pytest.mark.spark

CHILD = Path(__file__).parents[1] / "support" / "handover_child.py"
NOW = 1_000_000


def _tracker(store: ZkCursorStore, objects: ObjectStore, now: list[int]) -> BucketDelayedDeliveryTracker:
    return BucketDelayedDeliveryTracker(
        ObjectStoreBucketSnapshotStorage(objects, owner_epoch=store.owner_epoch),
        store.cursor_properties,
        clock=lambda: now[0],
        background=False,
        min_index_count_per_bucket=100,
        max_indexes_per_segment=40,
        tick_time_ms=1,
    )


def _drain(tracker: BucketDelayedDeliveryTracker) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    while tracker.has_message_available():
        got.extend((int(lid), int(eid)) for lid, eid in tracker.get_scheduled_messages(64).tolist())
    return sorted(got)


def test_broker_a_dies_and_broker_b_carries_on(zk_server: Any, tmp_path: Path) -> None:
    location = f"zk://{zk_server.hosts}/managed-ledgers/t/ns/persistent/h-{uuid.uuid4().hex[:8]}/sub"
    objects_dir = tmp_path / "objects"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), zk_server.hosts, location, str(objects_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = Lines(child, "broker A").next()
        assert line is not None, child.stderr.read() if child.stderr else ""
        flushed = json.loads(line)
    finally:
        child.kill()  # A dies: no close, no last flush
        child.wait()
    objects = ObjectStore(str(objects_dir))
    with CursorStore.open(location, objects=objects, owner="broker-b") as store:
        assert isinstance(store, ZkCursorStore) and not store.report.damaged
        assert store.report.previous_owner is not None and "broker-a" in store.report.previous_owner
        cursor = store.recover()
        assert [list(r) for r in cursor.individually_deleted.ranges()] == flushed["ranges"]
        now = [NOW]
        tracker = _tracker(store, objects, now)
        assert not tracker.recovery_report.damaged and len(tracker.immutable_buckets) >= 2
        now[0] += 120_000
        assert _drain(tracker) == sorted((lid, eid) for lid, eid in flushed["delayed"])
        tracker.close()


def test_broker_a_closes_then_its_late_writes_are_fenced(zk_server: Any, tmp_path: Path) -> None:
    location = f"zk://{zk_server.hosts}/managed-ledgers/t/ns/persistent/h-{uuid.uuid4().hex[:8]}/sub"
    objects = ObjectStore(str(tmp_path / "objects"))
    now = [NOW]
    a = CursorStore.create(location, objects=objects)
    cursor_a = a.recover()
    for e in range(0, 5_000, 2):
        cursor_a.ack(Position(1, e))
    tracker_a = _tracker(a, objects, now)
    delayed = [(lid, e) for lid in (1, 2, 3) for e in range(1, 250, 2)]
    for lid, e in delayed:
        tracker_a.add_message(lid, e, NOW + 1_000 + e)
    tracker_a.maintenance()
    tracker_a.checkpoint_tail()
    tracker_a.maintenance()
    a.flush(cursor_a)
    flushed = cursor_a.individually_deleted
    b = CursorStore.open(location, objects=objects)  # the hand-over; A has not even closed yet
    cursor_b = b.recover()
    assert cursor_b.individually_deleted == flushed
    cursor_a.ack(Position(1, 9_999))
    with pytest.raises(errors.Fenced):
        a.flush(cursor_a)
    with pytest.raises(errors.Fenced):
        a.cursor_properties["#pulsar.internal.delayed.bucket_7_9"] = "1"
    a.close()
    tracker_b = _tracker(b, objects, now)
    assert tracker_b.immutable_buckets and tracker_b.number_of_delayed_messages == len(delayed)
    now[0] += 10_000
    assert _drain(tracker_b) == delayed
    with CursorStore.open(location, objects=objects, read_only=True) as reader:
        assert reader.recover().individually_deleted == flushed  # none of A's fenced acks
        assert "#pulsar.internal.delayed.bucket_7_9" not in reader.cursor_properties
    tracker_b.close()
    b.close()
