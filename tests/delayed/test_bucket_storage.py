"""FileBucketSnapshotStorage: round trips, ranges, ids forever unique, every damage found, failed writes."""

from __future__ import annotations

import errno
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from pyroaring import BitMap

from bucket_builder import CURSOR, KEY, TOPIC, make_bucket
from cursorkit.delayed.storage.api import BucketInfo
from cursorkit.delayed.storage.file import NEXT_ID_FILE, FileBucketSnapshotStorage
from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
    UnsupportedVersion,
)
from cursorkit.fsio import atomic_write, fsync_dir, temp_path, temp_target
from cursorkit.proto import delayed_bucket_pb2 as pb
from faulty_files import Faults, faulty_opener


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "buckets"


@pytest.fixture
def storage(root: Path) -> Iterator[FileBucketSnapshotStorage]:
    s = FileBucketSnapshotStorage(root)
    s.start()
    yield s
    s.close()


def bucket_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("bucket-"))


def temp_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if ".tmp-" in p.name)


# -- round trips -------------------------------------------------------------------------------------


def test_round_trip_metadata_segments_length_and_info(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(5)
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    got = storage.get_bucket_snapshot_metadata(bid)
    assert got == meta
    assert len(got.metadata_list) == 5
    assert BitMap.deserialize(got.metadata_list[2].delayed_index_bit_map[4]) == BitMap.deserialize(
        meta.metadata_list[2].delayed_index_bit_map[4]
    )
    assert storage.get_bucket_snapshot_segment(bid, 1, 5) == segs
    assert (
        pb.SnapshotSegment.FromString(storage.get_bucket_snapshot_segment(bid, 3, 3)[0]).indexes[0].entry_id
        == 8
    )
    path = root / f"bucket-{bid:020d}.snap"
    assert storage.get_bucket_snapshot_length(bid) == path.stat().st_size
    assert storage.bucket_info(bid) == BucketInfo(
        bucket_id=bid,
        bucket_key=KEY,
        topic=TOPIC,
        cursor=CURSOR,
        segments=5,
        length_bytes=path.stat().st_size,
    )
    assert storage.list_bucket_snapshots() == [bid]


def test_segment_ranges(storage: FileBucketSnapshotStorage) -> None:
    meta, segs = make_bucket(6)
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    for first in range(1, 7):
        for last in range(first, 9):
            assert storage.get_bucket_snapshot_segment(bid, first, last) == segs[first - 1 : last]
    assert storage.get_bucket_snapshot_segment(bid, 7, 7) == []  # the tracker's end-of-bucket signal
    assert storage.get_bucket_snapshot_segment(bid, 7, 100) == []
    assert storage.get_bucket_snapshot_segment(bid, 5, 2**62) == segs[4:]
    for first, last in [(0, 1), (-1, 3), (3, 2), (0, 0)]:
        with pytest.raises(InvalidArgument):
            storage.get_bucket_snapshot_segment(bid, first, last)
    for bad in [1.0, True, "1", None]:
        with pytest.raises(InvalidInputType):
            storage.get_bucket_snapshot_segment(bid, bad, 2)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputType):
            storage.get_bucket_snapshot_segment(bid, 1, bad)  # type: ignore[arg-type]


def test_unicode_owner_fields_and_bytes_like_segments(storage: FileBucketSnapshotStorage) -> None:
    meta, segs = make_bucket(3)
    given_segs: list[Any] = [bytearray(segs[0]), memoryview(segs[1]), segs[2]]
    bid = storage.create_bucket_snapshot(meta, given_segs, "", "persistent://t/ns/tópico-☃", "sub/ünï")
    info = storage.bucket_info(bid)
    assert (info.bucket_key, info.topic, info.cursor) == ("", "persistent://t/ns/tópico-☃", "sub/ünï")
    assert storage.get_bucket_snapshot_segment(bid, 1, 3) == segs


def test_empty_segment_payload_and_large_segments(storage: FileBucketSnapshotStorage) -> None:
    meta, segs = make_bucket(3)
    segs[1] = b""  # an empty SnapshotSegment encodes to nothing
    big = os.urandom(300_000)
    segs[2] = big
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    assert storage.get_bucket_snapshot_segment(bid, 2, 3) == [b"", big]


