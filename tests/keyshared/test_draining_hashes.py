"""DrainingHashes (PIP-379) against a pure-Python model: refs, the gate, stats, bad input, ownership.

The last test drives ``DrainingHashes`` beside a small model of each consumer's pending acks the way a
Key_Shared dispatcher does, through random hash moves, dispatches, acks and leaves, and checks
PIP-379's contract: a hash never has unacked messages on two consumers at once.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cursorkit import errors
from cursorkit._core import DrainingHashes

MAX_HASH = 65535
U32 = 2**32 - 1

CONSUMERS = st.integers(0, 3) | st.just(U32)
HASHES = st.integers(1, 12) | st.sampled_from([255, 256, 257, 511, 512, MAX_HASH]) | st.integers(1, MAX_HASH)
BAD_HASHES = st.sampled_from([0, -1, MAX_HASH + 1, 2**32, 2**63 - 1])
BAD_CONSUMERS = st.sampled_from([-1, 2**32, 2**63 - 1])
WRONG_TYPES = st.sampled_from([1.0, "3", None, b"1", [1]])


def valid_hash(h: int) -> bool:
    return 1 <= h <= MAX_HASH


@dataclass
class Entry:
    """One draining hash of the model."""

    owner: int
    refs: int = 0
    blocked: int = 0


@dataclass
class ModelDraining:
    """The rules of research §2 "PIP-379 draining rule", written out plainly."""

    entries: dict[int, Entry] = field(default_factory=dict)
    cleared: dict[int, int] = field(default_factory=dict)
    """Consumers with a record (they owned a draining hash since their last removal) -> cleared total."""
    counters: Counter[str] = field(default_factory=Counter)

    def can_add(self, consumer: int, hashes: list[int]) -> bool:
        return all(valid_hash(h) and self.entries.get(h, Entry(consumer)).owner == consumer for h in hashes)

    def add(self, consumer: int, h: int) -> None:
        self.entries.setdefault(h, Entry(consumer)).refs += 1
        self.cleared.setdefault(consumer, 0)

    def _clear(self, consumer: int, h: int) -> None:
        del self.entries[h]
        self.cleared[consumer] += 1
        self.counters["cleared"] += 1

    def reduce(self, consumer: int, h: int, closing: bool) -> bool:
        e = self.entries.get(h)
        if e is None:
            return False
        if e.owner != consumer:
            self.counters["stale_reductions"] += 1
            return False
        e.refs -= 1
        if e.refs:
            return False
        self._clear(consumer, h)
        unblocked = e.blocked > 0 and not closing
        self.counters["unblocked"] += unblocked
        return unblocked

    def block(self, target: int, h: int) -> bool:
        e = self.entries.get(h)
        if e is None:
            return False
        if e.owner == target:
            self._clear(target, h)
            return False
        e.blocked += 1
        self.counters["blocked_attempts"] += 1
        return True

    def remove_consumer(self, consumer: int, closing: bool) -> tuple[list[int], list[bool]]:
        if self.cleared.pop(consumer, None) is None:
            return [], []
        mine = sorted(h for h, e in self.entries.items() if e.owner == consumer)
        unblocked = [self.entries.pop(h).blocked > 0 and not closing for h in mine]
        self.counters["unblocked"] += sum(unblocked)
        return mine, unblocked

    def rows(self, consumer: int | None = None) -> list[list[int]]:
        return [
            [h, e.owner, e.refs, e.blocked]
            for h, e in sorted(self.entries.items())
            if consumer is None or e.owner == consumer
        ]

    def stats(self, consumer: int) -> dict[str, int]:
        mine = [e for e in self.entries.values() if e.owner == consumer]
        return {
            "draining_hashes_count": len(mine),
            "draining_hashes_cleared_total": self.cleared.get(consumer, 0),
            "draining_hashes_unacked_messages": sum(e.refs for e in mine),
        }


def column(values: list[int], kind: str) -> Any:
    """The same values as a list, a tuple or a numpy array of some integer dtype."""
    if kind == "list":
        return list(values)
    if kind == "tuple":
        return tuple(values)
    return np.array(values, dtype=kind)


KINDS = st.sampled_from(["list", "tuple", "int64", "uint32", "int32"])


def snapshot(d: DrainingHashes) -> tuple[Any, ...]:
    """Everything observable, to check that a refused call changed nothing."""
    return (len(d), d.draining_hashes().tolist(), d.stats(), d.counters())


class DrainingMachine(RuleBasedStateMachine):
    """Drives a DrainingHashes and the model with the same calls and compares every result."""

    def __init__(self) -> None:
        super().__init__()
        self.d = DrainingHashes()
        self.model = ModelDraining()

    def draining(self, pick: int) -> int:
        """A hash that is draining now (or 1), so rules hit existing entries often."""
        hashes = sorted(self.model.entries)
        return hashes[pick % len(hashes)] if hashes else 1

    @rule(consumer=CONSUMERS, h=HASHES | BAD_HASHES, pick=st.integers(0, 100), existing=st.booleans())
    def add_entry(self, consumer: int, h: int, pick: int, existing: bool) -> None:
        h = self.draining(pick) if existing else h
        if self.model.can_add(consumer, [h]):
            self.d.add_entry(consumer, h)
            self.model.add(consumer, h)
        else:
            before = snapshot(self.d)
            with pytest.raises(errors.InvalidArgument):
                self.d.add_entry(consumer, h)
            assert snapshot(self.d) == before

    @rule(consumer=CONSUMERS, hashes=st.lists(HASHES, max_size=20), bad=st.none() | BAD_HASHES, kind=KINDS)
    def add_entries(self, consumer: int, hashes: list[int], bad: int | None, kind: str) -> None:
        if bad is not None:
            hashes = [*hashes, bad]
            kind = "list"  # a numpy dtype could not hold some of the bad values
        if self.model.can_add(consumer, hashes):
            self.d.add_entries(consumer, column(hashes, kind))
            for h in hashes:
                self.model.add(consumer, h)
        else:
            before = snapshot(self.d)
            with pytest.raises(errors.InvalidArgument):
                self.d.add_entries(consumer, column(hashes, kind))
            assert snapshot(self.d) == before

    @rule(
        consumer=CONSUMERS, pick=st.integers(0, 100), h=HASHES, existing=st.booleans(), closing=st.booleans()
    )
    def reduce_ref(self, consumer: int, pick: int, h: int, existing: bool, closing: bool) -> None:
        h = self.draining(pick) if existing else h
        assert self.d.reduce_ref(consumer, h, closing) == self.model.reduce(consumer, h, closing)

    @rule(
        consumer=CONSUMERS,
        picks=st.lists(st.integers(0, 100), max_size=20),
        closing=st.booleans(),
        kind=KINDS,
    )
    def reduce_refs(self, consumer: int, picks: list[int], closing: bool, kind: str) -> None:
        hashes = [self.draining(p) for p in picks]
        got = self.d.reduce_refs(consumer, column(hashes, kind), closing=closing)
        assert got.dtype == np.int64
        assert got.tolist() == [h for h in hashes if self.model.reduce(consumer, h, closing)]

    @rule(to=CONSUMERS, pick=st.integers(0, 100), h=HASHES, existing=st.booleans())
    def should_block(self, to: int, pick: int, h: int, existing: bool) -> None:
        """The gate (named `to`: `target` is reserved by hypothesis' `rule`)."""
        h = self.draining(pick) if existing else h
        assert self.d.should_block(to, h) == self.model.block(to, h)

    @rule(rows=st.lists(st.tuples(CONSUMERS, st.integers(0, 100)), max_size=30), kind=KINDS)
    def should_block_many(self, rows: list[tuple[int, int]], kind: str) -> None:
        targets = [t for t, _ in rows]
        hashes = [self.draining(p) for _, p in rows]
        got = self.d.should_block_many(
            column(targets, "list" if kind == "int32" else kind), column(hashes, kind)
        )
        assert got.dtype == np.bool_
        assert got.tolist() == [self.model.block(t, h) for t, h in zip(targets, hashes, strict=True)]

    @rule(consumer=CONSUMERS, closing=st.booleans())
    def remove_consumer(self, consumer: int, closing: bool) -> None:
        hashes, unblocked = self.d.remove_consumer(consumer, closing=closing)
        assert hashes.dtype == np.int64 and unblocked.dtype == np.bool_
        assert (hashes.tolist(), unblocked.tolist()) == self.model.remove_consumer(consumer, closing)

    @precondition(lambda self: len(self.model.entries) > 0)
    @rule(pick=st.integers(0, 100))
    def look_up(self, pick: int) -> None:
        h = self.draining(pick)
        e = self.model.entries[h]
        assert self.d.owner(h) == e.owner
        assert self.d.entry(h) == (e.owner, e.refs, e.blocked)
        assert self.d.owner(h % MAX_HASH + 1) == (
            self.model.entries[h % MAX_HASH + 1].owner if h % MAX_HASH + 1 in self.model.entries else None
        )

    @rule()
    def clear(self) -> None:
        self.d.clear()
        self.model.entries.clear()
        self.model.cleared.clear()
        assert self.d.memory_usage() == 0

    @rule(
        consumer=CONSUMERS | BAD_CONSUMERS | WRONG_TYPES,
        h=HASHES | BAD_HASHES | WRONG_TYPES,
        closing=st.booleans() | st.sampled_from([1, "yes"]),
    )
    def bad_input_changes_nothing(self, consumer: Any, h: Any, closing: Any) -> None:
        """Each call with one bad argument raises a typed error and leaves everything unchanged."""
        consumer_ok = isinstance(consumer, int) and 0 <= consumer <= U32
        hash_ok = isinstance(h, int) and valid_hash(h)
        if consumer_ok and hash_ok and isinstance(closing, bool):
            return
        before = snapshot(self.d)
        typed = (errors.InvalidArgument, errors.InvalidInputType)
        if not (consumer_ok and hash_ok):
            for call in (self.d.add_entry, self.d.should_block):
                with pytest.raises(typed):
                    call(consumer, h)
            with pytest.raises(typed):
                self.d.add_entries(consumer, [1, h] if hash_ok or not isinstance(h, int) else [h])
        with pytest.raises(typed):
            self.d.reduce_ref(consumer, h, closing)
        with pytest.raises(typed):
            self.d.reduce_refs(consumer, [1, h], closing)
        if not hash_ok:
            with pytest.raises(typed):
                self.d.should_block_many([0, 1], [1, h])
            with pytest.raises(typed):
                self.d.owner(h)
        assert snapshot(self.d) == before

    @invariant()
    def same_state(self) -> None:
        assert len(self.d) == len(self.model.entries)
        rows = self.d.draining_hashes()
        assert rows.dtype == np.int64
        assert rows.reshape(-1, 4).tolist() == self.model.rows()
        assert dict(self.d.counters()) == {
            k: self.model.counters[k]
            for k in ("blocked_attempts", "unblocked", "cleared", "stale_reductions")
        }

    @invariant()
    def stats_match(self) -> None:
        assert sorted(self.d.stats()) == sorted(self.model.cleared)
        for c in [*self.model.cleared, 0, 1, 2, 3]:
            assert self.d.consumer_stats(c) == self.model.stats(c)
            assert self.d.draining_hashes(c).reshape(-1, 4).tolist() == self.model.rows(c)

    @invariant()
    def one_owner_each(self) -> None:
        """Every draining hash is listed once, under exactly one consumer."""
        per_consumer = [self.d.draining_hashes(c)[:, 0].tolist() for c in self.d.stats()]
        listed = [h for hs in per_consumer for h in hs]
        assert sorted(listed) == self.d.draining_hashes()[:, 0].tolist()

    @invariant()
    def memory_is_small(self) -> None:
        used = self.d.memory_usage()
        assert used >= 8 * len(self.model.entries)
        # 8 B a value plus an eighth; a page is 64 B and carries up to 4 spare values; a 512 B index.
        assert used <= 16 * len(self.model.entries) + 256 * (64 + 32) + 64 * len(self.model.cleared) + 1536


DrainingMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestDrainingMachine = DrainingMachine.TestCase


# ------------------------------------------------------------------------------- worked examples


def test_pulsar_draining_rule() -> None:
    """Research §2: refs from pending acks, the gate, the unblock signal at the last ack."""
    d = DrainingHashes()
    d.add_entries(1, [42, 42, 7])
    assert d.owner(42) == 1 and d.entry(42) == (1, 2, 0)
    with pytest.raises(errors.InvalidArgument, match="draining on consumer 1"):
        d.add_entry(2, 42)  # Pulsar's IllegalStateException
    assert d.should_block(2, 42) and d.should_block(3, 42)
    assert not d.should_block(2, 43)
    assert not d.reduce_ref(1, 42)
    assert d.reduce_ref(1, 42)  # the last reference; it had blocked: unblocked(42)
    assert not d.reduce_ref(1, 7)  # never blocked: no signal
    assert len(d) == 0
    assert d.consumer_stats(1) == {
        "draining_hashes_count": 0,
        "draining_hashes_cleared_total": 2,
        "draining_hashes_unacked_messages": 0,
    }
    assert d.counters() == {"blocked_attempts": 2, "unblocked": 1, "cleared": 2, "stale_reductions": 0}


def test_closing_suppresses_the_signal() -> None:
    d = DrainingHashes()
    d.add_entry(1, 9)
    assert d.should_block(2, 9)
    assert not d.reduce_ref(1, 9, closing=True)
    d.add_entries(1, [10, 11])
    d.should_block(2, 11)
    assert d.remove_consumer(1)[1].tolist() == [False, False]  # closing is the default
    d.add_entries(1, [10, 11])
    d.should_block(2, 11)
    hashes, unblocked = d.remove_consumer(1, closing=False)
    assert (hashes.tolist(), unblocked.tolist()) == ([10, 11], [False, True])


def test_stale_ack_does_not_remove_the_replacement() -> None:
    """Research §4 "Tracker races": 1 reclaims hash 5, 5 moves on to drain on 2; 1's late ack."""
    d = DrainingHashes()
    d.add_entry(1, 5)
    assert not d.should_block(1, 5)  # the hash came back to its owner: entry dropped
    d.add_entry(2, 5)
    assert not d.reduce_ref(1, 5)
    assert d.entry(5) == (2, 1, 0)
    assert d.counters()["stale_reductions"] == 1


def test_stats_listing_follows_pulsar_names() -> None:
    d = DrainingHashes()
    d.add_entries(3, [300, 300, 300, 2])
    d.add_entries(4, [65535])
    for _ in range(5):
        d.should_block(4, 300)
    assert d.draining_hashes(3).tolist() == [[2, 3, 1, 0], [300, 3, 3, 5]]
    assert d.draining_hashes().tolist() == [[2, 3, 1, 0], [300, 3, 3, 5], [65535, 4, 1, 0]]
    assert d.draining_hashes(9).shape == (0, 4)
    assert d.stats()[3] == {
        "draining_hashes_count": 2,
        "draining_hashes_cleared_total": 0,
        "draining_hashes_unacked_messages": 4,
    }
    assert "hashes=3" in repr(d)


def test_typed_errors() -> None:
    d = DrainingHashes()
    with pytest.raises(errors.InvalidArgument, match="outside 1..=65535"):
        d.add_entry(1, 0)
    with pytest.raises(errors.InvalidArgument, match="outside 1..=65535"):
        d.should_block_many(np.array([1], dtype=np.uint32), np.array([65536], dtype=np.int64))
    with pytest.raises(errors.InvalidArgument, match="consumer"):
        d.add_entry(-1, 1)
    with pytest.raises(errors.InvalidArgument, match="targets"):
        d.should_block_many([2**32], [1])
    with pytest.raises(errors.InvalidInputType):
        d.add_entry(1.0, 1)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        d.should_block(1, True)
    with pytest.raises(errors.InvalidInputType):
        d.reduce_ref(1, 1, closing=1)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        d.add_entries(1, np.array([1.5]))
    with pytest.raises(errors.InvalidInputType):
        d.add_entries(1, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(errors.LengthMismatch):
        d.should_block_many([1, 2], [1])
    assert len(d) == 0
    assert isinstance(errors.InvalidArgument("x"), ValueError)


def test_memory_per_draining_hash() -> None:
    """≤ 16 B a draining hash (Pulsar ≈ 80 B): 10,000 random hashes and all 65,535."""
    rng = np.random.default_rng(1)
    d = DrainingHashes()
    hashes = rng.choice(np.arange(1, MAX_HASH + 1), 10_000, replace=False)
    for c, chunk in enumerate(np.array_split(hashes, 100)):
        d.add_entries(c, chunk)
    assert len(d) == 10_000
    assert d.memory_usage() / 10_000 <= 16
    d.clear()
    for c, chunk in enumerate(np.array_split(np.arange(1, MAX_HASH + 1), 100)):
        d.add_entries(c, chunk)
    assert d.memory_usage() / MAX_HASH <= 16


def test_bulk_gate_matches_single_calls() -> None:
    rng = np.random.default_rng(7)
    a, b = DrainingHashes(), DrainingHashes()
    owners = rng.integers(0, 5, 2000)
    hashes = rng.integers(1, 3000, 2000)
    for c in range(5):
        mine = hashes[owners == c]
        mine = mine[[a.owner(int(h)) in (None, c) for h in mine]]
        a.add_entries(c, mine)
        b.add_entries(c, mine)
    targets, probe = rng.integers(0, 5, 50_000), rng.integers(1, 3000, 50_000)
    got = a.should_block_many(targets, probe)
    want = [b.should_block(int(t), int(h)) for t, h in zip(targets, probe, strict=True)]
    assert got.tolist() == want
    assert a.draining_hashes().tolist() == b.draining_hashes().tolist()
    assert a.counters() == b.counters()


def test_threads_share_one_tracker() -> None:
    """Eight threads gate and ack disjoint hashes of one tracker through the mutex."""
    d = DrainingHashes()
    per = 2000

    def work(t: int) -> None:
        mine = np.arange(1 + t * per, 1 + (t + 1) * per, dtype=np.int64)
        d.add_entries(t, np.repeat(mine, 2))
        assert d.should_block_many(np.full(per, 99, dtype=np.int64), mine).all()
        assert d.reduce_refs(t, mine).size == 0
        assert d.reduce_refs(t, mine).tolist() == mine.tolist()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))  # re-raises a failed thread's assertion
    assert len(d) == 0
    assert d.counters()["blocked_attempts"] == 8 * per
    assert d.counters()["unblocked"] == 8 * per


