"""A small pure-Python model of a cursor's ack state (Pulsar's semantics), for property tests."""

from __future__ import annotations

from dataclasses import dataclass, field

Pos = tuple[int, int]


@dataclass
class ModelCursor:
    """Mark-delete, acked positions after it, and unacked batch indexes, entry by entry."""

    md: Pos
    sizes: dict[int, int] | None = None
    acked: set[Pos] = field(default_factory=set)
    batches: dict[Pos, tuple[int, set[int]]] = field(default_factory=dict)

    def next_after(self, p: Pos) -> Pos | None:
        if self.sizes is None:
            return (p[0], p[1] + 1)
        if p[1] + 1 < self.sizes.get(p[0], 0):
            return (p[0], p[1] + 1)
        later = sorted(ledger for ledger, n in self.sizes.items() if ledger > p[0] and n > 0)
        return (later[0], 0) if later else None

    def valid(self, p: Pos) -> bool:
        return self.sizes is None or (p[0] in self.sizes and p[1] < self.sizes[p[0]])

    def roll(self) -> None:
        while (nxt := self.next_after(self.md)) is not None and nxt in self.acked:
            self.md = nxt
        self.acked = {p for p in self.acked if p > self.md}
        self.batches = {p: b for p, b in self.batches.items() if p > self.md}

    def is_acked(self, p: Pos) -> bool:
        return p <= self.md or p in self.acked

    def ack(self, p: Pos) -> bool:
        self.batches.pop(p, None)
        if self.is_acked(p):
            return False
        self.acked.add(p)
        self.roll()
        return True

    def ack_cumulative(self, p: Pos) -> bool:
        if p <= self.md:
            return False
        self.md = p
        self.roll()
        return True

    def ack_batch_index(self, p: Pos, index: int, size: int) -> bool:
        """Returns the result, or raises ValueError where the cursor must reject the call."""
        existing = self.batches.get(p)
        if index >= size or (existing is not None and existing[0] != size):
            raise ValueError("bad batch index or size")
        if self.is_acked(p):
            return False
        size_, unacked = self.batches.setdefault(p, (size, set(range(size))))
        if index not in unacked:
            return False
        unacked.discard(index)
        if not unacked:
            del self.batches[p]
            self.acked.add(p)
            self.roll()
        return True

    def ack_cumulative_batch(self, p: Pos, index: int, size: int) -> bool:
        existing = self.batches.get(p)
        if index >= size or (existing is not None and existing[0] != size):
            raise ValueError("bad batch index or size")
        if index + 1 == size or p in self.acked:
            return self.ack_cumulative(p)
        if p <= self.md:
            return False
        changed = False
        prev = (p[0], p[1] - 1)
        if prev > self.md:
            self.md = prev
            changed = True
        _, unacked = self.batches.setdefault(p, (size, set(range(size))))
        before = len(unacked)
        unacked.difference_update(range(index + 1))
        changed |= len(unacked) < before
        if not unacked:
            del self.batches[p]
            self.acked.add(p)
        self.roll()
        return changed

    def ack_batch_set(self, p: Pos, words: list[int], size: int) -> int:
        """Pulsar's ``ack_set`` the slow way: each index whose bit ``words`` leave unset, acked one by one.

        Returns how many were newly acked; raises ValueError where the cursor must reject the call.
        """
        existing = self.batches.get(p)
        if not 1 <= size <= 1 << 20 or (existing is not None and existing[0] != size):
            raise ValueError("bad batch size")
        unset = [i for i in range(size) if i // 64 >= len(words) or not (words[i // 64] >> (i % 64)) & 1]
        return sum(self.ack_batch_index(p, i, size) for i in unset)

    def reset(self, p: Pos) -> None:
        self.md = (p[0], p[1] - 1)
        self.acked.clear()
        self.batches.clear()
        self.roll()

    def unacked(self, sizes: dict[int, int]) -> list[Pos]:
        return [
            (ledger, e)
            for ledger in sorted(sizes)
            for e in range(sizes[ledger])
            if not self.is_acked((ledger, e))
        ]

    def runs(self) -> int:
        """Number of maximal runs per ledger among the acked positions."""
        return sum(1 for (ledger, e) in self.acked if (ledger, e - 1) not in self.acked)