@settings(max_examples=40)
@given(
    payloads=st.lists(st.binary(max_size=60), min_size=1, max_size=12),
    ranges=st.lists(st.tuples(st.integers(1, 14), st.integers(0, 4)), max_size=6),
)
def test_random_buckets_read_back_like_slices(
    tmp_path_factory: pytest.TempPathFactory, payloads: list[bytes], ranges: list[tuple[int, int]]
) -> None:
    meta = pb.SnapshotMetadata()
    for i in range(len(payloads)):
        meta.metadata_list.add(min_schedule_timestamp=i, max_schedule_timestamp=i + 1)
    with FileBucketSnapshotStorage(tmp_path_factory.mktemp("b"), fsync=False) as s:
        bid = s.create_bucket_snapshot(meta, payloads, KEY, TOPIC, CURSOR)
        assert s.get_bucket_snapshot_metadata(bid) == meta
        for first, extra in ranges:
            assert (
                s.get_bucket_snapshot_segment(bid, first, first + extra)
                == payloads[first - 1 : first + extra]
            )


# -- bad input ---------------------------------------------------------------------------------------


def test_bad_creates_are_refused_and_leave_nothing(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(2)
    incomplete = pb.SnapshotMetadata()
    incomplete.metadata_list.add()
    incomplete.metadata_list.add(min_schedule_timestamp=1, max_schedule_timestamp=2)
    bad: list[tuple[type[Exception], tuple[Any, ...]]] = [
        (InvalidArgument, (pb.SnapshotMetadata(), [], KEY, TOPIC, CURSOR)),  # Pulsar never writes one
        (InvalidArgument, (meta, segs[:1], KEY, TOPIC, CURSOR)),
        (InvalidArgument, (meta, [*segs, b""], KEY, TOPIC, CURSOR)),
        (InvalidArgument, (incomplete, segs, KEY, TOPIC, CURSOR)),
        (InvalidArgument, (meta, segs, "\ud800", TOPIC, CURSOR)),
        (InvalidInputType, (meta.SerializeToString(), segs, KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, b"".join(segs), KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, "ab", KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, iter(segs), KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, [segs[0], "x"], KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, [segs[0], 5], KEY, TOPIC, CURSOR)),
        (InvalidInputType, (meta, segs, 7, TOPIC, CURSOR)),
        (InvalidInputType, (meta, segs, KEY, None, CURSOR)),
        (InvalidInputType, (meta, segs, KEY, TOPIC, b"sub")),
    ]
    for exc, args in bad:
        with pytest.raises(exc):
            storage.create_bucket_snapshot(*args)
    assert bucket_files(root) == []
    assert not (root / NEXT_ID_FILE).exists()  # no id was even allocated
    assert storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR) == 1


def test_bad_bucket_ids(storage: FileBucketSnapshotStorage) -> None:
    for bad in [1.5, "1", None, True]:
        for call in (
            storage.get_bucket_snapshot_metadata,
            storage.get_bucket_snapshot_length,
            storage.delete_bucket_snapshot,
            storage.bucket_info,
        ):
            with pytest.raises(InvalidInputType):
                call(bad)  # type: ignore[arg-type]
    for bad_id in [-1, 2**63]:
        with pytest.raises(InvalidArgument):
            storage.get_bucket_snapshot_metadata(bad_id)
        with pytest.raises(InvalidArgument):
            storage.delete_bucket_snapshot(bad_id)


def test_missing_bucket_is_bucket_not_found(storage: FileBucketSnapshotStorage) -> None:
    calls = [
        lambda: storage.get_bucket_snapshot_metadata(42),
        lambda: storage.get_bucket_snapshot_segment(42, 1, 1),
        lambda: storage.get_bucket_snapshot_length(42),
        lambda: storage.bucket_info(42),
    ]
    for call in calls:
        with pytest.raises(BucketNotFound, match="42") as info:
            call()
        assert isinstance(info.value, KeyError)


def test_delete_is_idempotent(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(2)
    a = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    b = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    storage.delete_bucket_snapshot(a)
    storage.delete_bucket_snapshot(a)
    storage.delete_bucket_snapshot(12345)
    assert storage.list_bucket_snapshots() == [b]
    with pytest.raises(BucketNotFound):
        storage.get_bucket_snapshot_metadata(a)
    assert storage.get_bucket_snapshot_segment(b, 1, 2) == segs


# -- lifecycle and ids -------------------------------------------------------------------------------


def test_lifecycle_errors(root: Path) -> None:
    meta, segs = make_bucket(1)
    s = FileBucketSnapshotStorage(root)
    with pytest.raises(InvalidArgument, match="not started"):
        s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    with pytest.raises(InvalidArgument, match="not started"):
        s.get_bucket_snapshot_metadata(1)
    with pytest.raises(InvalidArgument, match="not started"):
        s.list_bucket_snapshots()
    s.start()
    s.start()  # idempotent
    bid = s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    other = FileBucketSnapshotStorage(root)
    with pytest.raises(BlockingIOError):
        other.start()  # the directory is locked
    s.close()
    s.close()
    for call in (
        lambda: s.get_bucket_snapshot_metadata(bid),
        lambda: s.get_bucket_snapshot_segment(bid, 1, 1),
        lambda: s.get_bucket_snapshot_length(bid),
        lambda: s.delete_bucket_snapshot(bid),
        lambda: s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR),
        s.start,
    ):
        with pytest.raises(InvalidArgument, match="closed"):
            call()
    other.start()
    assert other.get_bucket_snapshot_segment(bid, 1, 1) == segs
    other.close()
    for bad in [dict(path=1), dict(path=root, fsync=1), dict(path=root, opener="x")]:
        with pytest.raises(InvalidInputType):
            FileBucketSnapshotStorage(**bad)  # type: ignore[arg-type]


