"""PendingAcks (Pulsar's PendingAcksMap) against a dict model: adds, acks, cumulative acks, close."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursorkit import errors
from cursorkit._core import PendingAcks

MAX_ENTRY = 2**32 - 1
MAX_I64 = 2**63 - 1
U32 = 2**32 - 1

LEDGERS = st.sampled_from([0, 3, 7, 2**40, MAX_I64])
ENTRIES = st.integers(0, 400) | st.sampled_from([MAX_ENTRY - 1, MAX_ENTRY])
BATCHES = st.integers(1, 5) | st.just(U32)
HASHES = st.integers(0, 70_000) | st.just(U32)

Row = tuple[int, int, int, int]


class ModelPendingAcks:
    """(ledger, entry) -> (batch_size, hash), a closed flag, and Pulsar's rules in plain Python."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], tuple[int, int]] = {}
        self.closed = False

    def add(self, ledger: int, entry: int, batch: int, h: int) -> bool:
        if (ledger, entry) in self.rows:
            return False
        self.rows[(ledger, entry)] = (batch, h)
        return True

    def remove(self, ledger: int, entry: int) -> tuple[int, int] | None:
        return self.rows.pop((ledger, entry), None)

    def remove_up_to(self, ledger: int, entry: int) -> list[Row]:
        gone = sorted(k for k in self.rows if k <= (ledger, entry))
        return [(*k, *self.rows.pop(k)) for k in gone]

    def items(self) -> list[Row]:
        return [(*k, *v) for k, v in sorted(self.rows.items())]

    def drain_and_close(self) -> list[Row]:
        out = self.items()
        self.rows.clear()
        self.closed = True
        return out


def valid(ledger: int, entry: int) -> bool:
    return 0 <= ledger <= MAX_I64 and 0 <= entry <= MAX_ENTRY


def column(values: list[int], kind: str) -> Any:
    """The same values as a list, a tuple or an int64 numpy array."""
    if kind == "list":
        return list(values)
    if kind == "tuple":
        return tuple(values)
    return np.array(values, dtype=np.int64)


def as_rows(a: Any) -> list[Row]:
    """An (n, 4) int64 array as row tuples, checking its type and shape."""
    assert isinstance(a, np.ndarray) and a.dtype == np.int64
    assert a.ndim == 2 and a.shape[1] == 4
    return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in a.tolist()]


def snapshot(p: PendingAcks) -> tuple[Any, ...]:
    return (as_rows(p.items()), len(p), p.total_messages, p.closed)


KINDS = st.sampled_from(["list", "tuple", "int64"])