# ------------------------------------------------------------------- PIP-379 with pending acks


class PendingAcks:
    """One consumer's sent, unacked entries: (ledger, entry) -> (batch_size, hash), position order."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int], tuple[int, int]] = {}
        self.closed = False

    def add(self, ledger: int, entry: int, batch_size: int, hash_: int) -> bool:
        """Records a sent entry; False when it is already pending (a closed map takes nothing)."""
        assert not self.closed, "add after drain_and_close"
        if (ledger, entry) in self.entries:
            return False
        self.entries[ledger, entry] = (batch_size, hash_)
        return True

    def positions(self) -> list[tuple[int, int]]:
        """The pending positions, ascending."""
        return sorted(self.entries)

    def hashes(self) -> list[int]:
        """The hash of every pending entry."""
        return [h for _, h in self.entries.values()]

    def remove(self, ledger: int, entry: int) -> tuple[int, int] | None:
        """An individual ack: the entry's `(batch_size, hash)`, or None if it was not pending."""
        return self.entries.pop((ledger, entry), None)

    def remove_all_up_to(self, ledger: int, entry: int) -> list[int]:
        """A cumulative ack: removes every entry at or before the position; their hashes."""
        return [self.entries.pop(p)[1] for p in self.positions() if p <= (ledger, entry)]

    def drain_and_close(self) -> list[int]:
        """A leaving consumer: removes every entry, returns their hashes and refuses later adds."""
        self.closed = True
        return [self.entries.pop(p)[1] for p in self.positions()]


