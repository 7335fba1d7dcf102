"""Tiny, obviously-correct pure-Python models of ``DelayQueue`` and of the in-memory tracker rules.

``ModelDelayQueue`` is a dict of queued positions sorted on demand. ``ModelTracker`` restates
Pulsar's ``InMemoryDelayedDeliveryTracker`` rules (research/delayed-delivery.md §1) over it, with
int64 saturation spelled out, since Python ints do not overflow.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_I64 = 2**63 - 1
MIN_I64 = -(2**63)
MAX_ENTRY = 2**32 - 1

Index = tuple[int, int, int]  # (deliver_at, ledger, entry)


def valid_position(ledger: int, entry: int) -> bool:
    """Ledger 0..2^63-1 and entry 0..2^32-1 (entry -1 is not an index)."""
    return 0 <= ledger <= MAX_I64 and 0 <= entry <= MAX_ENTRY


def valid_index(at: int, ledger: int, entry: int) -> bool:
    """A queueable index: deliver_at 0..2^63-1 and a valid position."""
    return 0 <= at <= MAX_I64 and valid_position(ledger, entry)


class ModelDelayQueue:
    """Positions → deliver_at; the first add of a position wins."""

    def __init__(self) -> None:
        self.at_of: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.at_of)

    def ordered(self) -> list[Index]:
        """Every index in pop order."""
        return sorted((at, ledger, entry) for (ledger, entry), at in self.at_of.items())

    def add(self, at: int, ledger: int, entry: int) -> bool:
        """Queues one index; False when the position is already queued."""
        if (ledger, entry) in self.at_of:
            return False
        self.at_of[(ledger, entry)] = at
        return True

    def add_many(self, ats: Sequence[int], ledgers: Sequence[int], entries: Sequence[int]) -> int:
        """Adds in order; returns how many were new."""
        return sum(self.add(a, b, c) for a, b, c in zip(ats, ledgers, entries, strict=True))

    def contains(self, ledger: int, entry: int) -> bool:
        """Whether the position is queued."""
        return (ledger, entry) in self.at_of

    def peek(self) -> Index | None:
        """The smallest index."""
        return min(self.ordered(), default=None)

    def pop_until(self, limit: Index, max_items: int) -> list[Index]:
        """Pops, in order, up to ``max_items`` indexes ``<= limit``."""
        out = [k for k in self.ordered() if k <= limit][:max_items]
        for _, ledger, entry in out:
            del self.at_of[(ledger, entry)]
        return out

    def pop_due(self, cutoff: int, max_items: int) -> list[Index]:
        """Pops, in order, up to ``max_items`` indexes with deliver_at <= cutoff."""
        return self.pop_until((cutoff, MAX_I64, MAX_I64), max_items)

    def drain(self) -> list[Index]:
        """Pops everything."""
        out = self.ordered()
        self.at_of.clear()
        return out

    def remove_ledgers_below(self, ledger: int) -> int:
        """Drops the indexes of ledgers below ``ledger``; returns how many."""
        doomed = [p for p in self.at_of if p[0] < ledger]
        for p in doomed:
            del self.at_of[p]
        return len(doomed)

    def clear(self) -> None:
        """Drops everything."""
        self.at_of.clear()


def precision_bits(tick_ms: int) -> int:
    """floor(log2(tick)) for tick >= 1, else 0."""
    return tick_ms.bit_length() - 1 if tick_ms >= 1 else 0


class ModelTracker:
    """Pulsar's in-memory tracker rules with an explicit ``now``."""

    def __init__(self, tick_ms: int, strict: bool, lookahead: int) -> None:
        self.tick = tick_ms
        self.strict = strict
        self.lookahead = lookahead
        self.precision = 1 << precision_bits(tick_ms)
        self.queue = ModelDelayQueue()
        self.highest = 0
        self.fixed_delay = True
        self.counters = {
            "added": 0,
            "duplicates": 0,
            "rejected_due": 0,
            "rejected_negative": 0,
            "delivered": 0,
        }

    def cutoff(self, now: int) -> int:
        """Adds at or before this are refused."""
        return now if self.strict else min(now + self.tick, MAX_I64)

    def threshold(self, now: int) -> int:
        """Stored times at or before this are due."""
        if self.strict:
            return now
        return max(self.cutoff(now) - self.precision, MIN_I64) + 1

    def stored(self, at: int) -> int:
        """Rounded down, or up (saturating) when strict."""
        mask = self.precision - 1
        if not self.strict:
            return at & ~mask
        return MAX_I64 if at + mask > MAX_I64 else (at + mask) & ~mask

    def add(self, ledger: int, entry: int, at: int, now: int) -> bool:
        """True: the tracker holds it; False: deliver now."""
        if at < 0 or at <= self.cutoff(now):
            self.counters["rejected_negative" if at < 0 else "rejected_due"] += 1
            self.fixed_delay = False
            return False
        if self.queue.add(self.stored(at), ledger, entry):
            self.counters["added"] += 1
        else:
            self.counters["duplicates"] += 1
        if at < self.highest - self.tick:
            self.fixed_delay = False
        self.highest = max(self.highest, at)
        return True

    def has_message_available(self, now: int) -> bool:
        """The head's stored time is due."""
        head = self.queue.peek()
        return head is not None and head[0] <= self.threshold(now)

    def get_scheduled(self, max_messages: int, now: int) -> list[tuple[int, int]]:
        """Due messages in time order, returned sorted by position."""
        popped = self.queue.pop_due(self.threshold(now), max_messages)
        self.counters["delivered"] += len(popped)
        if not len(self.queue):
            self.highest = 0
            self.fixed_delay = True
        return sorted((ledger, entry) for _, ledger, entry in popped)

    def next_delivery_time(self) -> int | None:
        """The head's stored time."""
        head = self.queue.peek()
        return None if head is None else head[0]

    def should_pause(self, now: int) -> bool:
        """Pulsar's fixed-delay pause rule."""
        return (
            self.lookahead > 0
            and self.fixed_delay
            and len(self.queue) >= self.lookahead
            and not self.has_message_available(now)
        )

    def clear(self) -> None:
        """Forgets everything; the fixed-delay state starts over."""
        self.queue.clear()
        self.highest = 0
        self.fixed_delay = True
