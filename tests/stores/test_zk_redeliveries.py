"""Redelivery counts in a cursor znode (beyond Pulsar), on a real ZooKeeper server.

They survive a close and a take-over by a new owner, ride in cursorkit's record (Pulsar's parser
skips it and reads its own fields unchanged), are cut to their share of the znode with the cut
reported, and damaged bytes are reported, never loaded as healthy.
"""

from __future__ import annotations

import uuid
import zlib
from typing import Any

import numpy as np
import pytest

from cursorkit import Position
from cursorkit.ackstate import CursorStore
from cursorkit.ackstate.persist import decode_cursor_info
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.stores import cursor_znode_path

pytestmark = pytest.mark.spark  # the server runs from pyspark's jars


def _location(zk_server: Any) -> str:
    topic = f"persistent://tenant/ns/r-{uuid.uuid4().hex[:8]}"
    return f"zk://{zk_server.hosts}{cursor_znode_path(topic, 'sub')}"


def _path(location: str) -> str:
    return "/" + location.split("/", 3)[3]


def test_counts_survive_reopen_and_take_over(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc, name="s") as store:
        cursor = store.recover()
        cursor.ack(Position(3, 0))
        counts = store.redelivery_counts
        assert len(counts) == 0 and not store.redelivery_report.damaged
        for e in (1, 2, 5):
            counts.increment(Position(3, e))
        counts.increment(Position(3, 5))
        assert not store.flush(cursor).skipped  # the counts changed: written though the acks did not
        assert store.flush(cursor).skipped
        counts.increment(Position(3, 2))
        assert not store.flush(cursor).skipped
    data, _ = zk_client.get(_path(loc))
    info = ml.ManagedCursorInfo.FromString(data)
    pulsar_view = ml.ManagedCursorInfo()
    pulsar_view.CopyFrom(info)
    pulsar_view.ClearField("cursorkit")
    md, acked, _, _ = decode_cursor_info(pulsar_view.SerializeToString(), "pulsar view", None)
    assert md == cursor.mark_delete_position  # Pulsar's fields as they were
    assert acked.ranges() == cursor.individually_deleted.ranges()
    with CursorStore.open(loc) as owner:  # a new owner epoch: the ownership write carries them
        assert owner.report.owner_epoch == 2
        got = owner.redelivery_counts
        assert [got.get(Position(3, e)) for e in range(7)] == [0, 1, 2, 0, 0, 2, 0]
        got.clear()
        owner.flush(owner.recover())
    with CursorStore.open(loc, read_only=True) as reader:
        assert len(reader.redelivery_counts) == 0


def test_the_inspector_shows_the_counts(zk_server: Any) -> None:
    from cursorkit.pipeline.inspector.znodes import inspect_zk

    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        for _ in range(3):
            store.redelivery_counts.increment(Position(2, 9))
        store.redelivery_counts.increment(Position(2, 10))
        store.flush(cursor)
    (found,) = inspect_zk(loc).cursors
    assert (found.redelivered, found.max_redelivery_count, found.redelivery_runs_left_out) == (2, 3, 0)
    assert found.redelivery_problem is None and found.status == "ok"


def test_counts_past_their_share_are_cut_and_reported(zk_server: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc, max_znode_bytes=4096) as store:
        cursor = store.recover()
        rng = np.random.default_rng(1)
        es = np.sort(rng.choice(200_000, 20_000, replace=False)).astype(np.int64)
        store.redelivery_counts.set_many(np.ones(len(es), np.int64), es, rng.integers(1, 5, len(es)))
        result = store.flush(cursor)
        assert 0 < result.redelivery_runs_left_out < store.redelivery_counts.run_count
        assert result.znode_bytes <= 4096
        kept = store.redelivery_counts.run_count - result.redelivery_runs_left_out
    with CursorStore.open(loc, max_znode_bytes=4096) as again:
        assert again.redelivery_report.damaged  # a cut: some counts start again, and it is said
        assert again.redelivery_counts.run_count == kept
        assert again.redelivery_counts.runs()[0][0] == Position(1, int(es[0]))  # the lowest kept


def test_damaged_counts_are_reported_and_the_rest_loads(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        cursor.ack_cumulative(Position(1, 0))
        store.redelivery_counts.increment(Position(1, 4))
        store.flush(cursor)
    data, stat = zk_client.get(_path(loc))
    info = ml.ManagedCursorInfo.FromString(data)
    blob = bytearray(zlib.decompress(info.cursorkit.redelivery_counts))
    blob[-1] ^= 0xFF
    info.cursorkit.redelivery_counts = zlib.compress(bytes(blob)) + b"junk"
    zk_client.set(_path(loc), info.SerializeToString(), version=stat.version)
    with CursorStore.open(loc) as again:
        assert again.redelivery_report.damaged
        assert len(again.redelivery_counts) == 0
        assert again.recover().mark_delete_position == Position(1, 0)  # the acks are not touched