def test_ids_unique_across_restarts_and_deletes(root: Path) -> None:
    meta, segs = make_bucket(1)
    seen: set[int] = set()
    last = 0
    for _ in range(4):
        with FileBucketSnapshotStorage(root, fsync=False) as s:
            for _ in range(25):  # crosses id-reservation blocks
                bid = s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
                assert bid not in seen and bid > last
                seen.add(bid)
                last = bid
                s.delete_bucket_snapshot(bid)
            assert s.list_bucket_snapshots() == []
    assert len(seen) == 100


def test_id_mark_damage_is_refused(root: Path) -> None:
    meta, segs = make_bucket(1)
    with FileBucketSnapshotStorage(root) as s:
        bid = s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    mark = root / NEXT_ID_FILE
    good = mark.read_bytes()
    for i in range(len(good)):
        damaged = bytearray(good)
        damaged[i] ^= 0x10
        mark.write_bytes(damaged)
        with pytest.raises(CorruptSnapshot, match=NEXT_ID_FILE):
            FileBucketSnapshotStorage(root).start()
    mark.write_bytes(good[:-1])
    with pytest.raises(CorruptSnapshot):
        FileBucketSnapshotStorage(root).start()
    mark.unlink()  # bucket files but no mark: ids could be reused
    with pytest.raises(CorruptSnapshot, match="missing"):
        FileBucketSnapshotStorage(root).start()
    body = struct.pack("<8sHHQ", good[:8], 1, 0, bid)  # a mark at or below an existing bucket
    mark.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(CorruptSnapshot, match="exists"):
        FileBucketSnapshotStorage(root).start()
    body = struct.pack("<8sHHQ", good[:8], 2, 0, bid + 1)
    mark.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(UnsupportedVersion):
        FileBucketSnapshotStorage(root).start()
    mark.write_bytes(good)
    with FileBucketSnapshotStorage(root) as s:
        assert s.get_bucket_snapshot_segment(bid, 1, 1) == segs


def test_stale_temp_files_are_removed_at_start(root: Path) -> None:
    root.mkdir()
    stale = [
        ".bucket-00000000000000000005.snap.tmp-0123456789abcdef",
        f".{NEXT_ID_FILE}.tmp-00000000000000ff",
    ]
    keep = [".other.tmp-0123456789abcdef", "notes.txt"]
    for name in stale + keep:
        (root / name).write_bytes(b"x")
    with FileBucketSnapshotStorage(root):
        assert sorted(p.name for p in root.iterdir()) == sorted(keep)


# -- damage ------------------------------------------------------------------------------------------


def layout(meta: pb.SnapshotMetadata, segs: list[bytes]) -> tuple[int, list[tuple[int, int]], int]:
    """Header end, (start, end) of each record and the table offset, computed from the format spec."""
    header_end = 16 + 8 + 12 + len(KEY.encode()) + len(TOPIC.encode()) + len(CURSOR.encode()) + 4
    spans = []
    pos = header_end
    for payload in [meta.SerializeToString(deterministic=True), *segs]:
        spans.append((pos, pos + len(payload) + 4))
        pos += len(payload) + 4
    return header_end, spans, pos


