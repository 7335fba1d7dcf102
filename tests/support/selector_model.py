"""Pure-Python reference models of the three Key_Shared selectors, written from Pulsar's rules.

Consumers are plain ints here. Each model keeps Pulsar's own data structure (auto-split: sorted upper
bounds; consistent hashing: point -> [owner, queued...]; exclusive: ranges per consumer) and answers
``assignments()`` (sorted ``(start, end, consumer)``), ``select(slot)`` by Pulsar's look-up rule, and
the slot-by-slot diff of two assignment lists through numpy owner arrays.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Assignment = tuple[int, int, int]
Ranges = dict[int, list[tuple[int, int]]]

CH_RANGE = (1, 65535)
"""Consistent hashing's slots (Pulsar 4: ``[STICKY_KEY_HASH_NOT_SET + 1, DEFAULT_RANGE_SIZE - 1]``)."""


# ------------------------------------------------------------------------------------------- hashing


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86_32 (Appleby's reference) in plain Python, independent of the Rust one."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[n:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data) & mask
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    return h ^ (h >> 16)


def sticky_key_hash(key: bytes) -> int:
    """Pulsar's sticky-key hash: murmur3 seed 0, masked to 31 bits."""
    return murmur3_32(key) & 0x7FFFFFFF


def ch_point(name: str, name_index: int, i: int) -> int:
    """Pulsar 4's ring point: the consistent-hashing slot of name, NUL, name_index, NUL, i."""
    return sticky_key_hash(f"{name}\0{name_index}\0{i}".encode()) % 65535 + 1


# ------------------------------------------------------------------------------------- assignments


def owners(assignments: Iterable[Assignment], size: int) -> npt.NDArray[np.int64]:
    """Owner of every hash ``0..size-1`` (-1: nobody); ranges beyond ``size`` are cut."""
    out = np.full(size, -1, dtype=np.int64)
    for start, end, c in assignments:
        out[start : end + 1] = c
    return out


def runs(hashes: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive values in a sorted hash array, as inclusive ranges."""
    if not len(hashes):
        return []
    breaks = np.flatnonzero(np.diff(hashes) != 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(hashes) - 1]))
    return [(int(hashes[s]), int(hashes[e])) for s, e in zip(starts, ends, strict=True)]


def diff(before: list[Assignment], after: list[Assignment]) -> tuple[Ranges, Ranges]:
    """``(removed, added)``: per consumer, the hashes it lost and gained, as merged ranges."""
    size = max((e for _, e, _ in before + after), default=-1) + 1
    was, now = owners(before, size), owners(after, size)
    changed = was != now
    removed: Ranges = {}
    added: Ranges = {}
    for c in sorted(set(was[changed].tolist()) - {-1}):
        removed[c] = runs(np.flatnonzero(changed & (was == c)))
    for c in sorted(set(now[changed].tolist()) - {-1}):
        added[c] = runs(np.flatnonzero(changed & (now == c)))
    return removed, added


def ranges_by_consumer(assignments: list[Assignment]) -> Ranges:
    """Per consumer (in the order of its first range), its ranges with touching ones merged."""
    out: Ranges = {}
    for start, end, c in sorted(assignments):
        mine = out.setdefault(c, [])
        if mine and mine[-1][1] + 1 >= start:
            mine[-1] = (mine[-1][0], max(mine[-1][1], end))
        else:
            mine.append((start, end))
    return out


# --------------------------------------------------------------------------------------- selectors


class AutoSplitModel:
    """PIP-34: sorted ``(upper bound, consumer)``; a joiner takes the lower half of the first widest range."""

    def __init__(self, range_size: int) -> None:
        self.size = range_size
        self.bounds: list[tuple[int, int]] = []

    def add(self, c: int) -> bool:
        """Add ``c``; False (nothing changed) when no range is wider than one hash."""
        if not self.bounds:
            self.bounds.append((self.size, c))
            return True
        lower, upper, widest, prev = 0, self.size, 0, 0
        for bound, _ in self.bounds:
            if bound - prev > widest:
                lower, upper, widest = prev, bound, bound - prev
            prev = bound
        if widest <= 1:
            return False
        bisect.insort(self.bounds, (upper - ((upper - lower) >> 1), c))
        return True

    def remove(self, c: int) -> None:
        """Remove ``c``: the top bound passes to the consumer below; any other range merges upward."""
        at = next(i for i, (_, x) in enumerate(self.bounds) if x == c)
        if self.bounds[at][0] == self.size and len(self.bounds) > 1:
            below = self.bounds.pop(at - 1)[1]
            self.bounds[-1] = (self.size, below)
        else:
            del self.bounds[at]

    def assignments(self) -> list[Assignment]:
        out, start = [], 0
        for bound, c in self.bounds:
            out.append((start, bound, c))
            start = bound + 1
        return out

    def select(self, slot: int) -> int | None:
        """The ceiling bound's consumer (slots are ``0..size-1``)."""
        i = bisect.bisect_left(self.bounds, (slot, -1))
        return self.bounds[i][1] if i < len(self.bounds) else None


class ConsistentHashingModel:
    """Pulsar 4's ring: point -> [owner, queued...]; name indexes per name."""

    def __init__(self, points_per_consumer: int) -> None:
        self.n = points_per_consumer
        self.ring: dict[int, list[int]] = {}
        self.members: dict[int, tuple[str, int]] = {}

    def add(self, c: int, name: str) -> None:
        used = {x for nm, x in self.members.values() if nm == name}
        index = next(i for i in range(len(used) + 1) if i not in used)
        self.members[c] = (name, index)
        for i in range(self.n):
            self.ring.setdefault(ch_point(name, index, i), []).append(c)

    def remove(self, c: int) -> None:
        name, index = self.members.pop(c)
        for i in range(self.n):
            p = ch_point(name, index, i)
            queue = self.ring[p]
            if queue[0] == c:
                queue.pop(0)
            else:
                queue[:] = [x for x in queue if x != c]
            if not queue:
                del self.ring[p]

    def name_index(self, c: int) -> int:
        return self.members[c][1]

    def owned_points(self, c: int) -> int:
        return sum(1 for q in self.ring.values() if q[0] == c)

    def assignments(self) -> list[Assignment]:
        """Point p owns ``[previous + 1, p]`` from 1; the tail wraps to the first point's owner."""
        points = sorted(self.ring)
        out: list[Assignment] = []
        start = CH_RANGE[0]
        for p in points:
            out.append((start, p, self.ring[p][0]))
            start = p + 1
        if points and start <= CH_RANGE[1]:
            out.append((start, CH_RANGE[1], self.ring[points[0]][0]))
        return join_touching(out)

    def select(self, slot: int) -> int | None:
        """The first point at or after ``slot``, else the first point."""
        if not self.ring:
            return None
        points = sorted(self.ring)
        i = bisect.bisect_left(points, slot)
        return self.ring[points[i if i < len(points) else 0]][0]


def join_touching(assignments: list[Assignment]) -> list[Assignment]:
    """Merges neighbouring assignments of one consumer that touch."""
    out: list[Assignment] = []
    for start, end, c in assignments:
        if out and out[-1][2] == c and out[-1][1] + 1 == start:
            out[-1] = (out[-1][0], end, c)
        else:
            out.append((start, end, c))
    return out


class ExclusiveModel:
    """``STICKY``: consumer -> its ranges; a slot is ``hash % size``."""

    def __init__(self, range_size: int) -> None:
        self.size = range_size
        self.ranges: dict[int, list[tuple[int, int]]] = {}

    def problem(self, ranges: list[tuple[int, int]]) -> str | None:
        """Why Pulsar rejects ``ranges`` (a message prefix), or None."""
        if not ranges:
            return "Ranges for KeyShared policy must not be empty."
        ordered = sorted(ranges, key=lambda r: r[0])
        for i, (s, e) in enumerate(ordered):
            if s > e:
                return "Fixed hash range start > end"
            if i + 1 < len(ordered) and max(s, ordered[i + 1][0]) <= min(e, ordered[i + 1][1]):
                return "Consumer's own ranges conflict"
        for s, e in ranges:
            for held in self.ranges.values():
                if any(max(s, hs) <= min(e, he) for hs, he in held):
                    return "Range conflict with consumer"
        return None

    def add(self, c: int, ranges: list[tuple[int, int]]) -> None:
        self.ranges[c] = sorted(ranges)

    def remove(self, c: int) -> None:
        del self.ranges[c]

    def assignments(self) -> list[Assignment]:
        return sorted((s, e, c) for c, rs in self.ranges.items() for s, e in rs)

    def select(self, slot: int) -> int | None:
        h = slot % self.size
        return next((c for s, e, c in self.assignments() if s <= h <= e), None)
