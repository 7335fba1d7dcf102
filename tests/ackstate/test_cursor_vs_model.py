"""Cursor against the pure-Python model: random acks of every kind, with and without ledger sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cursor_model import ModelCursor, Pos
from cursorkit import Cursor, Position
from cursorkit.errors import CursorkitError, InvalidArgument, InvalidPosition, UnknownLedger

LEDGERS = (1, 2, 3, 5)
SIZES = {1: 6, 2: 0, 3: 5, 5: 9}
UNIVERSE = [(ledger, e) for ledger in LEDGERS for e in range(12)]

EDGES = [(ledger, e) for ledger, n in SIZES.items() for e in (0, n - 1) if n > 0]
positions = st.tuples(st.sampled_from(LEDGERS), st.integers(0, 11)) | st.sampled_from(EDGES)
"""Any position, with the first and last entries of each ledger drawn often (roll-over points)."""


class CursorMachine(RuleBasedStateMachine):
    """Drives a Cursor and the model with the same calls and compares every observable."""

    def __init__(self) -> None:
        super().__init__()
        self.cursor = Cursor()
        self.model = ModelCursor((0, -1))

    @initialize(with_sizes=st.booleans(), start=positions, fresh=st.booleans())
    def start(self, with_sizes: bool, start: Pos, fresh: bool) -> None:
        md = (start[0], -1) if fresh else start
        sizes = dict(SIZES) if with_sizes else None
        self.cursor = Cursor(Position(*md), ledger_sizes=sizes)
        self.model = ModelCursor(md, sizes)
        self.model.roll()

    def _call(self, expect_ok: bool, fn: object, *args: object) -> object:
        assert callable(fn)
        if expect_ok:
            return fn(*args)
        with pytest.raises((InvalidPosition, UnknownLedger, InvalidArgument)):
            fn(*args)
        return None

    @rule(p=positions)
    def ack(self, p: Pos) -> None:
        ok = self.model.valid(p)
        got = self._call(ok, self.cursor.ack, Position(*p))
        if ok:
            assert got == self.model.ack(p)

    @rule(p=positions)
    def ack_ints(self, p: Pos) -> None:
        """The per-call form from two ints acks exactly as the Position form does."""
        ok = self.model.valid(p)
        got = self._call(ok, self.cursor.ack, *p)
        if ok:
            assert got == self.model.ack(p)
            assert self.cursor.is_acked(*p) == self.cursor.is_acked(Position(*p))

    @rule(ps=st.lists(positions, max_size=60))
    def ack_many(self, ps: list[Pos]) -> None:
        ok = all(self.model.valid(p) for p in ps)
        ls = np.array([p[0] for p in ps], dtype=np.int64)
        es = np.array([p[1] for p in ps], dtype=np.int64)
        got = self._call(ok, self.cursor.ack_many, ls, es)
        if ok:
            assert got == sum(self.model.ack(p) for p in ps)

    @rule(p=positions)
    def ack_cumulative(self, p: Pos) -> None:
        ok = self.model.valid(p)
        got = self._call(ok, self.cursor.ack_cumulative, Position(*p))
        if ok:
            assert got == self.model.ack_cumulative(p)

    @rule(p=positions, index=st.integers(0, 5), size=st.integers(0, 5))
    def ack_batch_index(self, p: Pos, index: int, size: int) -> None:
        try:
            want: bool | None = self.model.ack_batch_index(p, index, size) if self.model.valid(p) else None
        except ValueError:
            want = None
        got = self._call(want is not None, self.cursor.ack_batch_index, Position(*p), index, size)
        if want is not None:
            assert got == want

    @rule(
        p=positions,
        words=st.lists(
            st.sampled_from([0, -1, 1, 2**62, -(2**63)]) | st.integers(-(2**63), 2**63 - 1), max_size=4
        ),
        size=st.sampled_from([0, 1, 3, 5, 64, 65, 130]),
    )
    def ack_batch_set(self, p: Pos, words: list[int], size: int) -> None:
        """Pulsar's ``ack_set`` ANDed word by word equals acking each index it leaves unset."""
        try:
            want: int | None = self.model.ack_batch_set(p, words, size) if self.model.valid(p) else None
        except ValueError:
            want = None
        got = self._call(want is not None, self.cursor.ack_batch_set, Position(*p), words, size)
        if want is not None:
            assert got == want

    @rule(p=positions, index=st.integers(0, 5), size=st.integers(1, 5))
    def ack_cumulative_batch(self, p: Pos, index: int, size: int) -> None:
        try:
            want: bool | None = (
                self.model.ack_cumulative_batch(p, index, size) if self.model.valid(p) else None
            )
        except ValueError:
            want = None
        got = self._call(want is not None, self.cursor.ack_cumulative, Position(*p), index, size)
        if want is not None:
            assert got == want

    @rule(p=positions)
    def reset(self, p: Pos) -> None:
        self.cursor.reset(Position(*p))
        self.model.reset(p)

    @precondition(lambda self: self.model.sizes is not None)
    @rule(n=st.integers(0, 20))
    def skip(self, n: int) -> None:
        assert self.model.sizes is not None
        todo = self.model.unacked(self.model.sizes)[:n]
        assert self.cursor.skip(n) == len(todo)
        if todo:
            self.model.ack_cumulative(todo[-1])

    @invariant()
    def same_state(self) -> None:
        c, m = self.cursor, self.model
        assert c.mark_delete_position == Position(*m.md)
        assert c.non_contiguous_deleted_ranges == m.runs()
        acked = c.is_acked_many([p[0] for p in UNIVERSE], [p[1] for p in UNIVERSE])
        assert acked.tolist() == [m.is_acked(p) for p in UNIVERSE]
        want_batches = {p: sorted(u) for p, (_s, u) in m.batches.items()}
        got_batches = {}
        for ledger, entry, _size, words in c.batches():
            bits = np.unpackbits(np.frombuffer(words, dtype=np.uint8), bitorder="little")
            got_batches[(ledger, entry)] = np.flatnonzero(bits).tolist()
        assert got_batches == want_batches

    @invariant()
    def read_path(self) -> None:
        sizes = self.model.sizes or {ledger: 12 for ledger in LEDGERS}
        want = self.model.unacked(sizes)
        assert self.cursor.backlog(sizes) == len(want)
        got = self.cursor.next_unacked(limit=17, ledger_sizes=sizes)
        assert [tuple(r) for r in got.tolist()] == want[:17]


CursorMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
TestCursorMachine = CursorMachine.TestCase


@given(st.lists(positions, max_size=200), st.integers(0, 44))
def test_bulk_equals_one_by_one(ps: list[Pos], start: int) -> None:
    """ack_many gives the state and the counts that the same acks one at a time give."""
    a, b = Cursor(Position(1, start - 1)), Cursor(Position(1, start - 1))
    n = a.ack_many([p[0] for p in ps], [p[1] for p in ps])
    singles = sum(b.ack(Position(*p)) for p in ps)
    assert n == singles
    assert a.individually_deleted == b.individually_deleted
    assert a.mark_delete_position == b.mark_delete_position
    assert a.counters() == b.counters()


def test_every_error_is_a_cursorkit_error() -> None:
    """The classes raised above share the base class a caller catches."""
    for cls in (InvalidPosition, UnknownLedger, InvalidArgument):
        assert issubclass(cls, CursorkitError)
