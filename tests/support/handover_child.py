"""Broker A of the hand-over test: owns a topic's cursor and delayed index, flushes, then waits to die.

``handover_child.py HOSTS LOCATION OBJECTS``: opens (or creates) the cursor znode, acks every third
entry of ledgers 1..3, adds 300 delayed messages to a bucket tracker whose snapshots and bucket keys
go to the object store and the znode, flushes both, prints one JSON line of what it flushed, and
sleeps until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from cursorkit import Position
from cursorkit.ackstate import CursorStore, ZkCursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage
from cursorkit.stores import ObjectStore

NOW = 1_000_000


def main() -> None:
    _hosts, location, objects_dir = sys.argv[1:4]
    objects = ObjectStore(objects_dir)
    store = CursorStore.create(location, objects=objects, owner="broker-a")
    assert isinstance(store, ZkCursorStore)
    cursor = store.recover()
    tracker = BucketDelayedDeliveryTracker(
        ObjectStoreBucketSnapshotStorage(objects, owner_epoch=store.owner_epoch),
        store.cursor_properties,
        clock=lambda: NOW,
        background=False,
        min_index_count_per_bucket=100,
        max_indexes_per_segment=40,
        tick_time_ms=1,
    )
    delayed = []
    for ledger in (1, 2, 3):
        for entry in range(0, 3_000, 3):
            cursor.ack(Position(ledger, entry))
        for entry in range(1, 301, 3):
            tracker.add_message(ledger, entry, NOW + 60_000 + entry)
            delayed.append([ledger, entry])
    tracker.maintenance()
    tracker.checkpoint_tail()
    tracker.maintenance()
    store.flush(cursor)
    print(json.dumps({"ranges": cursor.individually_deleted.ranges(), "delayed": delayed}), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