@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**16)), min_size=1, max_size=120),
)
@settings(max_examples=60, deadline=None)
def test_a_hash_is_unacked_on_one_consumer_at_a_time(seed: int, steps: list[tuple[int, int]]) -> None:
    """A small dispatcher over 8 hashes and 3 consumers: moves, sends, acks, cumulative acks, leaves."""
    rng = np.random.default_rng(seed)
    hashes = list(range(1, 9))
    consumers = [0, 1, 2]
    selector = {h: consumers[h % 3] for h in hashes}
    pending = {c: PendingAcks() for c in consumers}
    d = DrainingHashes()
    next_entry = 0

    def pending_of(c: int, h: int) -> int:
        return pending[c].hashes().count(h)

    def move(h: int, to: int) -> None:
        old = selector[h]
        selector[h] = to
        if old == to or d.owner(h) == old:
            return  # already draining on `old`: its references already count its pending acks
        d.add_entries(old, [h] * pending_of(old, h))

    for op, arg in steps:
        if op == 0:  # a hash range moves (a join or a rebalance)
            move(hashes[arg % 8], consumers[(arg // 8) % 3])
        elif op in (1, 2):  # a message of some hash is read and dispatched if the gate allows
            h = hashes[arg % 8]
            target = selector[h]
            if not d.should_block(target, h):
                assert pending[target].add(1, next_entry, 1 + arg % 3, h)
            next_entry += 1
        elif op == 3:  # an individual ack of one of a consumer's pending messages
            c = consumers[arg % 3]
            positions = pending[c].positions()
            if positions:
                ledger, entry = positions[rng.integers(len(positions))]
                removed = pending[c].remove(ledger, entry)
                assert removed is not None
                d.reduce_ref(c, removed[1])
        elif op == 4:  # a cumulative ack
            c = consumers[arg % 3]
            acked = pending[c].remove_all_up_to(1, arg % max(next_entry, 1))
            d.reduce_refs(c, acked)
        else:  # a consumer leaves and comes back: its pending messages go to replay
            c = consumers[arg % 3]
            replay = pending[c].drain_and_close()
            d.reduce_refs(c, replay, closing=True)
            d.remove_consumer(c)
            pending[c] = PendingAcks()
        # PIP-379's contract, and exact reference counts.
        for h in hashes:
            holders = [c for c in consumers if pending_of(c, h)]
            assert len(holders) <= 1, f"hash {h} unacked on {holders}"
            owner = d.owner(h)
            if owner is not None:
                assert d.entry(h)[1] == pending_of(owner, h)  # type: ignore[index]
                assert holders in ([], [owner])
