"""``RedeliveryJournal``: what a flush returned is what a reopen finds; damage is said, never healthy."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cursorkit import Position
from cursorkit.ackstate.store.redelivery_journal import RedeliveryJournal
from cursorkit.errors import BudgetExceeded, PersistFailed, UnsupportedVersion
from cursorkit.fsio import StoreFile, default_opener


def as_dict(j: RedeliveryJournal) -> dict[tuple[int, int], int]:
    out = {}
    for first, last, n in j.counts.runs():
        for e in range(first.entry_id, last.entry_id + 1):
            out[(first.ledger_id, e)] = n
    return out


class JournalMachine(RuleBasedStateMachine):
    """Counts raised and flushed at random, the journal reopened as after a crash."""

    @initialize(root=st.just(None))
    def start(self, root: None) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="journal-"))
        self.path = self.dir / "redeliveries"
        self.journal = RedeliveryJournal.open(self.path, sync=False)
        assert self.journal.report.created and not self.journal.report.damaged
        self.live: dict[tuple[int, int], int] = {}
        self.flushed: dict[tuple[int, int], int] = {}

    @rule(ledger=st.integers(0, 2), entries=st.lists(st.integers(0, 300), min_size=1, max_size=20))
    def raise_counts(self, ledger: int, entries: list[int]) -> None:
        for e in entries:
            self.live[(ledger, e)] = self.journal.counts.increment(Position(ledger, e))

    @rule(ledger=st.integers(0, 2), entry=st.integers(0, 300))
    def forget(self, ledger: int, entry: int) -> None:
        self.journal.counts.set(Position(ledger, entry), 0)
        self.live.pop((ledger, entry), None)

    @rule()
    def flush(self) -> None:
        self.journal.flush()
        self.flushed = dict(self.live)

    @rule()
    def compact(self) -> None:
        self.journal.compact()
        self.flushed = dict(self.live)

    @rule()
    def crash_and_reopen(self) -> None:
        """Unflushed changes are lost; everything flushed is back, and the report is clean."""
        self.journal.close()
        self.journal = RedeliveryJournal.open(self.path, sync=False)
        assert not self.journal.report.damaged, self.journal.report
        assert as_dict(self.journal) == self.flushed
        self.live = dict(self.flushed)

    @rule(data=st.data())
    def torn_append(self, data: st.DataObject) -> None:
        """A flush cut short by a crash: reopening finds the state before it, not damaged."""
        if not self.journal.counts.has_changes:
            return
        if not self.path.exists():
            return  # the first flush writes the journal whole (an atomic rename: nothing to tear)
        before = self.path.stat().st_size
        self.journal.flush()
        after = self.path.stat().st_size
        if after <= before:
            return  # it compacted instead (an atomic rename: nothing to tear)
        self.journal.close()
        with self.path.open("r+b") as f:
            f.truncate(data.draw(st.integers(before, after - 1)))
        self.journal = RedeliveryJournal.open(self.path, sync=False)
        assert not self.journal.report.damaged, self.journal.report
        assert as_dict(self.journal) == self.flushed
        self.live = dict(self.flushed)

    @invariant()
    def live_state(self) -> None:
        assert as_dict(self.journal) == self.live

    @rule()
    def reading_writes_nothing(self) -> None:
        """Opening a journal only to read it never creates or changes its file."""
        before = self.path.read_bytes() if self.path.exists() else None
        reader = RedeliveryJournal.open(self.path, sync=False)
        reader.close()
        assert (self.path.read_bytes() if self.path.exists() else None) == before

    def teardown(self) -> None:
        self.journal.close()


TestJournal = JournalMachine.TestCase


def _journal_with_history(path: Path) -> dict[tuple[int, int], int]:
    j = RedeliveryJournal.open(path, sync=False)
    for round_ in range(6):
        for e in range(round_, 200, 9):
            j.counts.increment(Position(1, e))
        j.flush()
    state = as_dict(j)
    j.close()
    return state


@settings(max_examples=200)
@given(st.data())
def test_a_flipped_bit_is_damage_or_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("flip") / "redeliveries"
    truth = _journal_with_history(path)
    raw = bytearray(path.read_bytes())
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(raw))
    try:
        j = RedeliveryJournal.open(path, sync=False)
    except UnsupportedVersion:
        assert bit // 8 in (8, 9), "only the version field may read as a newer build's"
        return
    try:
        assert j.report.damaged, f"bit {bit} flipped and the journal loaded as healthy"
        got = as_dict(j)
        assert all(truth.get(k, 0) >= n for k, n in got.items()), "damage raised a count"
    finally:
        j.close()
    again = RedeliveryJournal.open(path, sync=False)  # rewritten from what was read: clean now
    assert not again.report.damaged and as_dict(again) == got
    again.close()


@given(st.binary(max_size=200))
def test_random_bytes_never_load_as_healthy(tmp_path_factory: pytest.TempPathFactory, junk: bytes) -> None:
    path = tmp_path_factory.mktemp("junk") / "redeliveries"
    path.write_bytes(junk)
    j = RedeliveryJournal.open(path, sync=False)
    assert j.report.damaged and len(j.counts) == 0
    j.close()


def test_a_flush_writes_what_changed_not_the_state(tmp_path: Path) -> None:
    j = RedeliveryJournal.open(tmp_path / "r", sync=False)
    for e in range(0, 100_000, 10):
        j.counts.increment(Position(3, e))
    j.compact()
    j.counts.increment(Position(3, 50_000))
    assert j.flush() < 64
    assert j.flush() == 0  # nothing changed
    j.close()


class _FailingFile:
    """A file whose writes fail while ``failing[0]`` is set."""

    def __init__(self, f: StoreFile, failing: list[bool]) -> None:
        self._f = f
        self._failing = failing

    def write(self, data: memoryview, /) -> int | None:
        if self._failing[0]:
            raise OSError(errno.ENOSPC, "no space left")
        return self._f.write(data)

    def __getattr__(self, name: str) -> object:
        return getattr(self._f, name)


def test_a_failed_append_loses_nothing(tmp_path: Path) -> None:
    failing = [False]

    def opener(path: str, mode: str) -> StoreFile:
        f = default_opener(path, mode)
        return _FailingFile(f, failing) if mode == "ab" else f  # type: ignore[return-value]

    j = RedeliveryJournal.open(tmp_path / "r", opener=opener, sync=False)
    j.counts.increment(Position(1, 1))
    j.flush()
    failing[0] = True
    j.counts.increment(Position(1, 2))
    with pytest.raises(PersistFailed):
        j.flush()
    failing[0] = False
    j.flush()  # a whole snapshot: the change the failed append held is in it
    j.close()
    back = RedeliveryJournal.open(tmp_path / "r", sync=False)
    assert as_dict(back) == {(1, 1): 1, (1, 2): 1}
    back.close()


def test_past_the_budget_is_refused(tmp_path: Path) -> None:
    j = RedeliveryJournal.open(tmp_path / "r", sync=False)
    for e in range(0, 100, 2):
        j.counts.increment(Position(1, e))
    j.compact()
    j.close()
    with pytest.raises(BudgetExceeded):
        RedeliveryJournal.open(tmp_path / "r", max_runs=10, sync=False)


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    (tmp_path / "sub").mkdir()
    os.symlink(outside, tmp_path / "sub" / "redeliveries")
    with pytest.raises(PersistFailed):
        RedeliveryJournal.open(tmp_path / "sub" / "redeliveries", sync=False)
    assert outside.read_bytes() == b"keep"


def test_a_file_store_keeps_its_counts_beside_its_log(tmp_path: Path) -> None:
    from cursorkit.ackstate import Cursor, CursorStore

    with CursorStore.create(tmp_path / "cursor", name="s") as store:
        cursor = Cursor(Position(1, -1), name="s")
        store.flush(cursor, full=True)
        store.redelivery_counts.increment(Position(1, 3))
        store.redelivery_counts.increment(Position(1, 3))
        assert store.flush(cursor).skipped  # the ack state did not change; the counts went to their journal
        store.redelivery_counts.increment(Position(1, 4))  # never flushed: lost with the process
    with CursorStore.open(tmp_path / "cursor") as again:
        assert not again.redelivery_report.damaged
        assert again.redelivery_counts.runs() == [(Position(1, 3), Position(1, 3), 2)]


def test_a_failing_journal_does_not_stop_the_acks(tmp_path: Path) -> None:
    from cursorkit.ackstate import Cursor, CursorStore, StoreOptions

    failing = [False]

    def opener(path: str, mode: str) -> StoreFile:
        f = default_opener(path, mode)
        journal = path.endswith("redeliveries") or "redeliveries.tmp" in path
        return _FailingFile(f, failing) if journal else f  # type: ignore[return-value]

    with CursorStore.create(
        tmp_path / "c", name="s", options=StoreOptions(sync=False), opener=opener
    ) as store:
        cursor = Cursor(Position(1, -1), name="s")
        store.flush(cursor, full=True)
        store.redelivery_counts.increment(Position(1, 5))
        failing[0] = True
        cursor.ack(Position(1, 0))
        with pytest.raises(PersistFailed):
            store.flush(cursor)
        failing[0] = False
        store.flush(cursor)  # the counts' next flush writes them all
    with CursorStore.open(tmp_path / "c") as again:
        assert again.recover().is_acked(Position(1, 0)), "the ack was written though the journal failed"
        assert again.redelivery_counts.get(Position(1, 5)) == 1
