"""KeySharedDispatcher and acks made on the cursor directly (a skip, TTL, a shared cursor).

The property: the dispatcher never sends a position the cursor has acknowledged, whatever path it
comes back by (a leave, a nack, a redeliver, a replay), even when the cursor acked it while a
consumer held it. A stateful test drives the dispatcher beside a small model of what each consumer
holds, what the cursor acknowledged and Pulsar's redelivery counts (raised by nacks and redelivers,
not by a leaver's messages; gone with an ack; cleared when the last consumer leaves).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector
from fuzz_budget import runs

KEYS = [f"key-{i}".encode() for i in range(5)]


@dataclass(eq=False)
class C:
    name: str


@pytest.mark.parametrize("mode", ["draining", "last-sent", "out-of-order"])
@pytest.mark.parametrize("back", ["leave", "nack", "redeliver"])
def test_a_message_acked_on_the_cursor_while_held_is_never_sent_again(mode: str, back: str) -> None:
    """Consumer a holds 1:1, the cursor acks it directly, a dispatch runs, it goes back: nobody gets it.

    Pulsar re-queues it too, and drops it unsent when it reads it back for replay.
    """
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, mode=mode)  # type: ignore[arg-type]
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, 0), b"k"), (Position(1, 1), b"k")])
    assert d.dispatch() == [(a, [Position(1, 0), Position(1, 1)])]
    d.add_consumer(b, 10)
    cursor.ack(Position(1, 1))  # a TTL, a skip, an ack on the shared cursor: a still holds 1:1
    assert d.dispatch() == []
    if back == "leave":
        assert d.remove_consumer(a) == [Position(1, 0), Position(1, 1)]
    elif back == "nack":
        assert d.nack(a, [Position(1, 0), Position(1, 1)]) == 2
    else:
        assert d.redeliver(a) == [Position(1, 0), Position(1, 1)]
    again = [p for _ in range(3) for _, ps in d.dispatch() for p in ps]
    assert again == [Position(1, 0)]  # 1:0 is redelivered; 1:1, acknowledged, never
    assert d.redelivery_count(Position(1, 1)) == 0
    assert d.stats().replay_dropped_acked == 1


class CursorAcksMachine(RuleBasedStateMachine):
    """The dispatcher beside a model, with the cursor acked behind its back."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[tuple[Position, bytes]] = []
        self.unread: list[Position] = []
        """Published and not handed to the dispatcher since the last rewind."""
        self.waiting: set[Position] = set()
        """Read, not pending, not acknowledged: the dispatcher may send it."""
        self.pending: dict[str, set[Position]] = {}
        self.acked: set[Position] = set()
        """The cursor's state over published positions."""
        self.counts: dict[Position, int] = {}
        """Pulsar's redelivery counts of pending and waiting positions."""
        self.consumers: dict[str, C] = {}
        self.names = 0

    @initialize(
        mode=st.sampled_from(["draining", "last-sent", "out-of-order"]),
        consistent=st.booleans(),
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=8),
    )
    def start(self, mode: str, consistent: bool, keys: list[bytes]) -> None:
        """Two consumers and a first read sent out: most runs start with messages held."""
        self.cursor = Cursor(Position(1, -1))
        selector = ConsistentHashingSelector(points_per_consumer=5) if consistent else AutoSplitSelector()
        self.d = KeySharedDispatcher(selector=selector, cursor=self.cursor, mode=mode)  # type: ignore[arg-type]
        self.join(4)
        self.join(4)
        self.publish(keys)
        self.read()
        self.dispatch()

    # --- the broker -----------------------------------------------------------------------------

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=6))
    def publish(self, keys: list[bytes]) -> None:
        for k in keys:
            p = Position(1, len(self.published))
            self.published.append((p, k))
            self.unread.append(p)

    @precondition(lambda self: self.consumers)
    @rule()
    def read(self) -> None:
        """A managed-ledger read: what is unread and not acknowledged."""
        key_of = dict(self.published)
        todo = [p for p in self.unread if p not in self.acked]
        self.unread = []
        if todo:
            self.d.add_entries([(p, key_of[p]) for p in todo])
            self.waiting.update(todo)

    @rule()
    def dispatch(self) -> None:
        for consumer, positions, counts in self.d.dispatch_with_counts():
            name = consumer.name
            for p, n in zip(positions, counts.tolist(), strict=True):
                assert p not in self.acked and not self.cursor.is_acked(p), f"{p} sent to {name}, acked"
                assert p in self.waiting, f"{p} sent to {name} but it was not waiting"
                assert n == self.counts.get(p, 0), f"{p} sent with redelivery count {n}"
                self.waiting.remove(p)
                self.pending[name].add(p)

    # --- consumers --------------------------------------------------------------------------------

    @precondition(lambda self: len(self.consumers) < 4)
    @rule(permits=st.integers(0, 6))
    def join(self, permits: int) -> None:
        self.names += 1
        c = C(f"c{self.names}")
        self.d.add_consumer(c, permits)
        self.consumers[c.name] = c
        self.pending[c.name] = set()

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), then_dispatch=st.booleans())
    def leave(self, data: st.DataObject, then_dispatch: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        returned = self.d.remove_consumer(self.consumers.pop(name))
        held = self.pending.pop(name)
        assert returned == sorted(held)
        self.give_back(held, counted=False)
        if not self.consumers:  # Pulsar: replay released, redelivery tracker cleared, read again
            assert self.d.take_rewind() == self.cursor.mark_delete_position
            self.counts.clear()
            self.waiting.clear()
            self.unread = [p for p, _ in self.published if p not in self.acked]
        if then_dispatch:
            self.dispatch()

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), then_dispatch=st.booleans())
    def nack(self, data: st.DataObject, then_dispatch: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        held = sorted(self.pending[name])
        some = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        assert self.d.nack(self.consumers[name], some) == len(some)
        self.pending[name].difference_update(some)
        self.give_back(set(some), counted=True)
        if then_dispatch:
            self.dispatch()

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), then_dispatch=st.booleans())
    def redeliver(self, data: st.DataObject, then_dispatch: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        held = self.pending[name]
        assert self.d.redeliver(self.consumers[name]) == sorted(held)
        self.pending[name] = set()
        self.give_back(held, counted=True)
        if then_dispatch:
            self.dispatch()

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def consumer_acks(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        held = sorted(self.pending[name])
        some = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        assert self.d.ack_many(self.consumers[name], some).acked == len(some)
        self.pending[name].difference_update(some)
        for p in some:
            self.acked.add(p)
            self.counts.pop(p, None)

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), n=st.integers(1, 8))
    def permits(self, data: st.DataObject, n: int) -> None:
        self.d.add_permits(self.consumers[data.draw(st.sampled_from(sorted(self.consumers)))], n)

    # --- the cursor, behind the dispatcher's back ---------------------------------------------------

    @precondition(lambda self: any(self.pending.values()))
    @rule(data=st.data(), then_dispatch=st.booleans())
    def cursor_acks_a_held_message(self, data: st.DataObject, then_dispatch: bool) -> None:
        """The consumer keeps it pending until it acks, leaves or nacks it."""
        held = sorted(p for ps in self.pending.values() for p in ps if p not in self.acked)
        if held:
            p = data.draw(st.sampled_from(held))
            self.cursor.ack(p)
            self.acked.add(p)
        if then_dispatch:
            self.dispatch()

    @precondition(lambda self: self.published)
    @rule(data=st.data())
    def cursor_acks_any_message(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from([p for p, _ in self.published]))
        self.cursor.ack(p)
        self.acked_directly([p])

    @precondition(lambda self: self.published)
    @rule(data=st.data())
    def cursor_expires_up_to(self, data: st.DataObject) -> None:
        """TTL: a cumulative ack up to a published position."""
        p = data.draw(st.sampled_from([p for p, _ in self.published]))
        self.cursor.ack_cumulative(p)
        self.acked_directly([q for q, _ in self.published if q <= p])

    @precondition(lambda self: self.published)
    @rule(n=st.integers(1, 4))
    def cursor_skips(self, n: int) -> None:
        skipped = [p for p, _ in self.published if p not in self.acked][:n]
        assert self.cursor.skip(n, {1: len(self.published)}) == len(skipped)
        if skipped:
            self.acked_directly([q for q, _ in self.published if q <= skipped[-1]])

    # --- the model ---------------------------------------------------------------------------------

    def acked_directly(self, positions: list[Position]) -> None:
        for p in positions:
            if p in self.acked:
                continue
            self.acked.add(p)
            if not any(p in ps for ps in self.pending.values()):
                self.waiting.discard(p)
                self.counts.pop(p, None)

    def give_back(self, positions: set[Position], *, counted: bool) -> None:
        """Back from a consumer: dropped if acknowledged, else waiting (a nack/redeliver counts)."""
        for p in positions:
            if p in self.acked:
                event("a message acked on the cursor while held came back")
                self.counts.pop(p, None)
                continue
            self.waiting.add(p)
            if counted:
                self.counts[p] = self.counts.get(p, 0) + 1

    @invariant()
    def agrees(self) -> None:
        if not hasattr(self, "d"):
            return
        for name, c in self.consumers.items():
            assert self.d.unacked(c) == sorted(self.pending[name])
        for p in self.waiting | {p for ps in self.pending.values() for p in ps}:
            assert self.d.redelivery_count(p) == self.counts.get(p, 0), p
        for p in self.d.replay_queue:
            assert p in self.waiting or p in self.acked, f"{p} in replay, neither waiting nor acked"
        # No count outlives its position: tracked counts belong to pending or queued positions.
        queued = set(self.d.replay_queue)
        live = queued | {p for ps in self.pending.values() for p in ps}
        assert self.d._core.redeliveries_tracked() == sum(1 for p in live if self.d.redelivery_count(p))

    def teardown(self) -> None:
        """Consumers with permits ack everything: every published position is acked, none resent."""
        if not hasattr(self, "d"):
            return
        if not self.consumers:
            self.join(0)
        for _ in range(50):
            self.read()
            for c in self.consumers.values():
                self.d.add_permits(c, 100)
            self.dispatch()
            for name, c in self.consumers.items():
                held = sorted(self.pending[name])
                self.d.ack_many(c, held)
                self.pending[name] = set()
                self.acked.update(held)
            if len(self.acked) == len(self.published):
                break
        self.dispatch()  # everything is acknowledged: nothing is sent, nothing waits
        assert len(self.acked) == len(self.published) and not self.waiting
        assert self.d.replay_queue == [] and self.d._core.redeliveries_tracked() == 0


CursorAcksMachine.TestCase.settings = settings(
    max_examples=runs(150, 3000), stateful_step_count=50, deadline=None
)
TestCursorAcksMachine = pytest.mark.fuzz(CursorAcksMachine.TestCase)