def test_every_flipped_byte_is_found_by_the_read_covering_it(
    storage: FileBucketSnapshotStorage, root: Path
) -> None:
    meta, segs = make_bucket(3, per_segment=2)
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    path = root / f"bucket-{bid:020d}.snap"
    good = path.read_bytes()
    header_end, spans, table_offset = layout(meta, segs)
    assert table_offset + 4 + 12 * 4 + 4 + 32 == len(good)
    for off in range(len(good)):
        damaged = bytearray(good)
        damaged[off] ^= 1 << (off % 8)
        path.write_bytes(damaged)
        index_hit = off >= table_offset
        meta_hit = off < header_end or spans[0][0] <= off < spans[0][1] or index_hit
        if meta_hit:
            with pytest.raises(CorruptSnapshot, match=str(path)):
                storage.get_bucket_snapshot_metadata(bid)
        else:
            assert storage.get_bucket_snapshot_metadata(bid) == meta
        for seg in (1, 2, 3):
            if index_hit or spans[seg][0] <= off < spans[seg][1]:
                with pytest.raises(CorruptSnapshot, match=r"at byte \d+"):
                    storage.get_bucket_snapshot_segment(bid, seg, seg)
            else:
                assert storage.get_bucket_snapshot_segment(bid, seg, seg) == [segs[seg - 1]]
        if off < header_end or index_hit:
            with pytest.raises(CorruptSnapshot):
                storage.bucket_info(bid)
    path.write_bytes(good)
    assert storage.get_bucket_snapshot_segment(bid, 1, 3) == segs