class PendingAcksMachine(RuleBasedStateMachine):
    """Drives a PendingAcks and the model with the same calls and compares every result."""

    def __init__(self) -> None:
        super().__init__()
        self.p = PendingAcks()
        self.model = ModelPendingAcks()
        self.next = 0
        """A dispatcher's read position in ledger 7: most adds append."""

    def pending(self, pick: int) -> tuple[int, int]:
        keys = sorted(self.model.rows)
        return keys[pick % len(keys)] if keys else (7, pick)

    @rule(ledger=LEDGERS, entry=ENTRIES, batch=BATCHES, h=HASHES, append=st.booleans())
    def add(self, ledger: int, entry: int, batch: int, h: int, append: bool) -> None:
        if append:
            ledger, entry, self.next = 7, self.next, self.next + 1
        if self.model.closed:
            with pytest.raises(errors.TrackerClosed):
                self.p.add(ledger, entry, batch, h)
            return
        assert self.p.add(ledger, entry, batch, h) == self.model.add(ledger, entry, batch, h)

    @rule(
        rows=st.lists(st.tuples(LEDGERS, ENTRIES, BATCHES, HASHES), max_size=40),
        appended=st.integers(0, 300),
        kind=KINDS,
    )
    def add_many(self, rows: list[Row], appended: int, kind: str) -> None:
        rows = rows + [(7, self.next + i, 1, i) for i in range(appended)]
        self.next += appended
        cols = [column([r[i] for r in rows], kind) for i in range(4)]
        if self.model.closed:
            with pytest.raises(errors.TrackerClosed):
                self.p.add_many(*cols)
            return
        got = self.p.add_many(*cols)
        assert got.dtype == np.bool_
        assert got.tolist() == [self.model.add(*r) for r in rows]

    @rule(pick=st.integers(0, 10**6), ledger=LEDGERS, entry=ENTRIES, existing=st.booleans())
    def remove(self, pick: int, ledger: int, entry: int, existing: bool) -> None:
        if existing:
            ledger, entry = self.pending(pick)
        assert self.p.remove(ledger, entry) == self.model.remove(ledger, entry)

    @rule(picks=st.lists(st.integers(0, 10**6), max_size=30), kind=KINDS)
    def remove_many(self, picks: list[int], kind: str) -> None:
        keys = [self.pending(p) if p % 4 else (3, p % 500) for p in picks]
        found, batches, hashes = self.p.remove_many(
            column([k[0] for k in keys], kind), column([k[1] for k in keys], kind)
        )
        want = [self.model.remove(*k) for k in keys]
        assert found.tolist() == [w is not None for w in want]
        assert batches.tolist() == [w[0] if w else 0 for w in want]
        assert hashes.tolist() == [w[1] if w else 0 for w in want]

    @rule(
        pick=st.integers(0, 10**6),
        shift=st.sampled_from([-1, 0, 1]),
        ledger=LEDGERS,
        any_ledger=st.booleans(),
    )
    def remove_all_up_to(self, pick: int, shift: int, ledger: int, any_ledger: bool) -> None:
        """A cumulative ack at, just before or just after a pending entry (entry -1 allowed)."""
        if any_ledger:
            entry = -1 if shift < 0 else pick % 500
        else:
            ledger, entry = self.pending(pick)
            entry = max(-1, min(MAX_ENTRY, entry + shift))
        got = as_rows(self.p.remove_all_up_to(ledger, entry))
        assert got == self.model.remove_up_to(ledger, entry)

    @rule(pick=st.integers(0, 10**6), ledger=LEDGERS, entry=ENTRIES)
    def look_up(self, pick: int, ledger: int, entry: int) -> None:
        for lk, e in (self.pending(pick), (ledger, entry)):
            assert self.p.get(lk, e) == self.model.rows.get((lk, e))
            assert self.p.contains(lk, e) == ((lk, e) in self.model.rows)

    @rule()
    def drain_and_close(self) -> None:
        assert as_rows(self.p.drain_and_close()) == self.model.drain_and_close()
        assert self.p.closed
        assert self.p.memory_usage() == 0

    @rule()
    def reopen(self) -> None:
        """A consumer that reconnects gets a fresh map."""
        if self.model.closed:
            self.p = PendingAcks()
            self.model = ModelPendingAcks()

    @rule(
        ledger=LEDGERS | st.sampled_from([-1, -(2**63)]),
        entry=ENTRIES | st.sampled_from([-1, MAX_ENTRY + 1, MAX_I64]),
        batch=BATCHES | st.sampled_from([0, -1, 2**32]),
        h=HASHES | st.sampled_from([-1, 2**32]),
        where=st.integers(0, 3),
    )
    def bad_input_changes_nothing(self, ledger: int, entry: int, batch: int, h: int, where: int) -> None:
        """One bad value in a single or bulk call raises a typed error and changes nothing."""
        if valid(ledger, entry) and 1 <= batch <= U32 and 0 <= h <= U32:
            return
        before = snapshot(self.p)
        typed = (errors.InvalidPosition, errors.InvalidArgument, errors.TrackerClosed)
        with pytest.raises(typed):
            self.p.add(ledger, entry, batch, h)
        cols = [[7] * 4, [10_000, 10_001, 10_002, 10_003], [1] * 4, [0] * 4]
        for i, v in enumerate((ledger, entry, batch, h)):
            cols[i][where] = v
        with pytest.raises(typed):
            self.p.add_many(*cols)
        if not valid(ledger, entry):
            with pytest.raises(errors.InvalidPosition):
                self.p.remove(ledger, entry)
            with pytest.raises(errors.InvalidPosition):
                self.p.remove_many([7, ledger], [0, entry])
            with pytest.raises(errors.InvalidPosition):
                self.p.get(ledger, entry)
        assert snapshot(self.p) == before

    @invariant()
    def same_state(self) -> None:
        assert len(self.p) == len(self.model.rows)
        assert self.p.total_messages == sum(b for b, _ in self.model.rows.values())
        assert self.p.closed == self.model.closed
        items = self.model.items()
        assert as_rows(self.p.items()) == items
        assert self.p.hashes().tolist() == [r[3] for r in items]

    @invariant()
    def memory_is_compact(self) -> None:
        used, n = self.p.memory_usage(), len(self.model.rows)
        assert used >= 12 * n
        # 12 B an item; a run gives capacity back only below a quarter full (hysteresis), so at
        # worst 48 B an item, plus the run and ledger vectors.
        assert used <= 52 * n + 4096


PendingAcksMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestPendingAcksMachine = PendingAcksMachine.TestCase


