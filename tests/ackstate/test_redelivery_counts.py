"""``RedeliveryCounts`` against a dict of every position's count, and its byte forms under damage."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursorkit import Cursor, Position
from cursorkit._core import RedeliveryCounts
from cursorkit.errors import BudgetExceeded, CorruptSnapshot, InvalidArgument, InvalidPosition, LengthMismatch

ledgers = st.integers(0, 3)
entries = st.integers(0, 60)
counts = st.integers(0, 4)


def as_dict(c: RedeliveryCounts) -> dict[tuple[int, int], int]:
    out = {}
    for first, last, n in c.runs():
        for e in range(first.entry_id, last.entry_id + 1):
            out[(first.ledger_id, e)] = n
    return out


class CountsMachine(RuleBasedStateMachine):
    """Random changes; a replica fed only deltas (and pruned with the cursor) agrees."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = RedeliveryCounts()
        self.model: dict[tuple[int, int], int] = {}
        self.replica = RedeliveryCounts()
        self.cursor = Cursor(Position(0, -1))

    def _put(self, key: tuple[int, int], n: int) -> None:
        if n:
            self.model[key] = n
        else:
            self.model.pop(key, None)

    @rule(ledger=ledgers, entry=entries)
    def increment(self, ledger: int, entry: int) -> None:
        n = self.counts.increment(Position(ledger, entry))
        assert n == self.model.get((ledger, entry), 0) + 1
        self._put((ledger, entry), n)

    @rule(ledger=ledgers, entry=entries, n=counts)
    def set(self, ledger: int, entry: int, n: int) -> None:
        self.counts.set(Position(ledger, entry), n)
        self._put((ledger, entry), n)

    @rule(rows=st.lists(st.tuples(ledgers, entries, counts), max_size=8))
    def set_many(self, rows: list[tuple[int, int, int]]) -> None:
        ls = np.array([r[0] for r in rows], np.int64)
        es = np.array([r[1] for r in rows], np.int64)
        ns = np.array([r[2] for r in rows], np.int64)
        self.counts.set_many(ls, es, ns)
        for ledger, entry, n in rows:
            self._put((ledger, entry), n)

    @rule(ledger=ledgers, entry=entries)
    def ack(self, ledger: int, entry: int) -> None:
        self.cursor.ack(Position(ledger, entry))
        gone = self.counts.prune(self.cursor)
        before = len(self.model)
        self.model = {k: v for k, v in self.model.items() if not self.cursor.is_acked(Position(*k))}
        assert gone == before - len(self.model)

    @rule(ledger=ledgers, entry=entries)
    def ack_cumulative(self, ledger: int, entry: int) -> None:
        to = max(Position(ledger, entry), self.cursor.mark_delete_position)
        self.cursor.ack_cumulative(to)
        md = self.cursor.mark_delete_position
        self.counts.forget_through(md)
        self.model = {k: v for k, v in self.model.items() if Position(*k) > md}

    @rule()
    def delta_to_replica(self) -> None:
        """What a journal replays (deltas, then a prune by the cursor) is the live state."""
        self.replica.apply(self.counts.take_delta())
        assert not self.counts.has_changes
        self.replica.prune(self.cursor)
        live = {k: v for k, v in self.model.items() if not self.cursor.is_acked(Position(*k))}
        assert as_dict(self.replica) == live

    @rule()
    def snapshot_round_trip(self) -> None:
        back = RedeliveryCounts.decode(self.counts.encode())
        assert as_dict(back) == self.model
        assert back.run_count == self.counts.run_count

    @invariant()
    def agrees(self) -> None:
        assert as_dict(self.counts) == self.model
        assert len(self.counts) == len(self.model)
        runs = self.counts.runs()
        for (_, a_last, a_n), (b_first, _, b_n) in zip(runs, runs[1:], strict=False):
            assert not (
                a_last.ledger_id == b_first.ledger_id
                and a_last.entry_id + 1 == b_first.entry_id
                and a_n == b_n
            )


TestCounts = CountsMachine.TestCase


@given(st.binary(max_size=64), st.data())
def test_damaged_bytes_are_typed_errors_and_change_nothing(junk: bytes, data: st.DataObject) -> None:
    c = RedeliveryCounts()
    for e in range(0, 300, 7):
        c.increment(Position(e // 100, e))
    good = c.encode()
    cut = data.draw(st.integers(0, len(good)))
    flip = data.draw(st.integers(0, len(good) * 8 - 1))
    damaged = bytearray(good)
    damaged[flip // 8] ^= 1 << (flip % 8)
    held = RedeliveryCounts()
    held.increment(Position(99, 1))
    for bad in (good[:cut], bytes(damaged), good + junk, junk):
        try:
            held.apply(bad)
        except CorruptSnapshot:
            assert held.get(Position(99, 1)) == 1 and len(held) >= 1
        held = RedeliveryCounts()
        held.increment(Position(99, 1))


def test_bad_arguments_are_typed() -> None:
    c = RedeliveryCounts(max_runs=3)
    with pytest.raises(InvalidPosition):
        c.get(Position(0, -1))
    with pytest.raises(LengthMismatch):
        c.set_many(np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(2, np.int64))
    with pytest.raises(InvalidArgument):
        c.set(Position(0, 1), -1)
    with pytest.raises(InvalidArgument):
        RedeliveryCounts(max_runs=0)
    for e in range(3):
        c.increment(Position(0, e * 2))
    with pytest.raises(BudgetExceeded):
        c.increment(Position(0, 100))
    assert len(c) == 3
    with pytest.raises(BudgetExceeded):
        RedeliveryCounts.decode(c.encode(), max_runs=2)


def test_a_dead_letter_view_names_the_runs_at_the_limit() -> None:
    c = RedeliveryCounts()
    for _ in range(3):
        c.increment(Position(1, 5))
    c.increment(Position(1, 6))
    assert c.runs(min_count=3) == [(Position(1, 5), Position(1, 5), 3)]
    assert [n for _, _, n in c.runs()] == [3, 1]


def test_scattered_counts_cost_under_two_bytes_each() -> None:
    """The issue's budget, in miniature: 10% of 100k positions redelivered, compressed as journaled."""
    import zlib

    rng = np.random.default_rng(5)
    es = np.sort(rng.choice(100_000, 10_000, replace=False)).astype(np.int64)
    c = RedeliveryCounts()
    c.set_many(np.zeros(len(es), np.int64), es, rng.integers(1, 4, len(es)))
    assert len(zlib.compress(c.encode(), 1)) <= 2 * len(es)
