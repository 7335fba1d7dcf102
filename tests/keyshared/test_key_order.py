"""Key-ordered negative acks (``key_ordered_nacks``, beyond Pulsar) against a model of real clients.

The consumers behave as Pulsar's client does: they handle what they received in arrival order,
ack or nack each message, and send acks and nacks each on a timer of its own (ack grouping sends
a sorted set, a nack waits out its delay), so a nack may reach the broker after acks of later
messages of its key; a message arriving while its id's ack is still pending is dropped by the
client. Consumers also join, leave and redeliver everything.

Every accepted ack is traced back to the moment its consumer handled that message: for each key,
those moments follow position order (the issue's "per-key delivery order of the final acked
deliveries is position order"). No acknowledged message is sent again, and at the end consumers
acking everything drain the topic. Without key order the same clients break the property (checked
on a fixed scenario, so the test can fail).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzz_budget
from cursorkit import Cursor, Position
from cursorkit.errors import CursorkitError
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector


@dataclass(eq=False)
class Client:
    """One consumer as the client library runs it."""

    name: str
    queue: list[Position] = field(default_factory=list)
    """Received, not handled yet, in arrival order."""
    pending_acks: dict[Position, int] = field(default_factory=dict)
    """Acks waiting for the grouping timer: position -> when it was handled."""
    pending_nacks: list[Position] = field(default_factory=list)
    """Nacks waiting out the nack delay."""


class World:
    """A dispatcher, its clients, and what the property needs: when each ack was decided."""

    def __init__(self, key_ordered: bool, mode: str = "draining", keys: int = 3, cap: int = 0) -> None:
        self.cursor = Cursor(Position(1, -1))
        self.d = KeySharedDispatcher(
            selector=AutoSplitSelector(),
            cursor=self.cursor,
            mode=mode,  # type: ignore[arg-type]
            key_ordered_nacks=key_ordered,
            max_unacked_per_key=cap,
        )
        self.clients: list[Client] = []
        self.joined = 0
        self.key_of: dict[Position, int] = {}
        self.slots = _distinct_slots(self.d, keys)
        self.next_entry = 0
        self.clock = 0
        self.nacks_of: dict[Position, int] = {}
        self.sent_ack_at: dict[Position, int] = {}
        """The moment behind the last ack of each position the broker received."""
        self.accepted: dict[int, list[tuple[Position, int]]] = {}
        """Per key: (position, moment its accepted ack was decided), in the order accepted."""
        self.acked: set[Position] = set()
        self.skipped: set[Position] = set()
        """Acked on the cursor by the operator (a skip, TTL), outside any consumer's order."""

    def join(self, permits: int = 4) -> None:
        c = Client(f"c{self.joined}")
        self.joined += 1
        self.clients.append(c)
        self.d.add_consumer(c, permits)

    def leave(self, c: Client) -> None:
        self.clients.remove(c)
        self.d.remove_consumer(c)

    def read(self, keys: list[int]) -> None:
        positions = []
        for k in keys:
            p = Position(1, self.next_entry)
            self.next_entry += 1
            self.key_of[p] = k
            positions.append(p)
        self.d.add_read(positions, [self.slots[self.key_of[p]] for p in positions])

    def dispatch(self) -> None:
        for c, positions in self.d.dispatch():
            for p in positions:
                assert p not in self.acked, f"{p} sent again after its ack was accepted"
                if p not in c.pending_acks:  # the client drops a message whose ack is pending
                    c.queue.append(p)

    def handle(self, c: Client, nack: bool) -> None:
        if not c.queue:
            return
        p = c.queue.pop(0)
        self.clock += 1
        if nack and self.nacks_of.get(p, 0) < 2:
            self.nacks_of[p] = self.nacks_of.get(p, 0) + 1
            c.pending_nacks.append(p)
        else:
            c.pending_acks[p] = self.clock

    def flush_acks(self, c: Client) -> None:
        if not c.pending_acks:
            return
        positions = sorted(c.pending_acks)
        for p in positions:
            self.sent_ack_at[p] = c.pending_acks[p]
        c.pending_acks.clear()
        before = set(self.acked)
        self.d.ack_many(c, positions)
        self._note_accepted(before)

    def flush_nacks(self, c: Client) -> None:
        if c.pending_nacks:
            self.d.nack(c, c.pending_nacks)
            c.pending_nacks.clear()

    def redeliver_all(self, c: Client) -> None:
        """The client's redeliver-unacknowledged: pending acks go first, then it drops what it holds."""
        self.flush_acks(c)
        c.queue.clear()
        c.pending_nacks.clear()
        self.d.redeliver(c)

    def skip(self, i: int) -> None:
        """The operator acks an unacknowledged message on the cursor directly (held or not)."""
        open_ = sorted(set(self.key_of) - self.acked)
        if open_:
            p = open_[i % len(open_)]
            self.skipped.add(p)
            self.cursor.ack(p)
            self.acked.add(p)

    def _note_accepted(self, before: set[Position]) -> None:
        now = {p for p in self.key_of if self.cursor.is_acked(p)}
        for p in sorted(now - before - self.skipped):
            self.accepted.setdefault(self.key_of[p], []).append((p, self.sent_ack_at[p]))
        self.acked = now

    def check_order(self) -> None:
        for k, seq in self.accepted.items():
            moments = [t for _, t in sorted(seq)]
            assert moments == sorted(moments), f"key {k}: accepted acks handled out of order: {sorted(seq)}"

    def drain(self) -> None:
        """Everyone acks everything until the topic is drained."""
        for c in self.clients:
            self.d.add_permits(c, 1000)
        for _ in range(200):
            self.dispatch()
            for c in list(self.clients):
                self.flush_nacks(c)
                while c.queue:
                    self.handle(c, nack=False)
                self.flush_acks(c)
            if self.next_entry == 0 or self.cursor.mark_delete_position == Position(1, self.next_entry - 1):
                return
        raise AssertionError(
            f"not drained: mark-delete {self.cursor.mark_delete_position}, stats {self.d.stats().key_order}"
        )


