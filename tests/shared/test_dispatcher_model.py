"""SharedDispatcher against a small reference model, by a Hypothesis state machine.

The model is the rule written plainly: consumers in join order, a turn for the next consumer of
the best priority level that can take messages (permits above 0, not paused, under the unacked
limit), up to min(permits, round-robin batch, room under the limits) messages and at least one
entry, the queue in position order, acked positions dropped when met; nacks and redelivery raise
counts, leavers' messages go back without, acks drop them, the last leaver clears them (unless the
counts are journaled for a durable store: then they stay, and every raise is journaled with its new
count, so replaying the journal gives the dispatcher's counts; seeds keep the higher count). Every
dispatch must equal the model's exactly; at every step the held positions, permits, unacked
figures and counts must too, and no delivery may be of an acknowledged position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cursorkit import Cursor, Position
from cursorkit.shared import SharedDispatcher


@dataclass(eq=False)
class C:
    name: str
    priority: int = 0
    permits: int = 0
    paused: bool = False
    held: set[int] = field(default_factory=set)


class Model:
    def __init__(self, batch: int, per_consumer: int, per_subscription: int) -> None:
        self.batch, self.per_consumer, self.per_subscription = batch, per_consumer, per_subscription
        self.members: list[C] = []
        self.next = 0
        self.queue: set[int] = set()
        self.messages: dict[int, int] = {}
        self.counts: dict[int, int] = {}
        self.acked: set[int] = set()

    def unacked(self, c: C) -> int:
        return sum(self.messages[e] for e in c.held)

    def total(self) -> int:
        return sum(self.unacked(c) for c in self.members)

    def can_take(self, c: C) -> bool:
        return (
            c.permits > 0 and not c.paused and (not self.per_consumer or self.unacked(c) < self.per_consumer)
        )

    def blocked(self) -> bool:
        return bool(self.per_subscription) and self.total() >= self.per_subscription

    def dispatch(self) -> list[tuple[str, list[int], list[int]]]:
        out: dict[str, tuple[list[int], list[int]]] = {}
        order: list[str] = []
        while self.queue and not self.blocked():
            able = [c for c in self.members if self.can_take(c)]
            if not able:
                break
            best = min(c.priority for c in able)
            n = len(self.members)
            i = next(
                k % n
                for k in range(self.next, self.next + n)
                if self.members[k % n].priority == best and self.can_take(self.members[k % n])
            )
            self.next = (i + 1) % n
            c = self.members[i]
            rooms = [c.permits, self.batch]
            if self.per_consumer:
                rooms.append(self.per_consumer - self.unacked(c))
            if self.per_subscription:
                rooms.append(self.per_subscription - self.total())
            quota, given = min(rooms), 0
            if c.name not in out:
                out[c.name] = ([], [])
                order.append(c.name)
            while given < quota and self.queue:
                e = min(self.queue)
                self.queue.discard(e)
                if e in self.acked:
                    self.counts.pop(e, None)
                    continue
                c.held.add(e)
                c.permits -= self.messages[e]
                given += self.messages[e]
                out[c.name][0].append(e)
                out[c.name][1].append(self.counts.get(e, 0))
        return [(name, *out[name]) for name in order if out[name][0]]


class SharedMachine(RuleBasedStateMachine):
    @initialize(
        batch=st.integers(1, 6),
        per_consumer=st.sampled_from([0, 3, 10]),
        per_subscription=st.sampled_from([0, 5, 25]),
        journal=st.booleans(),
    )
    def start(self, batch: int, per_consumer: int, per_subscription: int, journal: bool) -> None:
        self.cursor = Cursor(Position(1, -1))
        self.d = SharedDispatcher(
            cursor=self.cursor,
            round_robin_batch=batch,
            max_unacked_per_consumer=per_consumer,
            max_unacked_per_subscription=per_subscription,
        )
        self.m = Model(batch, per_consumer, per_subscription)
        self.journal = journal
        self.durable: dict[int, int] = {}
        """The journal's raises replayed, as a durable store keeps them."""
        if journal:
            self.d.journal_redelivery_counts()
        self.next_entry = 0
        self.names = 0

    def _acked(self, e: int) -> bool:
        return self.cursor.is_acked(Position(1, e))

    @rule(messages=st.lists(st.integers(1, 3), max_size=8))
    def read(self, messages: list[int]) -> None:
        entries = list(range(self.next_entry, self.next_entry + len(messages)))
        self.next_entry += len(messages)
        self.d.add_read([Position(1, e) for e in entries], messages=messages)
        for e, m in zip(entries, messages, strict=True):
            self.m.messages[e] = m
            self.m.queue.add(e)

    @rule()
    def dispatch(self) -> None:
        got = [(c.name, [p.entry_id for p in ps], counts) for c, ps, counts in self.d.dispatch()]
        assert got == self.m.dispatch()
        for _, entries, _ in got:
            assert not any(e in self.m.acked for e in entries)

    @precondition(lambda self: len(self.m.members) < 5)
    @rule(priority=st.integers(0, 2), permits=st.integers(0, 15))
    def join(self, priority: int, permits: int) -> None:
        self.names += 1
        c = C(f"c{self.names}", priority, permits)
        self.d.add_consumer(c, permits, priority=priority)
        self.m.members.append(c)

    @precondition(lambda self: bool(self.m.members))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.m.members) - 1))
        lost = data.draw(st.booleans())
        c = self.m.members.pop(i)
        if self.m.next > i:
            self.m.next -= 1
        returned = self.d.remove_consumer(c)
        assert [p.entry_id for p in returned] == sorted(c.held)
        for e in c.held:
            if e in self.m.acked:
                self.m.counts.pop(e, None)
            else:
                self.m.queue.add(e)
        if not self.m.members:
            if not self.journal:
                self.m.counts.clear()
            self.m.next = 0
        if lost:  # its connection was lost: each message it held counts one more
            self.d.raise_redelivery_counts(returned)
            for e in c.held:
                self.m.counts[e] = self.m.counts.get(e, 0) + 1

    @precondition(lambda self: self.next_entry > 0)
    @rule(data=st.data())
    def seed(self, data: st.DataObject) -> None:
        pairs = data.draw(st.dictionaries(st.integers(0, self.next_entry - 1), st.integers(0, 4), max_size=4))
        self.d.seed_redelivery_counts(list([1] * len(pairs)), list(pairs), list(pairs.values()))
        for e, n in pairs.items():
            if n > self.m.counts.get(e, 0):
                self.m.counts[e] = n
                self.durable[e] = n  # seeds come from the store: it holds them already

    @precondition(lambda self: bool(self.m.members))
    @rule(data=st.data(), permits=st.integers(0, 15))
    def flow(self, data: st.DataObject, permits: int) -> None:
        c = data.draw(st.sampled_from(self.m.members))
        self.d.add_permits(c, permits)
        c.permits += permits

    @precondition(lambda self: bool(self.m.members))
    @rule(data=st.data(), paused=st.booleans())
    def pause(self, data: st.DataObject, paused: bool) -> None:
        c = data.draw(st.sampled_from(self.m.members))
        self.d.set_paused(c, paused)
        c.paused = paused

    @precondition(lambda self: self.next_entry > 0)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        entries = data.draw(st.lists(st.integers(0, self.next_entry - 1), max_size=6))
        self.d.ack([Position(1, e) for e in entries])
        for e in entries:
            for c in self.m.members:
                c.held.discard(e)
            self.m.queue.discard(e)
            self.m.counts.pop(e, None)
            self.m.acked.add(e)

    @precondition(lambda self: self.next_entry > 0)
    @rule(data=st.data())
    def ack_on_cursor(self, data: st.DataObject) -> None:
        e = data.draw(st.integers(0, self.next_entry - 1))
        self.cursor.ack(Position(1, e))
        self.m.acked.add(e)

    @precondition(lambda self: bool(self.m.members))
    @rule(data=st.data(), everything=st.booleans())
    def nack(self, data: st.DataObject, everything: bool) -> None:
        c = data.draw(st.sampled_from(self.m.members))
        if everything:
            chosen = set(c.held)
            self.d.redeliver_all(c)
        else:
            chosen = set(data.draw(st.lists(st.integers(0, max(self.next_entry - 1, 0)), max_size=5)))
            self.d.nack(c, [Position(1, e) for e in sorted(chosen)])
            chosen &= c.held
        for e in chosen:
            c.held.discard(e)
            if e in self.m.acked:
                self.m.counts.pop(e, None)
            else:
                self.m.counts[e] = self.m.counts.get(e, 0) + 1
                self.m.queue.add(e)

    @invariant()
    def agrees(self) -> None:
        if not hasattr(self, "d"):
            return
        stats = self.d.stats()
        assert [s.name for s in stats.consumers] == [c.name for c in self.m.members]
        for s, c in zip(stats.consumers, self.m.members, strict=True):
            assert s.available_permits == c.permits
            assert s.unacked_messages == self.m.unacked(c)
            assert [p.entry_id for p in self.d.held_by(c)] == sorted(c.held)
        assert stats.unacked_messages == self.m.total()
        for e, n in self.m.counts.items():
            assert self.d.redelivery_count(Position(1, e)) == n
        raised = self.d.take_raised_counts()
        if not self.journal:
            assert not raised
        for ledger, e, n in zip(*raised, strict=True):
            assert ledger == 1
            self.durable[int(e)] = int(n)
        if self.journal:  # every count the dispatcher raised is in the store, at its value
            for e, n in self.m.counts.items():
                if e not in self.m.acked:
                    assert self.durable.get(e) == n, (e, n, self.durable.get(e))


SharedMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestSharedModel = SharedMachine.TestCase