def test_every_truncation_and_extension_is_found(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(2, per_segment=2)
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    path = root / f"bucket-{bid:020d}.snap"
    good = path.read_bytes()
    for cut in [*range(len(good)), len(good) + 1]:
        path.write_bytes(good[:cut] if cut < len(good) else good + b"\0")
        for call in (
            lambda: storage.get_bucket_snapshot_metadata(bid),
            lambda: storage.get_bucket_snapshot_segment(bid, 1, 1),
            lambda: storage.get_bucket_snapshot_segment(bid, 2, 2),
            lambda: storage.bucket_info(bid),
        ):
            with pytest.raises(CorruptSnapshot, match=str(path)):
                call()


def test_a_file_under_another_id_does_not_verify(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(2)
    a = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    b = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    (root / f"bucket-{b:020d}.snap").write_bytes((root / f"bucket-{a:020d}.snap").read_bytes())
    with pytest.raises(CorruptSnapshot, match=f"holds bucket {a}"):
        storage.get_bucket_snapshot_metadata(b)
    with pytest.raises(CorruptSnapshot, match="segment 1 record"):
        storage.get_bucket_snapshot_segment(b, 1, 1)


def test_unknown_format_version_is_unsupported(storage: FileBucketSnapshotStorage, root: Path) -> None:
    meta, segs = make_bucket(1)
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    path = root / f"bucket-{bid:020d}.snap"
    data = bytearray(path.read_bytes())
    header_end, _, _ = layout(meta, segs)
    data[8:10] = struct.pack("<H", 2)
    data[header_end - 4 : header_end] = struct.pack("<I", zlib.crc32(data[: header_end - 4]))
    path.write_bytes(data)
    with pytest.raises(UnsupportedVersion):
        storage.get_bucket_snapshot_metadata(bid)


def test_one_segment_read_reads_only_its_bytes(
    storage: FileBucketSnapshotStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta, _ = make_bucket(20)
    segs = [os.urandom(50_000) for _ in range(20)]
    bid = storage.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting)
    assert storage.get_bucket_snapshot_segment(bid, 7, 7) == [segs[6]]
    assert sum(reads) < 50_000 + 1_000  # the segment, the footer and the offset table
    reads.clear()
    storage.get_bucket_snapshot_metadata(bid)
    assert sum(reads) < meta.ByteSize() + 1_000


# -- failed writes -----------------------------------------------------------------------------------


def valid_buckets(root: Path) -> list[int]:
    found = []
    with FileBucketSnapshotStorage(root) as s:
        for bid in s.list_bucket_snapshots():
            try:
                s.get_bucket_snapshot_metadata(bid)
                s.get_bucket_snapshot_segment(bid, 1, 1000)
            except CorruptSnapshot:
                continue
            found.append(bid)
    return found


def test_failed_writes_leave_no_bucket_and_the_directory_usable(root: Path) -> None:
    meta, segs = make_bucket(3)
    faults = Faults()
    s = FileBucketSnapshotStorage(root, opener=faulty_opener(faults))
    s.start()
    first = s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    size = s.get_bucket_snapshot_length(first)
    ids = {first}
    for budget in [0, 1, 10, 100, size // 2, size - 1]:
        faults.budget = budget
        with pytest.raises(PersistFailed, match=r"bucket-\d+\.snap") as info:
            s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
        assert info.value.errno == errno.ENOSPC
        assert isinstance(info.value, OSError)
        faults.budget = None
        assert s.list_bucket_snapshots() == [first]
        assert temp_files(root) == []
    for switch in ("fail_fsync", "fail_open"):
        setattr(faults, switch, True)
        with pytest.raises(PersistFailed):
            s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
        setattr(faults, switch, False)
        assert s.list_bucket_snapshots() == [first]
        assert temp_files(root) == []
    again = s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
    assert again not in ids
    assert s.get_bucket_snapshot_segment(again, 1, 3) == segs
    s.close()
    assert valid_buckets(root) == [first, again]


def test_a_failed_id_mark_write_consumes_nothing(root: Path) -> None:
    meta, segs = make_bucket(1)
    faults = Faults()
    with FileBucketSnapshotStorage(root, opener=faulty_opener(faults)) as s:
        faults.fail_fsync = True  # the first create writes the id mark first
        with pytest.raises(PersistFailed, match=NEXT_ID_FILE):
            s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR)
        faults.fail_fsync = False
        assert not (root / NEXT_ID_FILE).exists()
        assert s.create_bucket_snapshot(meta, segs, KEY, TOPIC, CURSOR) == 1
        assert temp_files(root) == []


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"old")
    assert temp_target(temp_path(target).name) == "f" and temp_target("f") is None
    faults = Faults()
    for switch in ("budget", "fail_fsync", "fail_open"):
        setattr(faults, switch, 1 if switch == "budget" else True)
        with pytest.raises(PersistFailed, match=str(target)):
            atomic_write(target, b"new content", opener=faulty_opener(faults))
        setattr(faults, switch, None if switch == "budget" else False)
        assert target.read_bytes() == b"old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    atomic_write(target, memoryview(b"new"), sync=False)
    fsync_dir(tmp_path)
    assert target.read_bytes() == b"new"
    with pytest.raises(PersistFailed, match="missing"):
        atomic_write(tmp_path / "missing" / "f", b"x")


# -- threads -----------------------------------------------------------------------------------------


def test_threads_create_read_and_delete_concurrently(storage: FileBucketSnapshotStorage) -> None:
    kept: list[tuple[int, list[bytes]]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(w: int) -> None:
        try:
            for i in range(12):
                meta, segs = make_bucket(1 + i % 3, seed=w * 100 + i)
                bid = storage.create_bucket_snapshot(meta, segs, f"{KEY}_{w}_{i}", TOPIC, CURSOR)
                assert storage.get_bucket_snapshot_metadata(bid) == meta
                assert storage.get_bucket_snapshot_segment(bid, 1, 3) == segs
                if i % 2:
                    storage.delete_bucket_snapshot(bid)
                else:
                    with lock:
                        kept.append((bid, segs))
        except BaseException as e:
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                with lock:
                    snapshot = list(kept)
                for bid, segs in snapshot:
                    assert storage.get_bucket_snapshot_segment(bid, 1, len(segs)) == segs
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    probe = threading.Thread(target=reader)
    probe.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    probe.join()
    assert errors == []
    assert sorted(bid for bid, _ in kept) == storage.list_bucket_snapshots()
    assert len(kept) == 24


@given(
    start=st.integers(0, 200),
    room=st.integers(1, 300),
    takes=st.integers(0, 400),
    fail_at=st.one_of(st.none(), st.integers(0, 10)),
)
def test_id_counter_saves_each_block_before_handing_out_its_ids(
    start: int, room: int, takes: int, fail_at: int | None
) -> None:
    """No id twice; every id handed out is below a mark saved before it; a failed save hands out nothing."""
    from cursorkit.delayed.storage.format import IdCounter

    saved: list[int] = []

    def save(mark: int) -> None:
        if fail_at is not None and len(saved) == fail_at:
            raise PersistFailed(errno.EIO, "mark not saved")
        saved.append(mark)

    counter = IdCounter(start, start + room, save)
    handed: list[int] = []
    for _ in range(takes):
        try:
            got = counter.take("test")
        except PersistFailed as e:
            assert e.errno in (errno.ENOSPC, errno.EIO)
            if e.errno == errno.ENOSPC:
                assert len(handed) == room
            continue
        assert saved and got < saved[-1] <= start + room
        handed.append(got)
    assert handed == list(range(start, start + len(handed)))
    assert len(handed) == min(takes, room) or fail_at is not None


def test_id_marks_round_trip_and_every_flip_is_caught() -> None:
    from cursorkit.delayed.storage.format import decode_id_mark, encode_id_mark

    data = encode_id_mark(65)
    assert decode_id_mark(data, "m", 1 << 40) == 65
    with pytest.raises(CorruptSnapshot, match="out of range"):
        decode_id_mark(data, "m", 64)
    for i in range(len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            with pytest.raises((CorruptSnapshot, UnsupportedVersion)):
                decode_id_mark(bytes(bad), "m", 1 << 40)
    for n in range(len(data)):
        with pytest.raises(CorruptSnapshot):
            decode_id_mark(data[:n], "m", 1 << 40)
