"""CursorStore: round trips, incremental flushes, compaction, damage at every place, failed writes."""

from __future__ import annotations

import errno
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursorkit import Position, RangeSet
from cursorkit.ackstate import Cursor, CursorStore, StoreOptions
from cursorkit.ackstate.store.file.log import META_FILE
from cursorkit.errors import CorruptSnapshot, InvalidArgument, PersistFailed
from faulty_files import Faults, faulty_opener

State = tuple[Position, RangeSet, list[tuple[int, int, int, bytes]], dict[str, int]]


def state(c: Cursor) -> State:
    return c.mark_delete_position, c.individually_deleted, c.batches(), dict(c.properties)


def reopened(path: Path, **kw: Any) -> tuple[CursorStore, Cursor]:
    store = CursorStore.open(path)
    return store, store.recover(**kw)


def recovered_state(path: Path, **kw: Any) -> State:
    store, c = reopened(path, **kw)
    store.close()
    return state(c)


def logs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.suffix == ".log")


def populated(rng: np.random.Generator, ledgers: int = 20) -> Cursor:
    c = Cursor(Position(1, 5), name="sub")
    for ledger in range(1, ledgers + 1):
        entries = rng.choice(5000, size=200, replace=False).astype(np.int64)
        c.ack_many(np.full_like(entries, ledger), entries)
    for i in range(10):
        c.ack_batch_index(Position(ledgers + 1, i * 3), i % 8, 8)
    c.properties.update({"a": 1, "b": -(2**40)})
    return c


# -- round trips -------------------------------------------------------------------------------------


def test_create_refuses_an_existing_store(tmp_path: Path) -> None:
    CursorStore.create(tmp_path / "s").close()
    with pytest.raises(FileExistsError):
        CursorStore.create(tmp_path / "s")


def test_empty_store_round_trip(tmp_path: Path) -> None:
    with CursorStore.create(tmp_path / "s", name="sub-1") as store:
        c = store.recover()
        assert c.name == "sub-1"
        assert c.mark_delete_position == Position(0, -1)
        assert store.flush(c).skipped
        assert store.flush(c, full=True).ledgers_written == 0
    store, c = reopened(tmp_path / "s")
    assert not store.report.damaged
    assert store.report.marker_sequence == 1
    assert state(c) == (Position(0, -1), RangeSet(), [], {})
    assert c.name == "sub-1"
    store.close()


def test_many_ledgers_batches_properties_round_trip(tmp_path: Path) -> None:
    c = populated(np.random.default_rng(1), ledgers=300)
    with CursorStore.create(tmp_path / "s") as store:
        base = store.log_bytes
        res = store.flush(c)
        assert res.ledgers_written == 300
        assert res.bytes_written == store.log_bytes - base
    assert recovered_state(tmp_path / "s") == state(c)


def test_mark_delete_only_round_trip(tmp_path: Path) -> None:
    c = Cursor(name="md")
    c.ack_cumulative(Position(7, 41))
    with CursorStore.create(tmp_path / "s", name="md") as store:
        res = store.flush(c)
        assert (res.ledgers_written, res.bytes_written) == (0, res.marker_bytes)
    md, acked, batches, props = recovered_state(tmp_path / "s")
    assert (md, acked.is_empty(), batches, props) == (Position(7, 41), True, [], {})


def test_partial_batches_round_trip_with_ledger_sizes(tmp_path: Path) -> None:
    sizes = {3: 10, 4: 10}
    c = Cursor(Position(3, -1), ledger_sizes=sizes)
    c.ack_batch_index(Position(3, 0), 0, 5)
    c.ack_batch_index(Position(3, 4), 3, 100)
    c.ack(Position(4, 2))
    with CursorStore.create(tmp_path / "s") as store:
        store.flush(c)
    store, back = reopened(tmp_path / "s", ledger_sizes=sizes)
    assert state(back) == state(c)
    assert back.is_batch_index_acked(Position(3, 4), 3)
    assert not back.is_batch_index_acked(Position(3, 4), 2)
    assert back.ledger_sizes == sizes
    store.close()


# -- incremental flushes -------------------------------------------------------------------------------


