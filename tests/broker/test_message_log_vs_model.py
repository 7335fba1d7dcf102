"""``MessageLog`` against a pure-Python model: appends, reads, rollover, trim, find by time, reopen."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cursorkit import Position
from cursorkit.broker.log import MessageLog
from cursorkit.broker.log.format import RECORD
from cursorkit.errors import InvalidPosition, PersistFailed, UnknownLedger
from faulty_files import Faults, faulty_opener
from message_log_model import LogModel

SEGMENT_BYTES = 160  # a few entries per ledger: rollovers are frequent

items = st.tuples(st.binary(max_size=48), st.integers(-5, 60), st.integers(1, 3))
ledger_ids = st.integers(0, 12)
entry_ids = st.integers(-1, 8)


class LogVsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="msglog-"))
        self.faults = Faults()
        self.log = self.open()
        self.model = LogModel(SEGMENT_BYTES)

    def open(self) -> MessageLog:
        return MessageLog.open(
            self.dir, segment_bytes=SEGMENT_BYTES, sync=False, opener=faulty_opener(self.faults)
        )

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(batch=st.lists(items, max_size=5))
    def append(self, batch: list[tuple[bytes, int, int]]) -> None:
        assert self.log.append(batch) == self.model.append(batch)

    @rule(batch=st.lists(items, min_size=1, max_size=5), cut=st.integers(0, 100))
    def failed_append(self, batch: list[tuple[bytes, int, int]], cut: int) -> None:
        """A write cut short (no space left): the group is cut off again, the model does not change."""
        if self.model.ledgers[self.model.current] and self.model.size(self.model.current) >= SEGMENT_BYTES:
            return  # the append would open a ledger first, and a cut there would fail that instead
        self.faults.budget = cut % sum(RECORD.size + len(d) for d, _, _ in batch)  # short of the group
        try:
            self.log.append(batch)
            raise AssertionError("the append went through")
        except PersistFailed:
            pass
        finally:
            self.faults.budget = None

    @rule(ledger=ledger_ids, entry=entry_ids)
    def read(self, ledger: int, entry: int) -> None:
        pos = Position(ledger, entry)
        expected = dict(self.model.all()).get(pos)
        if expected is not None:
            got = self.log.read(pos)
            assert got.position == pos
            assert (got.data, got.publish_time_ms, got.num_messages) == expected
        elif ledger in self.model.ledgers:
            try:
                self.log.read(pos)
                raise AssertionError(f"{pos} was read")
            except InvalidPosition:
                pass
        else:
            try:
                self.log.read(pos)
                raise AssertionError(f"{pos} was read")
            except UnknownLedger:
                pass

    @rule(ledger=ledger_ids, entry=entry_ids, max_entries=st.integers(0, 12), max_bytes=st.integers(0, 200))
    def read_from(self, ledger: int, entry: int, max_entries: int, max_bytes: int) -> None:
        pos = Position(ledger, entry)
        got = self.log.read_from(pos, max_entries, max_bytes)
        want = self.model.read_from(pos, max_entries, max_bytes)
        assert [(e.position, (e.data, e.publish_time_ms, e.num_messages)) for e in got] == want

    @rule(t=st.integers(-8, 64))
    def find_by_time(self, t: int) -> None:
        assert self.log.find_by_time(t) == self.model.find_by_time(t)

    @rule(ledger=ledger_ids, entry=entry_ids)
    def trim(self, ledger: int, entry: int) -> None:
        pos = Position(ledger, entry)
        assert self.log.trim(pos) == self.model.trim(pos)

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = self.open()
        assert self.log.report.healthy and self.log.report.entries == len(self.model.all())

    @precondition(lambda self: len(self.model.all()) > 0)
    @rule()
    def read_everything_from_the_start(self) -> None:
        got = self.log.read_from(self.log.first_position, 10_000, 1 << 30)
        assert [e.position for e in got] == [p for p, _ in self.model.all()]

    @invariant()
    def agrees(self) -> None:
        assert self.log.ledger_sizes() == {lid: len(v) for lid, v in self.model.ledgers.items()}
        assert self.log.last_position == self.model.last_position()
        assert self.log.first_position == self.model.first_position()
        assert self.log.end_position == self.model.end_position()
        assert self.log.entries == len(self.model.all())
        assert self.log.bytes == sum(self.model.size(lid) for lid in self.model.ledgers)
        assert self.log.current_ledger == self.model.current


TestLogVsModel = LogVsModel.TestCase
TestLogVsModel.settings = settings(stateful_step_count=40)