def _distinct_slots(d: KeySharedDispatcher, n: int) -> list[int]:
    slots: list[int] = []
    i = 0
    while len(slots) < n:
        s = d.slot_of(f"key-{i}".encode())
        i += 1
        if s not in slots:
            slots.append(s)
    return slots


_NAMES = (
    ["dispatch"] * 3
    + ["handle"] * 4
    + ["nack"] * 2
    + ["flush_acks"] * 2
    + ["flush_nacks"] * 2
    + ["permits", "redeliver_all", "join", "leave", "skip"]
)
op = st.one_of(
    st.tuples(st.just("read"), st.lists(st.integers(0, 2), min_size=1, max_size=6)),
    st.tuples(st.sampled_from(_NAMES), st.integers(0, 9)),
)
"""Weighted towards what races: handling, nacking and the two flush timers."""


def run(world: World, ops: list[tuple[str, object]]) -> None:
    """Runs ``ops``, checking the order after each.

    In last-sent mode without membership changes: PIP-282 itself lets a joiner handle a key while
    a leaver's earlier message of it is on its way back, nacks or not.
    """
    stable = world.d.mode == "last-sent"
    for name, arg in ops:
        if stable and name in ("join", "leave"):
            continue
        if name == "read":
            assert isinstance(arg, list)
            world.read(arg)
            continue
        assert isinstance(arg, int)
        if name == "dispatch":
            world.dispatch()
        elif name == "join":
            if len(world.clients) < 3:
                world.join()
        elif not world.clients:
            continue
        else:
            c = world.clients[arg % len(world.clients)]
            if name in ("handle", "nack"):
                world.handle(c, nack=name == "nack")
            elif name == "flush_acks":
                world.flush_acks(c)
            elif name == "flush_nacks":
                world.flush_nacks(c)
            elif name == "permits":
                world.d.add_permits(c, 1 + arg % 4)
            elif name == "redeliver_all":
                world.redeliver_all(c)
            elif name == "leave" and len(world.clients) > 1:
                world.leave(c)
            elif name == "skip":
                world.skip(arg)
        world.check_order()


