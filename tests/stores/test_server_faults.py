"""Faults under the shared stores, each with its own server: nothing acknowledged and flushed is lost.

* the ZooKeeper server SIGKILLed and restarted while a broker flushes;
* the server gone for most of a minute: a flush lands within two seconds of its return;
* the session expired while the server is paused (SIGSTOP past the session timeout);
* two owners flushing at once while the second takes the cursor over;
* the object store paused during a state-object upload and a bucket snapshot upload.

After each, the cursor read back holds every ack of the last flush that returned, and nothing a
fenced owner tried to write.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import fuzz_budget
from bucket_builder import CURSOR, KEY, TOPIC, make_bucket
from cursorkit import Position, RangeSet, errors
from cursorkit.ackstate import CursorStore, ZkCursorStore
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage
from cursorkit.stores import ObjectStore
from object_store import s3_prefix, s3_server_process
from zookeeper_server import ZkServer

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ZkServer]:
    pytest.importorskip("kazoo")
    s = ZkServer(tmp_path / "zk")
    s.start()
    yield s
    s.stop()


def _location(server: ZkServer) -> str:
    return f"zk://{server.hosts}/managed-ledgers/t/ns/persistent/f-{uuid.uuid4().hex[:8]}/sub"


def _read_back(location: str, objects: ObjectStore | None = None) -> RangeSet:
    with CursorStore.open(location, read_only=True, objects=objects, operation_timeout=10) as store:
        return store.recover().individually_deleted


def _contains(outer: RangeSet, inner: RangeSet) -> bool:
    copy = outer.copy()
    for row in inner.ranges():
        copy.add_open_closed(*row)
    return copy == outer


def test_server_killed_and_restarted_during_flushes(server: ZkServer, tmp_path: Path) -> None:
    objects = ObjectStore(str(tmp_path / "objects"))
    loc = _location(server)
    store = CursorStore.create(loc, objects=objects, operation_timeout=1.5, timeout=30.0)
    cursor = store.recover()
    confirmed = RangeSet()
    failures = 0
    for step in range(60):
        for e in range(step * 60, step * 60 + 60, 2):  # 30 new holes a step: a state object soon
            cursor.ack(Position(1, e))
        if step == 20:
            server.kill()
        if step == 26:
            server.start()
        try:
            store.flush(cursor)
            confirmed = cursor.individually_deleted
        except errors.PersistFailed as e:
            assert not isinstance(e, errors.Fenced)
            failures += 1
    assert failures >= 5 and len(confirmed) == len(cursor.individually_deleted)
    store.close()
    back = _read_back(loc, objects)
    assert _contains(back, confirmed) and _contains(cursor.individually_deleted, back)


OUTAGE_S = 55.0 if fuzz_budget.LONG else 20.0
"""Long enough that kazoo's own reconnect pauses (doubling to an hour) reach 25-50 s under
``make fuzz``, 8-16 s in ``make test``: either way far past the 2 s the flush must land within."""


@pytest.mark.fuzz
def test_flushes_land_within_seconds_of_the_server_returning_from_a_long_outage(server: ZkServer) -> None:
    """Reconnect attempts stay at most 0.6 s apart however long ZooKeeper was gone."""
    loc = _location(server)
    store = CursorStore.create(loc, operation_timeout=1.0)
    cursor = store.recover()
    cursor.ack(Position(5, 1))
    store.flush(cursor)
    server.kill()
    entry = 3
    outage_ends = time.monotonic() + OUTAGE_S
    while time.monotonic() < outage_ends:  # every flush fails while it is gone, none hangs
        cursor.ack(Position(5, entry))
        entry += 2
        began = time.monotonic()
        with pytest.raises(errors.PersistFailed) as caught:
            store.flush(cursor)
        assert not isinstance(caught.value, errors.Fenced) and time.monotonic() - began < 3.0
        time.sleep(2.0)
    server.start()
    back = time.monotonic()
    while True:
        try:
            store.flush(cursor)
            break
        except errors.PersistFailed as e:
            assert not isinstance(e, errors.Fenced)
            assert time.monotonic() - back < 15, "no flush within 15 s of ZooKeeper's return"
            time.sleep(0.05)
    took = time.monotonic() - back
    assert took < 2.0, f"the first flush landed {took:.1f} s after ZooKeeper's return"
    assert _read_back(loc) == cursor.individually_deleted
    store.close()


def test_session_expired_while_the_server_is_paused(server: ZkServer) -> None:
    loc = _location(server)
    store = CursorStore.create(loc, timeout=1.0, operation_timeout=1.0)  # session timeout 1 s
    assert isinstance(store, ZkCursorStore)
    session_id = store._session.client.client_id[0]
    cursor = store.recover()
    cursor.ack(Position(2, 1))
    store.flush(cursor)
    confirmed = cursor.individually_deleted
    server.pause()
    try:
        cursor.ack(Position(2, 3))
        with pytest.raises(errors.PersistFailed):
            store.flush(cursor)
        time.sleep(2.5)  # past the session timeout
    finally:
        server.resume()
    # Whether the paused server expires the session on waking races the client's queued pings, and
    # a session closed by another client that joined it races the store's own reconnection: the
    # session is ended until the store is seen on a new one (each try wins far more often than not).
    deadline = time.monotonic() + 60
    while True:
        held = store._session.client.client_id  # None while the store is between connections
        if held is not None and held[0] == session_id:
            _end_session(server, held)
        try:
            store.flush(cursor)
        except errors.PersistFailed as e:
            assert not isinstance(e, errors.Fenced) and time.monotonic() < deadline
            time.sleep(0.2)
            continue
        held = store._session.client.client_id
        if held is not None and held[0] != session_id:
            break  # a new session, the same owner
        assert time.monotonic() < deadline, "the old session outlived every attempt to end it"
    back = _read_back(loc)
    assert _contains(back, confirmed) and back == cursor.individually_deleted
    store.close()


def _end_session(server: ZkServer, client_id: tuple[int, bytes]) -> None:
    """Closes a ZooKeeper session from another client that joins it (its id and password)."""
    from kazoo.client import KazooClient

    other = KazooClient(hosts=server.hosts, client_id=client_id, timeout=5.0)
    try:
        other.start(timeout=15)
        other.stop()
    finally:
        other.close()


def test_two_owners_flushing_while_the_second_takes_over(server: ZkServer) -> None:
    loc = _location(server)
    a = CursorStore.create(loc)
    cursor_a = a.recover()
    confirmed_a: list[RangeSet] = []
    fenced = threading.Event()

    def broker_a() -> None:
        for e in range(0, 4_000, 2):
            cursor_a.ack(Position(3, e))
            try:
                a.flush(cursor_a)
                confirmed_a.append(cursor_a.individually_deleted)
            except errors.Fenced:
                fenced.set()
                return

    thread = threading.Thread(target=broker_a)
    thread.start()
    while len(confirmed_a) < 20:
        time.sleep(0.01)
    b = CursorStore.open(loc)
    cursor_b = b.recover()
    thread.join()
    assert fenced.is_set()
    assert _contains(cursor_b.individually_deleted, confirmed_a[-1])  # nothing A flushed is lost
    cursor_b.ack(Position(9, 0))
    b.flush(cursor_b)
    assert _read_back(loc) == cursor_b.individually_deleted  # nothing of A's fenced writes is visible
    a.close()
    b.close()


def test_object_store_paused_during_uploads(server: ZkServer) -> None:
    with s3_server_process() as (settings, proc):
        objects = s3_prefix(settings, request_timeout=1.0, connect_timeout=1.0)
        loc = _location(server)
        store = CursorStore.create(loc, objects=objects)
        cursor = store.recover()
        for e in range(0, 5_000, 2):
            cursor.ack(Position(4, e))
        store.flush(cursor)
        confirmed = cursor.individually_deleted
        buckets = ObjectStoreBucketSnapshotStorage(objects)
        buckets.start()
        meta, segments = make_bucket(3)
        kept = buckets.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
        proc.send_signal(signal.SIGSTOP)
        try:
            cursor.ack(Position(4, 9_001))
            with pytest.raises(errors.PersistFailed):
                store.flush(cursor)
            with pytest.raises(errors.PersistFailed):
                buckets.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
        finally:
            proc.send_signal(signal.SIGCONT)
        assert _contains(_read_back(loc, objects), confirmed)  # the last flush is what a reader gets
        store.flush(cursor)
        assert _read_back(loc, objects) == cursor.individually_deleted
        assert buckets.get_bucket_snapshot_segment(kept, 1, 3) == segments
        buckets.close()
        store.close()
