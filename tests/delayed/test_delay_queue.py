"""DelayQueue against the pure-Python model: single and bulk adds, ordered pops, removals, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursorkit import errors
from cursorkit._core import DelayQueue
from delay_queue_model import MAX_ENTRY, MAX_I64, Index, ModelDelayQueue, valid_index

LEDGERS = st.sampled_from([0, 3, 7, 11, 2**40, MAX_I64 - 1])
"""Ledger ids that arrive out of order, some huge."""
ENTRIES = st.integers(0, 60) | st.sampled_from([MAX_ENTRY - 1, MAX_ENTRY])
TIMES = (
    st.integers(0, 20_000)
    | st.sampled_from([0, 4095, 4096, 8191, MAX_I64 - 4096, MAX_I64])
    | st.integers(0, MAX_I64)
)
BAD_TIMES = st.sampled_from([-1, -(2**63)])
BAD_LEDGERS = st.sampled_from([-1, -(2**63)])
BAD_ENTRIES = st.sampled_from([-1, MAX_ENTRY + 1, MAX_I64])


def rows(popped: tuple[Any, Any, Any]) -> list[Index]:
    """The three popped arrays as (deliver_at, ledger, entry) rows, checking their type."""
    at, ledgers, entries = popped
    for a in (at, ledgers, entries):
        assert isinstance(a, np.ndarray)
        assert a.dtype == np.int64
        assert a.ndim == 1
    return list(zip(at.tolist(), ledgers.tolist(), entries.tolist(), strict=True))


def column(values: list[int], kind: str) -> Any:
    """The same values as a list, tuple or numpy array."""
    if kind == "list":
        return list(values)
    if kind == "tuple":
        return tuple(values)
    return np.array(values, dtype=np.int64)


class DelayQueueMachine(RuleBasedStateMachine):
    """Drives a DelayQueue and the model with the same calls and compares every result."""

    def __init__(self) -> None:
        super().__init__()
        self.q = DelayQueue()
        self.model = ModelDelayQueue()

    def some_limit(self, pick: int, shift: int) -> Index:
        """A pop limit near a queued index, so pops stop inside buckets."""
        queued = self.model.ordered()
        if not queued:
            return (pick, 0, 0)
        at, ledger, entry = queued[pick % len(queued)]
        return [(at, ledger, entry), (at, ledger, entry - 1), (min(at + shift, MAX_I64), MAX_I64, MAX_I64)][
            pick % 3
        ]

    @rule(at=TIMES, ledger=LEDGERS, entry=ENTRIES)
    def add(self, at: int, ledger: int, entry: int) -> None:
        assert self.q.add(at, ledger, entry) == self.model.add(at, ledger, entry)

    @rule(
        rows=st.lists(st.tuples(TIMES, LEDGERS, ENTRIES), max_size=30),
        kind=st.sampled_from(["list", "tuple", "int64"]),
    )
    def add_many(self, rows: list[Index], kind: str) -> None:
        ats, ls, es = ([r[i] for r in rows] for i in range(3))
        got = self.q.add_many(column(ats, kind), column(ls, kind), column(es, kind))
        assert got == self.model.add_many(ats, ls, es)

    @rule(
        seed=st.integers(0, 2**32 - 1),
        n=st.integers(0, 1500),
        distinct_times=st.sampled_from([1, 3, 50, 0]),
        base=st.sampled_from([0, 1_000_000, MAX_I64 - 100_000]),
    )
    def add_bulk(self, seed: int, n: int, distinct_times: int, base: int) -> None:
        """Big numpy batches: few delivery times (grouped buckets) or many (flat ones)."""
        rng = np.random.default_rng(seed)
        if distinct_times:
            at = base + rng.integers(0, distinct_times, n) * 997
        else:
            at = base + rng.integers(0, 10_000, n)
        ledgers = rng.choice(np.array([0, 3, 7, 11, 2**40], dtype=np.int64), n)
        entries = rng.integers(0, 3000, n)
        got = self.q.add_many(at, ledgers, entries)
        assert got == self.model.add_many(at.tolist(), ledgers.tolist(), entries.tolist())

    @rule(
        pick=st.integers(0, 10**6),
        shift=st.integers(0, 10_000),
        max_items=st.sampled_from([0, 1, 5, 100, 10**6]),
    )
    def pop_until(self, pick: int, shift: int, max_items: int) -> None:
        limit = self.some_limit(pick, shift)
        got = rows(self.q.pop_until(*limit, max_items))
        assert got == self.model.pop_until(limit, max_items)

    @rule(pick=st.integers(0, 10**6), shift=st.integers(0, 10_000), max_items=st.sampled_from([1, 100, 5000]))
    def pop_due(self, pick: int, shift: int, max_items: int) -> None:
        cutoff = self.some_limit(pick, shift)[0]
        got = rows(self.q.pop_due(cutoff, max_items))
        assert got == self.model.pop_due(cutoff, max_items)

    @rule()
    def peek(self) -> None:
        assert self.q.peek() == self.model.peek()

    @rule(ledger=LEDGERS | st.sampled_from([1, 8, 2**41, -5]))
    def remove_ledgers_below(self, ledger: int) -> None:
        assert self.q.remove_ledgers_below(ledger) == self.model.remove_ledgers_below(ledger)

    @rule(ledger=LEDGERS, entry=ENTRIES)
    def contains(self, ledger: int, entry: int) -> None:
        assert self.q.contains(ledger, entry) == self.model.contains(ledger, entry)

    @rule(
        at=TIMES | BAD_TIMES,
        ledger=LEDGERS | BAD_LEDGERS,
        entry=ENTRIES | BAD_ENTRIES,
        where=st.integers(0, 4),
    )
    def bad_input_changes_nothing(self, at: int, ledger: int, entry: int, where: int) -> None:
        """One invalid value in a single or bulk add raises a typed error and changes nothing."""
        if valid_index(at, ledger, entry):
            return
        before = (len(self.q), self.q.peek())
        with pytest.raises((errors.InvalidArgument, errors.InvalidPosition)):
            self.q.add(at, ledger, entry)
        ats, ls, es = [5] * 5, [1] * 5, list(range(5))
        ats[where], ls[where], es[where] = at, ledger, entry
        with pytest.raises((errors.InvalidArgument, errors.InvalidPosition)):
            self.q.add_many(ats, ls, es)
        assert (len(self.q), self.q.peek()) == before

    @rule()
    def drain_and_refill(self) -> None:
        """Everything comes out in order; putting it back restores the same queue."""
        got = rows(self.q.drain())
        assert got == self.model.drain()
        assert len(self.q) == 0
        assert self.q.peek() is None
        if got:
            ats, ls, es = (np.array(c, dtype=np.int64) for c in zip(*got, strict=True))
            assert self.q.add_many(ats, ls, es) == self.model.add_many(ats.tolist(), ls.tolist(), es.tolist())

    @rule()
    def clear(self) -> None:
        self.q.clear()
        self.model.clear()
        assert self.q.memory_usage() == 0

    @invariant()
    def same_size(self) -> None:
        assert len(self.q) == len(self.model)

    @invariant()
    def memory_is_sane(self) -> None:
        used = self.q.memory_usage()
        # At least 4 bytes an index (the grouped form); a one-index bucket costs ~100 B at most.
        assert used >= 4 * len(self.model)
        assert used <= 160 * len(self.model) + 65_536

    def teardown(self) -> None:
        assert rows(self.q.drain()) == self.model.drain()


DelayQueueMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestDelayQueueMachine = DelayQueueMachine.TestCase


def test_order_is_by_time_then_ledger_id_then_entry() -> None:
    q = DelayQueue()
    assert q.add(100, 9, 1)
    assert q.add(100, 2, 5)
    assert q.add(100, 2, 3)
    assert q.add(99, 9, 0)
    assert not q.add(5, 9, 0)  # queued already: the first add wins
    assert q.peek() == (99, 9, 0)
    assert rows(q.drain()) == [(99, 9, 0), (100, 2, 3), (100, 2, 5), (100, 9, 1)]


def test_pops_respect_limit_and_count() -> None:
    q = DelayQueue()
    q.add_many(np.arange(10, dtype=np.int64) * 10, np.ones(10, dtype=np.int64), np.arange(10, dtype=np.int64))
    assert rows(q.pop_due(25, 100)) == [(0, 1, 0), (10, 1, 1), (20, 1, 2)]
    assert rows(q.pop_due(1000, 2)) == [(30, 1, 3), (40, 1, 4)]
    assert rows(q.pop_until(50, 1, 5, 100)) == [(50, 1, 5)]
    assert rows(q.pop_until(60, 1, 5, 100)) == []  # (60, 1, 6) > (60, 1, 5)
    assert rows(q.pop_until(60, 1, 6, 0)) == []
    assert len(q) == 4
    at, ledgers, entries = q.drain()
    assert at.tolist() == [60, 70, 80, 90]
    assert ledgers.shape == entries.shape == (4,)


def test_empty_pops_are_empty_int64_arrays() -> None:
    q = DelayQueue()
    for popped in (q.pop_due(10, 10), q.pop_until(1, 1, 1, 10), q.drain()):
        assert [a.shape for a in popped] == [(0,), (0,), (0,)]
        assert all(a.dtype == np.int64 for a in popped)
    assert q.peek() is None


def test_big_shuffled_batches_drain_in_exact_order() -> None:
    rng = np.random.default_rng(7)
    n = 200_000
    for at in (rng.integers(0, 3_600_000, n), rng.integers(0, 3600, n) * 1000):
        ledgers = (np.arange(n) % 10) * 7 % 10  # ledger ids not in arrival order
        entries = np.arange(n) // 10
        q = DelayQueue()
        assert q.add_many(at, ledgers, entries) == n
        used = q.memory_usage()
        assert used < 24 * n
        out: list[Any] = []
        while True:
            popped = q.pop_due(MAX_I64, 1000)
            if not len(popped[0]):
                break
            out.append(np.stack(popped, axis=1))
        got = np.concatenate(out)
        want = np.stack([at, ledgers, entries], axis=1)
        want = want[np.lexsort((want[:, 2], want[:, 1], want[:, 0]))]
        assert np.array_equal(got, want)
        assert q.memory_usage() < used // 4


def test_clustered_times_take_few_bytes() -> None:
    rng = np.random.default_rng(3)
    n = 100_000
    order = rng.permutation(n)
    at = rng.integers(0, 360, n) * 10_000  # 360 distinct delivery times
    ledgers = (np.arange(n) // 20_000)[order]  # five ledgers of 20,000 entries, shuffled
    entries = (np.arange(n) % 20_000)[order]
    q = DelayQueue()
    q.add_many(at, ledgers, entries)
    assert q.memory_usage() < 6 * n


def test_memory_grows_and_shrinks() -> None:
    q = DelayQueue()
    assert q.memory_usage() == 0
    q.add_many(np.arange(50_000) * 71, np.zeros(50_000, dtype=np.int64), np.arange(50_000))
    full = q.memory_usage()
    assert full >= 8 * 50_000
    q.remove_ledgers_below(1)
    assert len(q) == 0
    assert q.memory_usage() < full // 4
    q.add(5, 5, 5)
    q.clear()
    assert q.memory_usage() == 0
    assert len(q) == 0


def test_wrong_types_and_values() -> None:
    q = DelayQueue()
    with pytest.raises(errors.InvalidInputType):
        q.add(1.5, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        q.add(True, 1, 1)
    with pytest.raises(errors.InvalidInputType):
        q.add(1, "1", 1)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument, match="-3"):
        q.add(-3, 1, 1)
    with pytest.raises(errors.InvalidArgument):
        q.add(2**63, 1, 1)
    with pytest.raises(errors.InvalidArgument):
        q.add_many(np.array([2**63], dtype=np.uint64), [1], [1])
    with pytest.raises(errors.InvalidPosition):
        q.add(1, 2**63, 1)
    with pytest.raises(errors.InvalidPosition, match="-1"):
        q.add(1, 1, -1)
    with pytest.raises(errors.InvalidPosition, match="index 2"):
        q.add_many([1, 1, 1], [1, 1, 1], [0, 1, 2**32])
    with pytest.raises(errors.LengthMismatch):
        q.add_many([1, 2], [1, 2], [1])
    with pytest.raises(errors.InvalidInputType):
        q.add_many(np.array([1.0]), [1], [1])
    with pytest.raises(errors.InvalidInputType):
        q.add_many(np.zeros((2, 2), dtype=np.int64), [1, 2], [1, 2])
    with pytest.raises(errors.InvalidPosition):
        q.contains(-1, 0)
    with pytest.raises(errors.InvalidArgument):
        q.pop_due(10, -1)
    with pytest.raises(errors.InvalidInputType):
        q.pop_due(10, None)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        q.pop_until(10, 1, 1, 2.0)  # type: ignore[arg-type]
    assert len(q) == 0
    assert q.memory_usage() == 0


def test_repr_and_len() -> None:
    q = DelayQueue()
    q.add_many([1, 2, 3], [4, 4, 5], [0, 1, 0])
    assert len(q) == 3
    assert repr(q).startswith("<DelayQueue len=3 ledgers=2 ")


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3), st.integers(0, 20)), max_size=200),
    chunk=st.integers(1, 50),
)
def test_bulk_equals_single_adds(rows: list[Index], chunk: int) -> None:
    """add_many in chunks counts and orders exactly like one add per row (first add wins)."""
    single, bulk = DelayQueue(), DelayQueue()
    new_single = sum(single.add(*r) for r in rows)
    new_bulk = 0
    for i in range(0, len(rows), chunk):
        part = rows[i : i + chunk]
        new_bulk += bulk.add_many([r[0] for r in part], [r[1] for r in part], [r[2] for r in part])
    assert new_single == new_bulk
    assert rows_equal(single, bulk)


def rows_equal(a: DelayQueue, b: DelayQueue) -> bool:
    """Drains both and compares."""
    return rows(a.drain()) == rows(b.drain())
