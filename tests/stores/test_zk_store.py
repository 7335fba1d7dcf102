"""ZkCursorStore against a real ZooKeeper server: round trips, Pulsar's record, fencing, conflicts.

Every test uses its own cursor znode on the session's server (``zk_server``); state objects go to a
local ``ObjectStore`` (the S3 server is exercised in ``test_server_faults.py``).
"""

from __future__ import annotations

import secrets
import struct
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cursorkit import Position, errors
from cursorkit.ackstate import Cursor, CursorStore, ZkCursorStore, flush_many
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist import decode_cursor_info
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.stores import ObjectStore, cursor_znode_path, java_url_encode, managed_ledger_path

pytestmark = pytest.mark.spark  # the server runs from pyspark's jars


def _location(zk_server: Any, sub: str = "sub") -> str:
    topic = f"persistent://tenant/ns/t-{uuid.uuid4().hex[:8]}"
    return f"zk://{zk_server.hosts}{cursor_znode_path(topic, sub)}"


def _holes(cursor: Cursor, ledger: int, n: int, start: int = 0) -> None:
    for e in range(start, start + 2 * n, 2):
        cursor.ack(Position(ledger, e))


def _path(location: str) -> str:
    return "/" + location.split("/", 3)[3]


def _pulsar_form(raw: bytes, codec: str) -> bytes:
    """A ManagedCursorInfo as Pulsar's metadata store compresses it: magic, header, body."""
    body = raw if codec == "NONE" else zlib.compress(raw)
    meta = ml.ManagedCursorInfoMetadata(
        compressionType=ml.CompressionType.Value(codec), uncompressedSize=len(raw)
    ).SerializeToString()
    return (0x4778).to_bytes(2, "big") + len(meta).to_bytes(4, "big") + meta + body


def _pulsar_reads(data: bytes) -> ml.ManagedCursorInfo:
    """What a Pulsar broker parses from a znode: its compression header undone, its fields only."""
    if data[:2] == b"\x47\x78":
        (meta_len,) = struct.unpack_from(">i", data, 2)
        meta = ml.ManagedCursorInfoMetadata.FromString(data[6 : 6 + meta_len])
        assert meta.compressionType == ml.CompressionType.Value("ZLIB")
        data = zlib.decompress(data[6 + meta_len :])
        assert len(data) == meta.uncompressedSize
    info = ml.ManagedCursorInfo.FromString(data)
    info.ClearField("cursorkit")
    return info


def test_create_flush_open_recover_round_trip(zk_server: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc, name="orders-sub") as store:
        assert isinstance(store, ZkCursorStore) and store.report.owner_epoch == 1
        cursor = store.recover()
        _holes(cursor, 7, 50)
        cursor.ack_batch_index(Position(8, 3), 2, 10)
        cursor.properties["last-seq"] = 42
        result = store.flush(cursor)
        assert not result.skipped and result.ranges_inline == result.ranges_total == 50
        assert store.flush(cursor).skipped
    with CursorStore.open(loc) as again:
        assert again.name == "orders-sub" and again.report.previous_epoch == 1
        assert again.report.owner_epoch == 2 and not again.report.damaged
        back = again.recover()
        assert back.individually_deleted == cursor.individually_deleted
        assert back.batches() == cursor.batches() and back.properties == {"last-seq": 42}
        assert back.mark_delete_position == cursor.mark_delete_position
    with CursorStore.open(loc, read_only=True) as reader:  # the ownership write kept the batch sizes
        assert reader.recover().batches() == cursor.batches()
    with pytest.raises(FileExistsError):
        CursorStore.create(loc)
    with pytest.raises(FileNotFoundError):
        CursorStore.open(loc + "-missing")


