"""Shared stores (issue 18) against their floors: raw kazoo and raw ``pyarrow.fs`` on the same servers.

* 1,000 cursors with 100 ack ranges each flushed through ZooKeeper (``flush_many``), beside raw
  pipelined kazoo ``set_async`` writes of the same bytes to the same znodes: ≥ 0.8× their rate.
* A bucket snapshot written to, and a segment read from, moto's S3 server, beside a raw
  ``pyarrow.fs`` PUT and a raw ranged GET of the same bytes: ≥ 0.8× each.
* A topic hand-over on localhost: broker A closes, broker B opens and recovers a cursor with 10,000
  ranges (state object on the S3 server): ≤ 50 ms.

The servers are real (ZooKeeper from pyspark's jars, moto's standalone server), started once for
the module. ``make test`` runs each body once, shrunk; ``make bench`` measures.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cursor_workloads as cw
import delayed_workloads as dw
import rangeset_workloads as rw
from cursorkit import Position
from cursorkit.ackstate import CursorStore, ZkCursorStore, flush_many
from cursorkit.delayed.storage.format import bucket_name
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage
from cursorkit.stores import ObjectStore

CURSORKIT = "cursorkit"
RAW = "raw floor (same bytes, same server)"

FLUSH = "ZooKeeper flushes, 1,000 cursors × 100 ranges (flushes/s)"
PUT = "bucket snapshot write, 50,000 indexes (MB/s)"
GET = "segment read, 5,000 indexes (reads/s)"
HANDOVER = "hand-over: close on A, open + recover on B, 10,000 ranges"
FLUSH_RATIO = "ZooKeeper flushes ÷ raw kazoo"
PUT_RATIO = "snapshot write ÷ raw put"
GET_RATIO = "segment read ÷ raw ranged get"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(FLUSH, "/s", True, None),
        cw.Row(FLUSH_RATIO, "×", True, 0.8),
        cw.Row(PUT, "MB/s", True, None),
        cw.Row(PUT_RATIO, "×", True, 0.8),
        cw.Row(GET, "/s", True, None),
        cw.Row(GET_RATIO, "×", True, 0.8),
        cw.Row(HANDOVER, "ms", False, 50.0),
    ],
    peers=(RAW,),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Shared stores: ZooKeeper and object storage - {mode}", judge=not smoke)


def _ratio(row: str, metric: str) -> None:
    """Records cursorkit's rate over the floor's on ``metric``, once both are measured."""
    ours, floor = TABLE.cells.get((metric, CURSORKIT)), TABLE.cells.get((metric, RAW))
    if ours and floor and floor[0]:
        TABLE.cells[(row, CURSORKIT)] = (ours[0] / floor[0], "")


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("kazoo")
    from zookeeper_server import running

    with running(tmp_path_factory.mktemp("zk-bench")) as server:
        yield server


@pytest.fixture(scope="module")
def s3() -> Iterator[ObjectStore]:
    from object_store import s3_prefix, s3_server

    with s3_server() as settings:
        yield s3_prefix(settings, "b")


@pytest.fixture
def storage(s3: ObjectStore) -> Iterator[ObjectStoreBucketSnapshotStorage]:
    """A started bucket storage on the S3 prefix, closed afterwards."""
    with ObjectStoreBucketSnapshotStorage(s3) as started:
        yield started


def _cursors(zk: Any, tag: str, n: int) -> tuple[list[ZkCursorStore], list[Any]]:
    root = f"zk://{zk.hosts}/managed-ledgers/bench/ns/persistent/{tag}-{uuid.uuid4().hex[:6]}"
    stores = [CursorStore.create(f"{root}/sub-{i}") for i in range(n)]
    cursors = [s.recover() for s in stores]
    for c in cursors:  # 100 ranges each
        c.ack_many(np.ones(100, np.int64), np.arange(0, 200, 2, dtype=np.int64))
    assert all(not isinstance(r, Exception) for r in flush_many(zip(stores, cursors, strict=True)))
    assert all(isinstance(s, ZkCursorStore) for s in stores)
    return [s for s in stores if isinstance(s, ZkCursorStore)], cursors


def test_zookeeper_flushes(benchmark: Any, smoke: bool, zk: Any) -> None:
    """Cursorkit's flush_many and the raw writes alternate round by round (the server's pace drifts)."""
    n = 50 if smoke else 1_000
    stores, cursors = _cursors(zk, "ck", n)
    raw_stores, _ = _cursors(zk, "raw", n)
    client = stores[0]._session.client
    writes = [(s.path, s._node.last_data) for s in raw_stores]  # the same bytes a flush writes
    step = [200]

    def ours() -> None:
        for c in cursors:  # one more ack each, so no flush is skipped; ranges stay at 100
            c.ack(Position(1, step[0] - 1))
        step[0] += 2
        results = flush_many(zip(stores, cursors, strict=True))
        assert not any(isinstance(r, Exception) for r in results)

    def raw() -> None:
        calls = [client.set_async(path, data, -1) for path, data in writes]
        for call in calls:
            call.get(timeout=30)

    timers = {CURSORKIT: rw.BestTimer(ours), RAW: rw.BestTimer(raw)}

    def both() -> None:
        for impl in (CURSORKIT, RAW):
            gc.collect()
            timers[impl]()

    benchmark.group = "ZooKeeper flushes"
    benchmark.pedantic(both, rounds=1 if smoke else 15, warmup_rounds=0 if smoke else 1)
    for impl, timer in timers.items():
        TABLE.record(FLUSH, impl, n / timer.best, lower=False)
    _ratio(FLUSH_RATIO, FLUSH)
    for s in (*stores, *raw_stores):
        s.close()


def _bucket(smoke: bool) -> tuple[Any, list[bytes]]:
    from bucket_builder import make_bucket

    return make_bucket(2, per_segment=200) if smoke else make_bucket(10, per_segment=5_000)


@pytest.mark.parametrize("impl", [CURSORKIT, RAW])
def test_bucket_snapshot_write(
    benchmark: Any, smoke: bool, s3: ObjectStore, storage: ObjectStoreBucketSnapshotStorage, impl: str
) -> None:
    from bucket_builder import CURSOR, KEY, TOPIC

    meta, segments = _bucket(smoke)
    size = storage.get_bucket_snapshot_length(
        storage.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    )
    if impl == CURSORKIT:

        def run() -> None:
            storage.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    else:
        data = b"\x00" * size
        fs = s3.filesystem

        def run() -> None:
            with fs.open_output_stream(s3.path_of(f"raw/{uuid.uuid4().hex}")) as out:
                out.write(data)

    timer = rw.BestTimer(run)
    benchmark.group = "bucket snapshot write"
    benchmark.pedantic(timer, rounds=1 if smoke else 10, warmup_rounds=0 if smoke else 1)
    TABLE.record(PUT, impl, size / timer.best / 1e6, lower=False)
    _ratio(PUT_RATIO, PUT)


@pytest.mark.parametrize("impl", [CURSORKIT, RAW])
def test_segment_read(
    benchmark: Any, smoke: bool, s3: ObjectStore, storage: ObjectStoreBucketSnapshotStorage, impl: str
) -> None:
    from bucket_builder import CURSOR, KEY, TOPIC

    meta, segments = _bucket(smoke)
    bid = storage.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    storage.get_bucket_snapshot_metadata(bid)
    middle = len(segments) // 2 + 1
    if impl == CURSORKIT:

        def run() -> None:
            storage.get_bucket_snapshot_segment(bid, middle, middle)
    else:
        key = bucket_name(bid)
        data = s3.get(key)
        offset = data.index(segments[middle - 1])
        length = len(segments[middle - 1]) + 4

        def run() -> None:
            with s3.filesystem.open_input_file(s3.path_of(key)) as src:
                src.read_at(length, offset)

    def many() -> None:
        for _ in range(5 if smoke else 50):
            run()

    timer = rw.BestTimer(many)
    benchmark.group = "segment read"
    benchmark.pedantic(timer, rounds=1 if smoke else 5, warmup_rounds=0 if smoke else 1)
    TABLE.record(GET, impl, (5 if smoke else 50) / timer.best, lower=False)
    _ratio(GET_RATIO, GET)


def test_handover(benchmark: Any, smoke: bool, zk: Any, s3: ObjectStore, tmp_path: Path) -> None:
    location = f"zk://{zk.hosts}/managed-ledgers/bench/ns/persistent/handover-{uuid.uuid4().hex[:6]}/sub"
    ranges = 1_000 if smoke else 10_000
    a = CursorStore.create(location, objects=s3)
    cursor = a.recover()
    cursor.ack_many(np.ones(ranges, np.int64), np.arange(0, 2 * ranges, 2, dtype=np.int64))
    a.flush(cursor)
    holder = [a]

    def handover() -> None:
        holder[0].close()
        b = CursorStore.open(location, objects=s3)
        recovered = b.recover()
        assert len(recovered.individually_deleted) == ranges
        holder[0] = b

    timer = rw.BestTimer(handover)
    benchmark.group = "hand-over"
    benchmark.pedantic(timer, rounds=1 if smoke else 10, warmup_rounds=0 if smoke else 1)
    TABLE.record(HANDOVER, CURSORKIT, timer.best * 1e3)
    holder[0].close()