@settings(max_examples=fuzz_budget.runs(300, 5_000), deadline=None)
@pytest.mark.fuzz
@given(
    mode=st.sampled_from(["draining", "last-sent"]),
    cap=st.sampled_from([0, 0, 1, 2]),
    skips=st.booleans(),
    ops=st.lists(op, max_size=120),
)
def test_accepted_acks_follow_key_order(
    mode: str, cap: int, skips: bool, ops: list[tuple[str, object]]
) -> None:
    """Also with the per-key cap on, and with the operator acking messages on the cursor directly."""
    world = World(key_ordered=True, mode=mode, cap=cap)
    if not skips:
        ops = [o for o in ops if o[0] != "skip"]
    world.join()
    world.join()
    run(world, ops)
    world.drain()
    world.check_order()
    stats = world.d.stats().key_order
    assert stats is not None and stats.parked_acks == 0


@settings(max_examples=fuzz_budget.runs(60, 1_000), deadline=None)
@pytest.mark.fuzz
@given(mode=st.sampled_from(["draining", "last-sent"]), seed=st.integers(0, 2**32))
def test_long_random_walks_keep_key_order(mode: str, seed: int) -> None:
    """Long walks (400 steps, busy keys, frequent nacks): the races the short lists rarely reach."""
    rnd = random.Random(seed)
    world = World(key_ordered=True, mode=mode)
    world.join(permits=8)
    world.join(permits=8)
    ops: list[tuple[str, object]] = []
    for _ in range(400):
        if rnd.random() < 0.12:
            ops.append(("read", [rnd.randrange(3) for _ in range(rnd.randrange(1, 8))]))
        else:
            ops.append((rnd.choice(_NAMES), rnd.randrange(10)))
    run(world, ops)
    world.drain()
    world.check_order()


def _nack_race(world: World) -> None:
    """A key's messages 0..3 on one consumer; it nacks 1 and acks 2 and 3 before the nack is sent."""
    world.join(permits=10)
    world.read([0, 0, 0, 0])
    world.dispatch()
    (c,) = world.clients
    world.handle(c, nack=False)  # 0
    world.handle(c, nack=True)  # 1: the nack waits out its delay
    world.handle(c, nack=False)  # 2
    world.handle(c, nack=False)  # 3
    world.flush_acks(c)  # acks of 0, 2, 3 reach the broker first
    world.flush_nacks(c)


def test_without_key_order_a_nack_reorders_its_key() -> None:
    world = World(key_ordered=False)
    _nack_race(world)
    with pytest.raises(AssertionError, match="out of order"):
        world.drain()
        world.check_order()


def test_with_key_order_parked_acks_are_dropped_and_the_key_comes_back_in_order() -> None:
    world = World(key_ordered=True)
    _nack_race(world)
    stats = world.d.stats().key_order
    assert stats is not None
    assert (stats.parked_acks, stats.parked_dropped, stats.taken_back) == (0, 2, 2)
    assert world.d.replay_queue == [Position(1, 1), Position(1, 2), Position(1, 3)]
    world.dispatch()
    (c,) = world.clients
    assert c.queue == [Position(1, 1), Position(1, 2), Position(1, 3)]
    world.drain()
    world.check_order()


def test_a_consumer_answers_its_stale_copies_before_the_key_comes_back() -> None:
    world = World(key_ordered=True)
    world.join(permits=10)
    world.read([0, 0, 0])
    world.dispatch()
    (c,) = world.clients
    world.handle(c, nack=True)  # 0, nacked at once
    world.flush_nacks(c)
    world.dispatch()
    why = world.d.stats().blocked[world.slots[0]]
    assert (why.reason, why.consumer, why.position) == ("key-order", "c0", Position(1, 0))
    assert world.d.stats().key_order.unanswered_copies == 2  # type: ignore[union-attr]
    world.handle(c, nack=False)  # the stale copy of 1
    world.handle(c, nack=False)  # and of 2
    world.flush_acks(c)
    assert world.acked == set(), "an answer to a taken-back copy reached the cursor"
    world.dispatch()
    assert c.queue == [Position(1, 0), Position(1, 1), Position(1, 2)]
    world.drain()
    world.check_order()
    assert world.d.stats().key_order.stale_answers == 2  # type: ignore[union-attr]


def test_out_of_order_mode_refuses_key_order() -> None:
    with pytest.raises(CursorkitError):
        KeySharedDispatcher(
            selector=AutoSplitSelector(),
            cursor=Cursor(Position(1, -1)),
            mode="out-of-order",
            key_ordered_nacks=True,
        )