def test_the_znode_is_pulsars_managed_cursor_info(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        _holes(cursor, 3, 1_500)
        cursor.ack_batch_index(Position(9, 1), 0, 4)
        cursor.properties["p"] = -5
        store.cursor_properties["#pulsar.internal.delayed.bucket_1_2"] = "12"
        store.flush(cursor)
    data, _ = zk_client.get(_path(loc))
    info = ml.ManagedCursorInfo.FromString(data)
    assert info.cursorsLedgerId == -1 and len(info.individualDeletedMessages) == 1_000  # Pulsar's limit
    assert {p.name: p.value for p in info.cursorProperties} == {"#pulsar.internal.delayed.bucket_1_2": "12"}
    info.ClearField("cursorkit")  # what a Pulsar broker sees: its own fields only
    md, acked, batches, props = decode_cursor_info(info.SerializeToString(), "pulsar view", None)
    assert md == cursor.mark_delete_position and props == {"p": -5} and len(batches) == 1
    assert acked.ranges() == cursor.individually_deleted.ranges()[:1_000]


def test_state_beyond_the_znode_goes_to_a_state_object(zk_server: Any, tmp_path: Path) -> None:
    loc = _location(zk_server)
    objects = ObjectStore(str(tmp_path / "objects"))
    with CursorStore.create(loc, objects=objects) as store:
        cursor = store.recover()
        _holes(cursor, 3, 20_000)
        result = store.flush(cursor)
        assert result.object_bytes > 0 and result.ranges_cut == 0 and result.ranges_inline == 1_000
    with CursorStore.open(loc, objects=objects) as again:
        assert again.report.state_source == "object" and again.report.ranges == 20_000
        assert again.recover().individually_deleted == cursor.individually_deleted
        with pytest.raises(errors.InvalidArgument, match="objects="):
            CursorStore.open(loc, read_only=True)


def test_a_znode_naming_another_cursors_state_object_never_deletes_it(
    zk_server: Any, zk_client: Any, tmp_path: Path
) -> None:
    objects = ObjectStore(str(tmp_path / "objects"))
    loc_a, loc_b = _location(zk_server, "a"), _location(zk_server, "b")
    with CursorStore.create(loc_a, objects=objects) as a:
        cursor_a = a.recover()
        _holes(cursor_a, 3, 5_000)
        a.flush(cursor_a)
    with CursorStore.create(loc_b, objects=objects) as b:
        b.flush(b.recover())
    owned_by_a = [o.key for o in objects.list()]
    assert len(owned_by_a) == 1
    # A hostile (or confused) writer points b's znode at a's state object.
    data, _ = zk_client.get(_path(loc_a))
    ref = ml.ManagedCursorInfo.FromString(data).cursorkit.state
    raw, _ = zk_client.get(_path(loc_b))
    info = ml.ManagedCursorInfo.FromString(raw)
    info.cursorkit.state.CopyFrom(ref)
    zk_client.set(_path(loc_b), info.SerializeToString())
    with CursorStore.open(loc_b, objects=objects) as b:
        assert b.report.fallbacks  # a's object belongs to another cursor: never loaded as b's
        cursor_b = b.recover()
        _holes(cursor_b, 7, 10)
        b.flush(cursor_b, force=True)
        b.collect_garbage()
    assert [o.key for o in objects.list()] == owned_by_a
    with CursorStore.open(loc_a, objects=objects) as a:
        assert a.recover().individually_deleted == cursor_a.individually_deleted


def test_without_an_object_store_the_cut_is_reported_never_silent(zk_server: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        _holes(cursor, 3, 1_200)
        result = store.flush(cursor)
        assert result.truncated and result.ranges_cut == 200
        assert cursor.truncations.unacked_ranges_truncated == 1 and cursor.truncations.ranges_cut == 200
    with CursorStore.open(loc) as again:
        assert again.report.ranges == 1_000 and again.report.ranges_recorded == 1_200
        assert again.report.rewound


def test_an_older_owner_is_fenced_and_publishes_nothing(
    zk_server: Any, zk_client: Any, tmp_path: Path
) -> None:
    loc = _location(zk_server)
    objects = ObjectStore(str(tmp_path / "objects"))
    a = CursorStore.create(loc, objects=objects)
    cursor_a = a.recover()
    _holes(cursor_a, 1, 10)
    a.flush(cursor_a)
    b = CursorStore.open(loc, objects=objects)
    before, _ = zk_client.get(_path(loc))
    _holes(cursor_a, 2, 5_000)  # big enough for a state object
    with pytest.raises(errors.Fenced) as caught:
        a.flush(cursor_a)
    assert isinstance(caught.value, errors.PersistFailed)
    assert caught.value.owner_epoch == 1 and caught.value.current_epoch == 2 and a.fenced
    with pytest.raises(errors.Fenced):
        a.cursor_properties["k"] = "v"
    after, _ = zk_client.get(_path(loc))
    assert after == before
    assert [o.key for o in objects.list()] == []  # the fenced write's state object was taken back
    cursor_b = b.recover()
    assert cursor_b.individually_deleted.ranges() == [(1, e - 1, 1, e) for e in range(0, 20, 2)]
    b.flush(cursor_b, force=True)
    a.close()
    b.close()


def test_owners_racing_for_one_cursor_end_with_one_owner(zk_server: Any) -> None:
    """Six openers at once: each claims a new epoch; one superseded while opening says so (Fenced)."""
    loc = _location(zk_server)
    CursorStore.create(loc).close()
    stores: list[ZkCursorStore] = []
    superseded: list[errors.Fenced] = []
    lock = threading.Lock()

    def take() -> None:
        try:
            s = CursorStore.open(loc)
        except errors.Fenced as e:
            with lock:
                superseded.append(e)
            return
        with lock:
            stores.append(s)

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stores) + len(superseded) == 6 and stores
    assert max(s.owner_epoch for s in stores) == 7  # epochs 2..7 were claimed, one each
    survivors = []
    for s in stores:
        cursor = s.recover()
        cursor.ack(Position(4, s.owner_epoch))
        try:
            s.flush(cursor)
            survivors.append(s.owner_epoch)
        except errors.Fenced:
            pass
        s.close()
    assert survivors == [7]
    with CursorStore.open(loc, read_only=True) as reader:
        assert reader.recover().individually_deleted.ranges() == [(4, 6, 4, 7)]


def test_a_version_conflict_never_leaves_the_store_unwritable(zk_server: Any, zk_client: Any) -> None:
    """Pulsar's failure mode: a stale version failing every write. Here the owner re-reads and writes on."""
    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        cursor.ack(Position(1, 1))
        store.flush(cursor)
        for i in range(3):  # a foreign writer (no owner epoch) changes the znode behind the owner's back
            data, _stat = zk_client.get(_path(loc))
            info = ml.ManagedCursorInfo.FromString(data)
            info.ClearField("cursorkit")
            zk_client.set(_path(loc), info.SerializeToString())
            cursor.ack(Position(1, 3 + 2 * i))
            result = store.flush(cursor)
            assert result.conflicts == 1
        with CursorStore.open(loc, read_only=True) as reader:
            assert reader.recover().individually_deleted == cursor.individually_deleted


def test_a_lost_reply_is_recognised_on_the_next_write(
    zk_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cursorkit.stores import zookeeper

    loc = _location(zk_server)
    with CursorStore.create(loc) as store:
        cursor = store.recover()
        cursor.ack(Position(1, 1))
        real = zookeeper.ZkSession.wait

        def lose_reply(self: Any, result: Any, what: str, *, write: bool) -> Any:
            real(self, result, what, write=write)
            raise zookeeper.InDoubt(f"{what}: reply lost (test)")

        monkeypatch.setattr(zookeeper.ZkSession, "wait", lose_reply)
        with pytest.raises(errors.PersistFailed, match="outcome unknown"):
            store.flush(cursor)
        monkeypatch.setattr(zookeeper.ZkSession, "wait", real)
        cursor.ack(Position(1, 5))
        assert store.flush(cursor).conflicts == 1  # the landed write's version was taken up
        with CursorStore.open(loc, read_only=True) as reader:
            assert reader.recover().individually_deleted == cursor.individually_deleted


def test_pulsars_own_znodes_are_read_and_kept(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    cursor = Cursor(Position(5, 9), name="sub")
    _holes(cursor, 5, 20, start=12)
    cursor.properties["x"] = 1
    plain = cursor.encode("managed_cursor_info")
    info = ml.ManagedCursorInfo.FromString(plain)
    info.lastActive = 1234
    info.cursorProperties.add(name="keep", value="me")
    zk_client.create(_path(loc), info.SerializeToString(), makepath=True)
    with CursorStore.open(loc) as store:
        report = store.report
        assert report.written_by == "pulsar" and report.previous_epoch == 0 and not report.damaged
        assert dict(store.cursor_properties) == {"keep": "me"}
        back = store.recover()
        assert back.individually_deleted == cursor.individually_deleted and back.properties == {"x": 1}
    data, _ = zk_client.get(_path(loc))  # taking ownership kept every field Pulsar wrote
    kept = ml.ManagedCursorInfo.FromString(data)
    assert kept.lastActive == 1234 and kept.cursorkit.owner_epoch == 1
    kept.ClearField("cursorkit")
    assert kept == info


@pytest.mark.parametrize("codec", ["NONE", "ZLIB"])
def test_pulsars_compressed_znodes_are_read(zk_server: Any, zk_client: Any, codec: str) -> None:
    loc = _location(zk_server)
    cursor = Cursor(Position(2, 0))
    _holes(cursor, 2, 30, start=5)
    zk_client.create(_path(loc), _pulsar_form(cursor.encode("managed_cursor_info"), codec), makepath=True)
    with CursorStore.open(loc, read_only=True) as store:
        assert store.report.compression == codec
        assert store.recover().individually_deleted == cursor.individually_deleted


def test_a_cursor_ledger_znode_falls_back_to_mark_delete_and_says_so(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    info = ml.ManagedCursorInfo(cursorsLedgerId=77, markDeleteLedgerId=4, markDeleteEntryId=10)
    info.properties.add(name="p", value=3)
    info.cursorProperties.add(name="#pulsar.internal.delayed.bucket_1_4", value="99")
    zk_client.create(_path(loc), info.SerializeToString(), makepath=True)
    with CursorStore.open(loc) as store:
        report = store.report
        assert report.damaged and report.rewound and "cursor ledger 77" in report.fallbacks[0]
        assert report.state_source == "mark-delete only"
        cursor = store.recover()
        assert cursor.mark_delete_position == Position(4, 10) and cursor.properties == {"p": 3}
        assert dict(store.cursor_properties) == {"#pulsar.internal.delayed.bucket_1_4": "99"}


def test_a_damaged_or_missing_state_object_falls_back_and_is_reported(zk_server: Any, tmp_path: Path) -> None:
    loc = _location(zk_server)
    objects = ObjectStore(str(tmp_path / "objects"))
    with CursorStore.create(loc, objects=objects) as store:
        cursor = store.recover()
        _holes(cursor, 3, 3_000)
        store.flush(cursor)
    (item,) = objects.list()
    path = Path(objects.path_of(item.key))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with CursorStore.open(loc, objects=objects) as store:
        assert store.report.damaged and "damaged" in store.report.fallbacks[0]
        assert store.report.ranges == 1_000 and store.report.ranges_recorded == 3_000
        assert store.recover().individually_deleted.ranges() == cursor.individually_deleted.ranges()[:1_000]
    path.unlink()
    with CursorStore.open(loc, objects=objects, read_only=True) as store:
        assert "missing" in store.report.fallbacks[0]


def test_cursor_store_locations_are_checked(zk_server: Any) -> None:
    for bad in [
        f"zk://{zk_server.hosts}",
        f"zk://{zk_server.hosts}/",
        f"zk://{zk_server.hosts}/a//b",
        f"zk://{zk_server.hosts}/a/../b",
        f"zk://{zk_server.hosts}/zookeeper/quota",
        f"zk://{zk_server.hosts}/a\x00b",
        f"zk://{zk_server.hosts}/a?timeout=3",
        "zk://host:99999/a",
        "zk://bad host/a",
    ]:
        with pytest.raises(errors.InvalidArgument):
            CursorStore.open(bad)
    with pytest.raises(errors.InvalidArgument, match="no cursor store for ftp://"):
        CursorStore.open("ftp://x/y")
    with pytest.raises(errors.InvalidArgument, match="read_only"):
        CursorStore.create(_location(zk_server), read_only=True)
    with pytest.raises(errors.InvalidArgument, match="max_znode_bytes"):
        CursorStore.create(_location(zk_server), max_znode_bytes=10)


def test_properties_too_big_for_the_znode_are_compressed_then_refused(zk_server: Any, zk_client: Any) -> None:
    loc = _location(zk_server)
    with CursorStore.create(loc, max_znode_bytes=2048) as store:
        cursor = store.recover()
        cursor.properties.update({f"p{i:04d}": i for i in range(500)})  # 5.5 KB plain, alike names
        assert store.flush(cursor).compression == "ZLIB"
        assert _pulsar_reads(zk_client.get(_path(loc))[0]).properties[499].name == "p0499"
        cursor.properties.update({secrets.token_hex(8): i for i in range(200)})  # past 2 KB either way
        with pytest.raises(errors.InvalidArgument, match="compressed.*znode's 2,048"):
            store.flush(cursor)
        cursor.properties.clear()
        assert store.flush(cursor).compression is None


def _holes_in_bulk(cursor: Cursor, ledger: int, n: int) -> None:
    cursor.ack_many(np.full(n, ledger, dtype=np.int64), np.arange(1, 2 * n, 2, dtype=np.int64))


def test_a_large_compressed_pulsar_znode_is_taken_over_without_breaking_the_session(
    zk_server: Any, zk_client: Any
) -> None:
    """A record past ZooKeeper's 1 MB request limit stays in Pulsar's ZLIB form; the session lives on.

    Sent plain (1.7 MB), it would drop the connection that every store of the process shares.
    """
    pulsar_limits = PersistLimits(max_unacked_ranges_to_persist_in_metadata_store=200_000)
    written = Cursor(Position(7, -1), limits=pulsar_limits)
    _holes_in_bulk(written, 7, 95_000)
    raw = written.encode("managed_cursor_info")
    data = _pulsar_form(raw, "ZLIB")
    assert len(raw) > 1_600_000 and len(data) < 512 * 1024
    loc = _location(zk_server, "big")
    zk_client.create(_path(loc), data, makepath=True)
    other = CursorStore.create(_location(zk_server, "other"))
    other_cursor = other.recover()
    failures: list[Exception] = []
    flushed = [0]
    stop = threading.Event()

    def keep_flushing() -> None:
        for e in range(1, 10_000_000, 2):
            if stop.is_set():
                return
            other_cursor.ack(Position(1, e))
            try:
                other.flush(other_cursor)
                flushed[0] += 1
            except errors.CursorkitError as x:
                failures.append(x)
            time.sleep(0.005)

    thread = threading.Thread(target=keep_flushing)
    thread.start()
    try:
        with CursorStore.open(loc) as store:
            assert isinstance(store, ZkCursorStore) and store._session is other._session
            report = store.report
            assert report.compression == report.written_compression == "ZLIB"
            assert report.znode_bytes <= 512 * 1024 and report.ranges == 95_000
            assert report.ranges_left_out == 0 and not report.rewound and report.conflicts == 0
            cursor = store.recover(limits=pulsar_limits)  # the Pulsar broker's metadata-store limit
            assert cursor.individually_deleted == written.individually_deleted
            cursor.ack(Position(8, 0))
            result = store.flush(cursor)
            assert result.compression == "ZLIB" and not result.truncated
            assert result.ranges_inline == result.ranges_total == 95_001 and result.znode_bytes <= 512 * 1024
    finally:
        stop.set()
        thread.join(30)
    assert failures == [] and flushed[0] > 0
    other.close()
    stored, _ = zk_client.get(_path(loc))
    assert stored[:2] == b"\x47\x78" and len(stored) <= 512 * 1024
    md, acked, _, _ = decode_cursor_info(_pulsar_reads(stored).SerializeToString(), "pulsar view", None)
    assert md == cursor.mark_delete_position and acked == cursor.individually_deleted
    with CursorStore.open(loc, read_only=True) as reader:
        assert reader.report.compression == "ZLIB" and reader.report.ranges == 95_001


def test_a_znode_too_big_in_either_form_is_cut_on_takeover_and_reported(
    zk_server: Any, zk_client: Any
) -> None:
    written = Cursor(
        Position(7, -1), limits=PersistLimits(max_unacked_ranges_to_persist_in_metadata_store=50_000)
    )
    _holes_in_bulk(written, 7, 20_000)
    raw = written.encode("managed_cursor_info")
    loc = _location(zk_server)
    zk_client.create(_path(loc), _pulsar_form(raw, "ZLIB"), makepath=True)
    with CursorStore.open(loc, max_znode_bytes=16_384) as store:
        report = store.report
        assert (
            report.ranges == 20_000 and 0 < report.ranges_left_out < 20_000 and report.znode_bytes <= 16_384
        )
        assert store.recover().individually_deleted == written.individually_deleted  # held, all of them
    stored, _ = zk_client.get(_path(loc))
    kept = len(_pulsar_reads(stored).individualDeletedMessages)
    assert len(stored) <= 16_384 and kept == 20_000 - report.ranges_left_out
    with CursorStore.open(loc, read_only=True) as reader:  # not yet flushed: the cut is on record
        assert (
            reader.report.ranges == kept and reader.report.ranges_recorded == 20_000 and reader.report.rewound
        )
    info = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=0)
    info.cursorProperties.add(name="blob", value=secrets.token_hex(2_000))  # 4 KB that does not compress
    bad = _location(zk_server)
    zk_client.create(_path(bad), info.SerializeToString(), makepath=True)
    with pytest.raises(errors.BudgetExceeded, match=r"needs a 4,0\d\d-byte record.*max_znode_bytes 2,048"):
        CursorStore.open(bad, max_znode_bytes=2048)
    assert zk_client.get(_path(bad))[0] == info.SerializeToString()  # nothing sent


def test_flush_many_pipelines_and_reports_each(zk_server: Any) -> None:
    stores = [CursorStore.create(_location(zk_server, f"s{i}")) for i in range(20)]
    cursors = [s.recover() for s in stores]
    for i, c in enumerate(cursors):
        _holes(c, 1, i + 1)
    stores[3].close()
    fenced = CursorStore.open(stores[5].location)
    results = flush_many(zip(stores, cursors, strict=True))
    assert isinstance(results[3], errors.InvalidArgument)  # closed
    assert isinstance(results[5], errors.Fenced)
    ok = [r for i, r in enumerate(results) if i not in (3, 5)]
    assert all(not isinstance(r, Exception) and r.ranges_total > 0 for r in ok)
    fenced.close()
    for s in stores:
        s.close()


def test_names_and_paths_are_pulsars() -> None:
    assert java_url_encode("a b~*.-_é/") == "a+b%7E*.-_%C3%A9%2F"
    assert managed_ledger_path("persistent://t/ns/orders-partition-3") == (
        "/managed-ledgers/t/ns/persistent/orders-partition-3"
    )
    assert managed_ledger_path("orders") == "/managed-ledgers/public/default/persistent/orders"
    assert cursor_znode_path("persistent://t/ns/my topic", "sub/1") == (
        "/managed-ledgers/t/ns/persistent/my+topic/sub%2F1"
    )
    for bad in ["non-persistent://t/ns/x", "persistent://t/x", "persistent://t/n s/x", "a/b"]:
        with pytest.raises(errors.InvalidArgument):
            managed_ledger_path(bad)
