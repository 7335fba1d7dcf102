"""Issue 12's findings, one test each.

What a disk, a peer or a caller hands us never panics, never costs unbounded work, never stalls or
falls back silently, and never leads a store outside its home.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cursorkit import Cursor, Position, RangeSet, _core
from cursorkit.ackstate.store import CursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage, MemoryCursorProperties
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    CursorkitError,
    InternalError,
    InvalidArgument,
    InvalidPosition,
)
from cursorkit.pipeline.cursors import MAX_DIR_NAME, cursor_dir_name
from cursorkit.pipeline.load import read_cursors
from cursorkit.proto import pulsar_ml_pb2 as ml


def heap_and_time(fn: object) -> tuple[int, float]:
    """Rust heap peak (bytes above the start) and seconds of one call."""
    assert callable(fn)
    _core.reset_heap_peak()
    base = _core.heap_allocated()
    t0 = time.perf_counter()
    fn()
    return _core.heap_peak() - base, time.perf_counter() - t0


# -- panics -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map", "managed_cursor_info"])
def test_a_mark_delete_past_entry_2_32_is_corrupt_not_a_panic(encoding: str) -> None:
    if encoding == "managed_cursor_info":
        data = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=2**32)
    else:
        data = ml.PositionInfo(ledgerId=1, entryId=2**32)
    with pytest.raises(CorruptSnapshot, match="4294967296"):
        Cursor.decode(data.SerializeToString(), encoding)


def test_a_cursor_the_store_could_not_read_back_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(InvalidPosition):
        Cursor(Position(1, 2**40))
    store = CursorStore.create(tmp_path / "s")
    c = Cursor(Position(1, 2**32 - 1))
    store.flush(c)
    store.close()
    with CursorStore.open(tmp_path / "s") as again:
        assert again.recover().mark_delete_position == Position(1, 2**32 - 1)


def test_long_list_map_of_exactly_2_26_words_round_trips() -> None:
    rs = RangeSet()
    rs.add(1, 2**32 - 1)
    with pytest.raises(BudgetExceeded, match="max_words"):
        rs.to_long_list_map()  # 512 MiB of words: only when asked for
    words = rs.to_long_list_map(max_words=2**26)
    assert len(words[1]) == 2**26
    assert RangeSet.from_long_list_map(words).contains(1, 2**32 - 1)


def test_the_binding_guard_turns_a_panic_into_a_typed_error() -> None:
    with pytest.raises(InternalError, match="_guard_selftest"):
        _core._guard_selftest()
    assert issubclass(InternalError, CursorkitError) and issubclass(InternalError, Exception)


# -- bounded work ------------------------------------------------------------------------------------


def test_whole_ledger_ranges_are_expanded_only_within_the_budget() -> None:
    info = ml.PositionInfo(ledgerId=0, entryId=-1)
    for ledger in range(1, 201):  # 27 bytes each, each naming a 2^32-entry ledger
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = ledger, -1
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = ledger, 2**32 - 1
    data = info.SerializeToString()
    assert len(data) < 6_000
    with pytest.raises(BudgetExceeded, match="max_chunks"):
        Cursor.decode(data, "message_range")
    three = ml.PositionInfo(ledgerId=0, entryId=-1)
    three.individualDeletedMessages.extend(info.individualDeletedMessages[:3])
    few = RangeSet.from_message_range_field(three.SerializeToString(), max_chunks=2**20)  # raised
    assert few.total_cardinality() > 0


def test_stats_skip_and_next_unacked_cost_no_more_than_their_answers() -> None:
    c = Cursor(Position(1, -1))
    for ledger in range(1, 9):
        c.ack(Position(ledger, 2**32 - 1))  # each alone would be 2^26 words as a long-list map
    heap, seconds = heap_and_time(c.stats)
    assert heap < 1 << 20 and seconds < 0.5
    sizes = {1: 2**32, 2: 2**32}
    heap, seconds = heap_and_time(lambda: c.skip(2**33 - 10, sizes))
    assert heap < 1 << 20 and seconds < 0.5
    assert c.mark_delete_position == Position(2, 2**32 - 10)  # 2^32 - 1 unacked in ledger 1
    with pytest.raises(InvalidArgument, match="limit"):
        c.next_unacked(None, 2**40, sizes)


# -- no silent stall or fallback ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", str(2**63), "１", " 1 ", "+1", "01", "1_0", ""])
def test_a_bad_bucket_property_value_is_reported_and_cleaned(tmp_path: Path, value: str) -> None:
    key = "#pulsar.internal.delayed.bucket_1_1"
    props = MemoryCursorProperties({key: value})
    for _ in range(2):
        t = BucketDelayedDeliveryTracker(FileBucketSnapshotStorage(tmp_path), props, background=False)
        t.close()
    assert key not in props  # dropped at the first recovery, so the second saw nothing
    first = BucketDelayedDeliveryTracker(
        FileBucketSnapshotStorage(tmp_path), MemoryCursorProperties({key: value}), background=False
    )
    assert len(first.recovery_report.damaged) == 1 and not first.recovery_report.missing
    first.close()


# -- text, names and paths -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map", "managed_cursor_info", "compact"])
def test_a_property_name_that_is_not_utf8_is_corrupt(encoding: str) -> None:
    data = Cursor(properties={"PROPNAMEX": 7}).encode(encoding)
    bad = data.replace(b"PROPNAMEX", b"PROP\xffNAME")
    if encoding == "compact":  # re-seal the checksum so only the text is wrong
        import zlib

        body = bad[:-5]
        bad = body + bad[-5:-4] + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(CorruptSnapshot, match="UTF-8"):
        Cursor.decode(bad, encoding)


def test_properties_must_be_persistable_when_set() -> None:
    with pytest.raises(CursorkitError):
        Cursor(properties={b"bytes": 1})  # type: ignore[dict-item]
    c = Cursor()
    c.properties["x"] = 2**64
    with pytest.raises(InvalidArgument, match="64-bit"):
        c.persist("compact")


def test_manifest_paths_outside_the_output_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    (out / "link").symlink_to(victim)
    for rel in ("../victim", "/etc", "link", ""):
        (out / "manifest.json").write_text(
            '{"format": "cursorkit-rebuild", "version": 1, "topic": "t", "now_ms": 0, '
            f'"subscriptions": {{"s": "{rel}"}}, "delayed": null}}'
        )
        with pytest.raises(CorruptSnapshot):
            read_cursors(out, ledger_sizes={})
    assert sorted(os.listdir(victim)) == ["keep"]


def test_a_symlinked_log_is_never_written_through(tmp_path: Path) -> None:
    store = CursorStore.create(tmp_path / "s")
    store.flush(Cursor())
    store.close()
    (log,) = (tmp_path / "s").glob("cursor-*.log")
    outside = tmp_path / "outside.log"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    before = outside.read_bytes()
    with pytest.raises(CursorkitError), CursorStore.open(tmp_path / "s") as s:
        s.flush(Cursor(Position(1, 4)))
    assert outside.read_bytes() == before


def test_directory_names_are_injective_and_bounded() -> None:
    names = [" 28", "\u2028", "Sub", "sub", "%53ub", "a" * 300, "a" * 301, "é" * 200, ".hidden", "x~y"]
    dirs = [cursor_dir_name(n) for n in names]
    assert len(set(dirs)) == len(names)
    assert all(0 < len(d.encode()) <= MAX_DIR_NAME and not d.startswith(".") for d in dirs)


@pytest.mark.parametrize("case", ["loop", "long", "manifest_dir", "deep_json"])
def test_inspect_reports_unusable_paths_in_one_line_with_exit_2(tmp_path: Path, case: str) -> None:
    target = tmp_path / "out"
    if case == "loop":
        target.mkdir()
        (target / "manifest.json").symlink_to(target / "manifest.json")
    elif case == "long":
        target = tmp_path / ("x" * 300)
    elif case == "manifest_dir":
        (target / "manifest.json").mkdir(parents=True)
    else:
        target.mkdir()
        (target / "manifest.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    run = subprocess.run(
        [sys.executable, "-m", "cursorkit.pipeline.cli", "inspect", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1


def test_bulk_words_are_taken_from_numpy_without_surprises() -> None:
    words = {1: np.array([-1, 0, 2**62], dtype=np.int64)}
    assert RangeSet.from_long_list_map(words).total_cardinality() == 65