def test_incremental_flush_writes_only_dirty_ledgers(tmp_path: Path) -> None:
    with CursorStore.create(tmp_path / "s") as store:
        c = store.recover()
        c.ack_many(*np.array([(ledger, e) for ledger in range(1, 51) for e in range(0, 400, 2)]).T)
        first = store.flush(c)
        assert first.ledgers_written == 50
        before = store.log_bytes
        c.ack(Position(7, 1))
        c.ack(Position(33, 3))
        res = store.flush(c)
        assert (res.ledgers_written, res.ledgers_dropped, res.compacted, res.skipped) == (2, 0, False, False)
        assert store.log_bytes - before == res.bytes_written
        assert res.bytes_written < first.bytes_written / 10
        assert res.marker_bytes < res.bytes_written
        assert store.flush(c).skipped
        # A property or a batch-index ack alone rewrites only the marker.
        c.properties["p"] = 1
        res = store.flush(c)
        assert (res.skipped, res.ledgers_written, res.bytes_written) == (False, 0, res.marker_bytes)
        c.ack_batch_index(Position(60, 0), 1, 4)
        assert store.flush(c).ledgers_written == 0
        res = store.flush(c, force=True)
        assert (res.skipped, res.ledgers_written, res.bytes_written) == (False, 0, res.marker_bytes)
        assert store.flush(c, full=True).ledgers_written == 50
    assert recovered_state(tmp_path / "s") == state(c)


def test_reset_and_cumulative_ack_drop_ledgers(tmp_path: Path) -> None:
    with CursorStore.create(tmp_path / "s") as store:
        c = store.recover()
        for ledger in (1, 2, 3):
            c.ack_many([ledger] * 3, [5, 7, 9])
        assert store.flush(c).ledgers_written == 3
        c.ack_cumulative(Position(2, 0))  # ledger 1 is now below mark-delete
        res = store.flush(c)
        assert (res.ledgers_written, res.ledgers_dropped) == (0, 1)
        c.reset(Position(9, 0))
        res = store.flush(c)
        assert (res.ledgers_written, res.ledgers_dropped) == (0, 2)
    md, acked, _, _ = recovered_state(tmp_path / "s")
    assert (md, acked.is_empty()) == (Position(9, -1), True)


def recovered_state_unlocked(store: CursorStore, c: Cursor) -> bool:
    """Whether a recover() on the open store (read back from its log) gives the cursor's state."""
    return state(store.recover()) == state(c)


def test_a_different_cursor_is_written_whole(tmp_path: Path) -> None:
    with CursorStore.create(tmp_path / "s") as store:
        a = store.recover()
        a.ack_many([1, 2, 3], [4, 4, 4])
        store.flush(a)
        b = Cursor()
        b.ack(Position(5, 5))
        res = store.flush(b)
        assert (res.ledgers_written, res.ledgers_dropped) == (1, 3)
        # A bound cursor whose state was replaced wholesale is caught by its ledger set.
        b.restore(Position(0, -1), RangeSet.from_bytes(a.individually_deleted.to_bytes()), [])
        b.ack(Position(3, 9))
        assert store.flush(b).ledgers_written == 3
    assert recovered_state(tmp_path / "s")[1] == b.individually_deleted


def test_concurrent_flushes_and_acks(tmp_path: Path) -> None:
    with CursorStore.create(tmp_path / "s", options=StoreOptions(compact_min_dead_bytes=4096)) as store:
        c = store.recover()
        stop = threading.Event()

        def acker() -> None:
            rng = np.random.default_rng(3)
            while not stop.is_set():
                c.ack_many(rng.integers(1, 9, 50), rng.integers(0, 2000, 50))

        def flusher() -> None:
            for _ in range(60):
                store.flush(c)

        threads = [threading.Thread(target=acker), *(threading.Thread(target=flusher) for _ in range(3))]
        for t in threads:
            t.start()
        for t in threads[1:]:
            t.join()
        stop.set()
        threads[0].join()
        store.flush(c)
        assert len(logs(tmp_path / "s")) == 1
    assert recovered_state(tmp_path / "s") == state(c)


