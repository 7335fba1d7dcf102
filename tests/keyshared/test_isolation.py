"""Stuck-consumer isolation (``stuck_after``, beyond Pulsar) against a model of a broker and its log.

Consumers read, ack, nack, ask for permits, join and leave; some hang (no acks, no flows) and
come back. The broker runs the policy (``isolate_stuck``) on a clock and re-reads from its log
the span the dispatcher names, a few entries at a time. After every dispatch: nothing
acknowledged is sent again, each key's first deliveries keep position order, no entry of a stuck
consumer's keys waits in the replay queue, and nothing is sent to a consumer while it hangs beyond
what its permits allow. Re-reads make progress: each spilled entry is read back at most once per
spill, and a part read is not named again. At the end everyone recovers and acks: the topic
drains (nothing spilled was lost).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzz_budget
from cursorkit import Cursor, Position
from cursorkit.errors import CursorkitError
from cursorkit.keyshared.dispatcher import Entry, KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector

KEYS = [f"key-{i}".encode() for i in range(8)]


@dataclass(eq=False)
class C:
    name: str


class Broker:
    """A dispatcher, its log, a clock, and the model the checks need."""

    def __init__(self, part: int = 1 << 30) -> None:
        self.part = part
        """Log entries one re-read reads at most (the rest of the span at the next)."""
        self.reread_entries = 0
        self.cursor = Cursor(Position(1, -1))
        self.d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=self.cursor, stuck_after=5.0)
        self.now = 0.0
        self.log: dict[Position, int] = {}
        self.key_of: dict[Position, bytes] = {}
        self.consumers: list[C] = []
        self.hung: set[C] = set()
        self.held: dict[Position, C] = {}
        self.acked: set[Position] = set()
        self.first_sent: dict[bytes, list[Position]] = {}
        self.joined = 0

    def join(self, permits: int) -> None:
        c = C(f"c{self.joined}")
        self.joined += 1
        self.consumers.append(c)
        self.d.add_consumer(c, permits)

    def leave(self, c: C) -> None:
        self.consumers.remove(c)
        self.hung.discard(c)
        self.d.remove_consumer(c)
        self.held = {p: h for p, h in self.held.items() if h is not c}

    def read(self, keys: list[int]) -> None:
        entries = []
        for k in keys:
            p = Position(1, len(self.log))
            self.log[p] = self.d.slot_of(KEYS[k])
            self.key_of[p] = KEYS[k]
            entries.append(Entry(p, self.log[p]))
        self.d.add_entries(entries)

    def round(self) -> None:
        """The broker's round: the policy, a re-read if one is due, a dispatch."""
        self.d.isolate_stuck(self.now)
        self.reread()
        for c, positions in self.d.dispatch():
            for p in positions:
                assert p not in self.acked, f"{p} sent after its ack"
                assert p not in self.held, f"{p} sent twice"
                self.held[p] = c
                sent = self.first_sent.setdefault(self.key_of[p], [])
                if p not in sent:
                    assert not sent or sent[-1] < p, f"{self.key_of[p]!r}: {p} first sent after {sent[-1]}"
                    sent.append(p)
        stuck = {c.name for c in self.d.consumers if self._stuck(c)}
        for p in self.d.replay_queue:
            owner = self.d.selector.select(self.log[p])
            assert getattr(owner, "name", None) not in stuck, f"{p} of a stuck consumer waits in replay"

    def reread(self) -> None:
        """The broker's re-read: the spans named, ``part`` entries at a time, while there is room."""
        floor: Position | None = None
        while (span := self.d.take_reread()) is not None:
            lo, hi = span
            # Progress: a re-read brings some back, or the part read is not named again.
            assert floor is None or lo > floor, f"{span} named again after reading through {floor}"
            part = [p for p in self.log if lo <= p <= hi][: self.part]
            whole = not part or len(part) < self.part or part[-1] == hi
            back = self.d.add_reread((Entry(p, self.log[p]) for p in part), None if whole else part[-1])
            self.reread_entries += len(part)
            figures = self.d.stats().isolation
            assert figures is not None
            assert figures.read_back <= figures.spilled, f"read back twice: {figures}"
            floor = None if back else hi if whole else part[-1]

    def _stuck(self, c: C) -> bool:
        return any(s.name == c.name and s.stuck for s in self.d.stats().consumers)

    def ack_some(self, c: C, rnd: random.Random) -> None:
        mine = sorted(p for p, h in self.held.items() if h is c)
        for p in mine:
            if rnd.random() < 0.7:
                self.d.ack(c, p)
                del self.held[p]
                self.acked.add(p)

    def drain(self) -> None:
        self.hung.clear()
        for c in self.consumers:
            self.d.add_permits(c, 10_000)
        for _ in range(50):
            self.now += 10.0
            for c in self.consumers:
                self.d.add_permits(c, 1)  # progress: everyone is back
            self.round()
            for p, c in list(self.held.items()):
                self.d.ack(c, p)
                del self.held[p]
                self.acked.add(p)
            if set(self.log) <= self.acked:
                return
        raise AssertionError(f"not drained: {self.cursor.mark_delete_position}, {self.d.stats().isolation}")


def walk(seed: int, steps: int) -> Broker:
    rnd = random.Random(seed)
    b = Broker(part=rnd.choice([1 << 30, 1, 3, 10]))
    for _ in range(3):
        b.join(4)
    for _ in range(steps):
        c = rnd.choice(b.consumers)
        op = rnd.randrange(14)
        if op < 3:
            b.read([rnd.randrange(len(KEYS)) for _ in range(rnd.randrange(1, 10))])
        elif op < 6:
            b.now += rnd.choice([0.5, 1.0, 3.0])
            b.round()
        elif op < 9 and c not in b.hung:
            b.ack_some(c, rnd)
        elif op == 9 and c not in b.hung:
            b.d.add_permits(c, rnd.randrange(1, 6))
        elif op == 10 and c not in b.hung:
            mine = sorted(p for p, h in b.held.items() if h is c)
            if mine:
                b.d.nack(c, mine[:1])
                del b.held[mine[0]]
        elif op == 11:
            # A consumer hangs (someone stays well), or a hung one comes back.
            if c in b.hung:
                b.hung.discard(c)
                b.d.add_permits(c, 2)
            elif len(b.hung) + 1 < len(b.consumers):
                b.hung.add(c)
        elif op == 12 and len(b.consumers) > 2:
            b.leave(c)
        elif op == 13 and len(b.consumers) < 5:
            b.join(rnd.randrange(1, 6))
    b.drain()
    return b


@settings(max_examples=fuzz_budget.runs(80, 1_500), deadline=None)
@pytest.mark.fuzz
@given(seed=st.integers(0, 2**32))
def test_hung_consumers_spill_and_nothing_is_lost(seed: int) -> None:
    b = walk(seed, 300)
    stats = b.d.stats().isolation
    assert stats is not None
    assert stats.span is None, stats
    assert stats.spilled == stats.brought_back, stats  # every spilled entry came back


def test_the_walks_spill_for_real() -> None:
    spilled = sum(w.d.stats().isolation.spilled for w in (walk(s, 300) for s in range(20)))  # type: ignore[union-attr]
    assert spilled > 200


def test_stuck_after_is_checked() -> None:
    for bad in (0, -1.0, True, "5"):
        with pytest.raises(CursorkitError):
            KeySharedDispatcher(
                selector=AutoSplitSelector(),
                cursor=Cursor(Position(1, -1)),
                stuck_after=bad,  # type: ignore[arg-type]
            )