# ------------------------------------------------------------------------------- worked examples


def test_pulsar_pending_acks_map() -> None:
    p = PendingAcks()
    assert p.add(5, 1, 10, 4242)
    assert not p.add(5, 1, 3, 1)  # present: kept as first added
    assert p.add(5, 2, 1, 17) and p.add(4, 9, 2, 8)
    assert p.get(5, 1) == (10, 4242)
    assert p.total_messages == 13 and len(p) == 3
    assert as_rows(p.remove_all_up_to(5, 1)) == [(4, 9, 2, 8), (5, 1, 10, 4242)]  # inclusive
    assert p.remove(5, 2) == (1, 17)
    assert p.remove(5, 2) is None
    assert len(p) == 0 and p.total_messages == 0


def test_drain_and_close_refuses_later_adds() -> None:
    p = PendingAcks()
    p.add_many([1, 1, 0], [2, 1, 7], [1, 1, 1], [3, 2, 1])
    assert as_rows(p.drain_and_close()) == [(0, 7, 1, 1), (1, 1, 1, 2), (1, 2, 1, 3)]
    assert p.closed and "closed=True" in repr(p)
    with pytest.raises(errors.TrackerClosed):
        p.add(1, 3, 1, 1)
    with pytest.raises(errors.TrackerClosed):
        p.add_many([1], [3], [1], [1])
    assert p.remove(1, 1) is None
    assert as_rows(p.drain_and_close()) == []
    assert isinstance(errors.TrackerClosed("x"), RuntimeError)


def test_typed_errors() -> None:
    p = PendingAcks()
    with pytest.raises(errors.InvalidPosition):
        p.add(-1, 0, 1, 0)
    with pytest.raises(errors.InvalidPosition):
        p.add(0, 2**32, 1, 0)
    with pytest.raises(errors.InvalidArgument, match="batch size"):
        p.add(0, 0, 0, 0)
    with pytest.raises(errors.InvalidArgument, match="batch_size"):
        p.add(0, 0, -3, 0)
    with pytest.raises(errors.InvalidArgument, match="hashes"):
        p.add_many([0], [0], [1], [2**32])
    with pytest.raises(errors.InvalidInputType):
        p.add(0, 0.5, 1, 0)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        p.add(0, 0, 1, "h")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        p.add_many([0], ["a"], [1], [1])
    with pytest.raises(errors.LengthMismatch):
        p.add_many([0, 1], [0], [1, 1], [1, 1])
    with pytest.raises(errors.LengthMismatch):
        p.remove_many([0, 1], [0])
    with pytest.raises(errors.InvalidPosition):
        p.remove_all_up_to(0, -2)
    assert len(p) == 0


def test_redelivery_into_full_runs() -> None:
    """Replays land below the read position, inside full runs: order and totals stay exact."""
    p = PendingAcks()
    n = 20_000
    p.add_many(
        np.zeros(n, dtype=np.int64),
        np.arange(0, 2 * n, 2),
        np.ones(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )
    odd = np.random.default_rng(3).permutation(np.arange(1, 2 * n, 2))
    assert p.add_many(np.zeros(n, dtype=np.int64), odd, np.full(n, 2), odd % 65535 + 1).all()
    rows = p.items()
    assert rows[:, 1].tolist() == list(range(2 * n))
    assert p.total_messages == 3 * n
    assert p.memory_usage() / len(p) < 24  # runs split to half-full at worst
    found, _, _ = p.remove_many(np.zeros(n, dtype=np.int64), odd)
    assert found.all() and len(p) == n


def test_memory_per_pending_ack_in_dispatch_order() -> None:
    p = PendingAcks()
    for ledger in range(3):
        p.add_many(
            np.full(50_000, ledger), np.arange(50_000), np.ones(50_000, dtype=np.int64), np.arange(50_000)
        )
    assert p.memory_usage() / len(p) < 12.5


def test_threads_share_one_map() -> None:
    """Eight threads add and ack their own ledgers of one map."""
    p = PendingAcks()

    def work(t: int) -> None:
        entries = np.arange(5000, dtype=np.int64)
        ledgers = np.full(5000, t, dtype=np.int64)
        assert p.add_many(ledgers, entries, np.ones(5000, dtype=np.int64), entries).all()
        for e in range(0, 5000, 2):
            assert p.remove(t, e) == (1, e)
        found, _, hashes = p.remove_many(ledgers[1::2], entries[1::2])
        assert found.all() and hashes.tolist() == entries[1::2].tolist()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))  # re-raises a failed thread's assertion
    assert len(p) == 0 and p.total_messages == 0