# -- compaction ------------------------------------------------------------------------------------------


def churn(store: CursorStore, c: Cursor, flushes: int, start: int = 0) -> None:
    for i in range(start, start + flushes):
        c.ack(Position(1 + i % 3, 2 * i + 1))
        store.flush(c)


def test_compaction_keeps_state_shrinks_log_and_removes_old_generation(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with CursorStore.create(path, options=StoreOptions(compact_min_dead_bytes=1 << 30)) as store:
        c = store.recover()
        churn(store, c, 200)
        assert store.dead_bytes > 10 * store.live_bytes
        before, gen = store.log_bytes, store.generation
        res = store.compact()
        assert res.compacted and store.generation == gen + 1
        assert store.log_bytes < before / 10
        assert store.dead_bytes == 0
        assert logs(path) == [store.log_path.name]
        churn(store, c, 5, start=200)  # appends continue in the new generation
    store, back = reopened(path)
    assert state(back) == state(c)
    assert store.report.generation == gen + 1 and not store.report.damaged
    c.ack(Position(4, 4))
    back.ack(Position(4, 4))
    assert store.flush(back).ledgers_written == 1
    store.close()
    assert recovered_state(path) == state(c)


def test_flushes_compact_automatically(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with CursorStore.create(
        path, options=StoreOptions(compact_min_dead_bytes=2048, compact_dead_ratio=0.5)
    ) as s:
        c = s.recover()
        compactions = 0
        for i in range(300):
            c.ack(Position(1 + i % 3, 2 * i + 1))
            due = s.compaction_due
            res = s.flush(c)
            assert res.compacted == due
            compactions += res.compacted
            assert s.dead_bytes <= max(s.live_bytes, 2048) + 1024
        assert compactions >= 10
        assert logs(path) == [s.log_path.name]
        unflushed = c.ack(Position(9, 9))
        assert unflushed
        res = s.compact(c)  # with a cursor: a full flush of its current state
        assert res.compacted and res.ledgers_written == 4
    assert recovered_state(path) == state(c)


# -- damage ------------------------------------------------------------------------------------------


def three_flushes(path: Path) -> tuple[list[State], list[tuple[int, int]]]:
    """A store with three flushes; the states after each, and the (start, end) bytes of each flush."""
    states: list[State] = []
    spans: list[tuple[int, int]] = []
    with CursorStore.create(path, name="d") as store:
        c = store.recover()
        states.append(state(c))
        for i, ledgers in enumerate(((1, 2), (2,), (1, 3))):
            for ledger in ledgers:
                c.ack_many([ledger] * 4, [10 * i + 2, 10 * i + 3, 10 * i + 5, 10 * i + 9])
            c.ack_batch_index(Position(8, i), 1, 4)
            c.properties["i"] = i
            start = store.log_bytes
            store.flush(c)
            spans.append((start, store.log_bytes))
            states.append(state(c))
    return states, spans


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def log_of(path: Path) -> Path:
    (log,) = (p for p in path.iterdir() if p.suffix == ".log")
    return log


def test_flipped_byte_in_last_ledger_record_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, spans = three_flushes(path)
    start, _ = spans[2]
    flip(log_of(path), start + 20)  # inside the first ledger record of the last flush
    store, c = reopened(path)
    assert state(c) == states[2]
    rep = store.report
    assert [d.offset for d in rep.corrupt_records] == [start]
    assert len(rep.fallbacks) == 1 and "ledger 1" in rep.fallbacks[0].reason
    assert rep.marker_sequence == 2 and rep.damaged
    # The next flush rolls to a clean generation; nothing is appended after the damage.
    c.ack(Position(5, 5))
    assert store.flush(c).compacted
    store.close()
    store, back = reopened(path)
    assert state(back) == state(c) and not store.report.damaged
    store.close()


def test_flipped_byte_in_marker_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, spans = three_flushes(path)
    _, end = spans[2]
    flip(log_of(path), end - 7)
    store, c = reopened(path)
    assert state(c) == states[2]
    assert store.report.corrupt_records[0].reason.startswith("marker record fails its checksum")
    store.close()


def test_record_named_by_two_markers_falls_back_twice(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, spans = three_flushes(path)
    flip(log_of(path), spans[1][0] + 20)  # flush 2 wrote only ledger 2; marker 3 still names it
    store, c = reopened(path)
    assert state(c) == states[1]
    assert store.report.marker_sequence == 1
    third, second = store.report.fallbacks  # newest first: markers 3 and 2 both name the bad record
    assert spans[2][0] < third.offset < spans[2][1] and spans[1][0] < second.offset < spans[1][1]
    assert "ledger 2" in third.reason and "ledger 2" in second.reason
    store.close()


def test_damaged_superseded_record_is_reported_without_fallback(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, spans = three_flushes(path)
    flip(log_of(path), spans[0][0] + 20)  # flush 1's ledger-1 record, replaced by flush 3
    store, c = reopened(path)
    assert state(c) == states[3]
    assert [d.offset for d in store.report.corrupt_records] == [spans[0][0]]
    assert store.report.fallbacks == ()
    c.ack(Position(9, 9))
    assert store.flush(c).compacted  # never append to a log with damage in it
    store.close()
    assert recovered_state(path) == state(c)


def test_nothing_valid_raises_naming_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "s"
    three_flushes(path)
    with CursorStore.open(path) as store:
        store.compact()  # the new log holds a single marker
        log = store.log_path
        size = store.log_bytes
    flip(log, size - 3)
    with pytest.raises(CorruptSnapshot, match=rf"{log.name} at byte \d+: no usable checkpoint marker"):
        CursorStore.open(path)
    log.write_bytes(log.read_bytes()[:-30])
    with pytest.raises(CorruptSnapshot, match=rf"{log.name} at byte \d+"):
        CursorStore.open(path)
    log.unlink()
    with pytest.raises(CorruptSnapshot, match="log file missing"):
        CursorStore.open(path)


def test_every_flipped_byte_is_reported_or_refused(tmp_path: Path) -> None:
    base = tmp_path / "base"
    states, _ = three_flushes(base)
    size = log_of(base).stat().st_size
    for offset in range(size):
        path = tmp_path / f"f{offset}"
        shutil.copytree(base, path)
        flip(log_of(path), offset)
        try:
            store, c = reopened(path)
        except CorruptSnapshot as e:
            assert "at byte" in str(e) and "cursor-" in str(e)
            continue
        assert store.report.damaged, offset
        assert state(c) in states, offset
        c.ack(Position(6, offset))
        store.flush(c)
        store.close()
        again, back = reopened(path)
        assert not again.report.damaged, offset
        assert state(back) == state(c), offset
        again.close()
        shutil.rmtree(path)


def test_torn_tail_at_every_offset_of_the_last_flush(tmp_path: Path) -> None:
    base = tmp_path / "base"
    states, spans = three_flushes(base)
    start, end = spans[2]
    for cut in range(start, end):
        path = tmp_path / f"t{cut}"
        shutil.copytree(base, path)
        log = log_of(path)
        log.write_bytes(log.read_bytes()[:cut])
        store, c = reopened(path)
        rep = store.report
        assert state(c) == states[2], cut
        assert (rep.unused_tail_bytes, rep.corrupt_records, rep.fallbacks) == (cut - start, (), ()), cut
        assert rep.torn_tail_bytes <= cut - start
        # Any cut inside the last flush is reported: a torn record, or whole records whose marker
        # is missing (a cut exactly at a record boundary used to pass silently).
        assert rep.damaged == (cut > start), cut
        if not rep.torn_tail_bytes:  # cut exactly at a record boundary
            assert (rep.unfinished_flush_records > 0) == (cut > start), cut
        c.ack(Position(7, 7))
        res = store.flush(c)
        assert not res.compacted  # a torn tail is cut off, not rolled over
        assert store.log_bytes == start + res.bytes_written
        store.close()
        again, back = reopened(path)
        assert not again.report.damaged and state(back) == state(c), cut
        again.close()
        shutil.rmtree(path)


@pytest.mark.parametrize("offset", [0, 4, 8, 9, 12, 15, -5, -1])
def test_damaged_metadata_file_falls_back_to_the_logs(tmp_path: Path, offset: int) -> None:
    path = tmp_path / "s"
    states, _ = three_flushes(path)
    flip(path / META_FILE, offset)
    store, c = reopened(path)
    assert state(c) == states[-1]
    assert store.report.meta_error is not None and f"{META_FILE}: " in store.report.meta_error
    assert c.name == "d"  # from the log header
    c.ack(Position(9, 1))
    assert store.flush(c).compacted  # a fresh generation and metadata file
    store.close()
    again, back = reopened(path)
    assert again.report.meta_error is None and state(back) == state(c)
    again.close()


def test_missing_metadata_and_bad_header_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, _ = three_flushes(path)
    (path / META_FILE).unlink()
    flip(log_of(path), 2)  # the log magic
    store, c = reopened(path)
    assert state(c) == states[-1]
    assert "missing" in (store.report.meta_error or "")
    assert store.report.corrupt_records[0].offset == 0
    store.close()


def test_empty_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(CorruptSnapshot, match="no log file"):
        CursorStore.open(tmp_path)


def test_stale_files_of_an_interrupted_compaction_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "s"
    states, _ = three_flushes(path)
    log = log_of(path)
    newer = path / "cursor-000000000007.log"
    shutil.copy(log, newer)
    (path / "store.meta.tmp").write_bytes(b"partial")
    store, c = reopened(path)
    assert state(c) == states[-1]
    assert store.report.stale_files_removed == ("cursor-000000000007.log", "store.meta.tmp")
    assert logs(path) == [log.name]
    store.compact()
    assert store.generation == 8  # never reuses a generation number seen on disk
    store.close()


def test_store_is_locked_and_closed_store_refuses(tmp_path: Path) -> None:
    store = CursorStore.create(tmp_path / "s")
    with pytest.raises(BlockingIOError):
        CursorStore.open(tmp_path / "s")
    store.close()
    with pytest.raises(InvalidArgument):
        store.recover()
    CursorStore.open(tmp_path / "s").close()


def test_options_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        StoreOptions(compact_min_dead_bytes=-1)
    with pytest.raises(InvalidArgument):
        StoreOptions(compact_dead_ratio=float("nan"))


# -- failed writes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, 1, 11, 40, 90])
def test_failed_append_raises_and_keeps_the_previous_flush(tmp_path: Path, budget: int) -> None:
    path = tmp_path / "s"
    faults = Faults()
    store = CursorStore.create(path, opener=faulty_opener(faults))
    c = store.recover()
    c.ack_many([1, 1, 2, 3], [5, 8, 1, 1])
    store.flush(c)
    flushed = state(c)
    size = store.log_bytes
    c.ack_many([1, 2, 4], [20, 20, 20])
    c.properties["x"] = 1
    faults.budget = budget
    with pytest.raises(PersistFailed) as info:
        store.flush(c)
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert store.log_bytes == size == store.log_path.stat().st_size
    assert sorted(c.dirty_ledgers()) == [1, 2, 4]
    assert recovered_state_unlocked(store, Cursor()) is False
    assert state(store.recover()) == flushed  # read back from the (truncated) log
    store.close()
    assert recovered_state(path) == flushed
    # The same store, still open, writes everything needed once the disk has room again.
    store = CursorStore.open(path, opener=faulty_opener(faults))
    c2 = store.recover()
    c2.ack_many([1, 2, 4], [20, 20, 20])
    c2.properties["x"] = 1
    faults.budget = budget
    with pytest.raises(PersistFailed):
        store.flush(c2)
    faults.budget = None
    res = store.flush(c2)
    assert res.ledgers_written == 3
    store.close()
    assert recovered_state(path) == state(c2)


@pytest.mark.parametrize(("mode", "budget"), [("xb", 0), ("xb", 30), ("wb", 0), ("wb", 5)])
def test_failed_compaction_keeps_the_previous_generation(tmp_path: Path, mode: str, budget: int) -> None:
    path = tmp_path / "s"
    faults = Faults()
    faults.fail_modes = {mode}
    states, _ = three_flushes(path)
    store = CursorStore.open(path, opener=faulty_opener(faults))
    c = store.recover()
    gen = store.generation
    c.ack(Position(4, 4))
    faults.budget = budget
    with pytest.raises(PersistFailed):
        store.compact(c)
    assert store.generation == gen
    assert logs(path) == [store.log_path.name]
    assert not (path / "store.meta.tmp").exists()
    assert 4 in c.dirty_ledgers()
    with pytest.raises(PersistFailed):
        store.compact()
    store.close()
    assert recovered_state(path) == states[-1]
    faults.budget = None
    store = CursorStore.open(path, opener=faulty_opener(faults))
    c = store.recover()
    c.ack(Position(4, 4))
    assert store.compact(c).compacted
    store.close()
    assert recovered_state(path) == state(c)


# -- stateful ------------------------------------------------------------------------------------------

SIZES = {1: 40, 2: 40, 3: 40}
ledger_ids = st.sampled_from(sorted(SIZES))
entry_ids = st.integers(0, 39)


class StoreMachine(RuleBasedStateMachine):
    """Random acks, flushes, compactions, failed writes and reopens against the last flushed state."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="cursorstore-"))
        self.path = self.dir / "s"
        self.faults = Faults()
        self.options = StoreOptions(compact_min_dead_bytes=600, compact_dead_ratio=0.5)
        self.store = CursorStore.create(
            self.path, name="m", options=self.options, opener=faulty_opener(self.faults)
        )
        self.cursor = self.store.recover(ledger_sizes=SIZES)
        self.flushed = state(self.cursor)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(ledger=ledger_ids, entry=entry_ids)
    def ack(self, ledger: int, entry: int) -> None:
        self.cursor.ack(Position(ledger, entry))

    @rule(ledger=ledger_ids, entries=st.lists(entry_ids, max_size=30))
    def ack_many(self, ledger: int, entries: list[int]) -> None:
        self.cursor.ack_many([ledger] * len(entries), entries)

    @rule(ledger=ledger_ids, entry=entry_ids)
    def ack_cumulative(self, ledger: int, entry: int) -> None:
        if Position(ledger, entry) > self.cursor.mark_delete_position:
            self.cursor.ack_cumulative(Position(ledger, entry))

    @rule(ledger=ledger_ids, entry=entry_ids, index=st.integers(0, 4))
    def ack_batch_index(self, ledger: int, entry: int, index: int) -> None:
        self.cursor.ack_batch_index(Position(ledger, entry), index, 5)

    @rule(ledger=ledger_ids, entry=entry_ids)
    def reset(self, ledger: int, entry: int) -> None:
        self.cursor.reset(Position(ledger, entry))

    @rule(name=st.sampled_from(["a", "b"]), value=st.integers(-(2**63), 2**63 - 1))
    def set_property(self, name: str, value: int) -> None:
        self.cursor.properties[name] = value

    @rule(full=st.booleans())
    def flush(self, full: bool) -> None:
        res = self.store.flush(self.cursor, full=full)
        assert res.skipped == (res.bytes_written == 0)
        self.flushed = state(self.cursor)

    @rule(budget=st.integers(0, 400))
    def failed_flush(self, budget: int) -> None:
        self.faults.budget = budget
        try:
            self.store.flush(self.cursor)
            self.flushed = state(self.cursor)
        except PersistFailed:
            pass
        finally:
            self.faults.budget = None

    @rule(with_cursor=st.booleans())
    def compact(self, with_cursor: bool) -> None:
        if with_cursor:
            self.store.compact(self.cursor)
            self.flushed = state(self.cursor)
        else:
            self.store.compact()
        assert logs(self.path) == [self.store.log_path.name]

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = CursorStore.open(self.path, options=self.options, opener=faulty_opener(self.faults))
        assert not self.store.report.damaged
        self.cursor = self.store.recover(ledger_sizes=SIZES)
        assert state(self.cursor) == self.flushed

    @invariant()
    def accounting(self) -> None:
        assert 0 <= self.store.live_bytes <= self.store.log_bytes
        assert self.store.log_bytes == self.store.log_path.stat().st_size


StoreMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreMachine = StoreMachine.TestCase
