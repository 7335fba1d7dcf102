"""``TrackedPositions``: every position a bucket tracker tracks, in one ``RangeSet``, and their count.

The index answers ``contains_message`` and deduplicates adds; queues drop what it no longer holds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cursorkit._core import RangeSet
from cursorkit.delayed.bucket import Int64Array

MAX_ENTRY_ID = 2**32 - 1
BoolArray = npt.NDArray[np.bool_]


class TrackedPositions:
    """The tracked positions; ``count`` is their number, kept without a walk of the index."""

    def __init__(self) -> None:
        self.index = RangeSet()
        """The positions themselves (queues read it to drop untracked heads)."""
        self.count = 0

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is tracked (checking it is a valid position first)."""
        return self.index.contains(ledger_id, entry_id)

    def contains_many(self, ls: Int64Array, es: Int64Array) -> BoolArray:
        """Which positions are tracked."""
        return self.index.contains_many(ls, es)

    def add(self, ledger_id: int, entry_id: int) -> None:
        """Tracks a position known not to be tracked."""
        self.index.add(ledger_id, entry_id)
        self.count += 1

    def add_many(self, ls: Int64Array, es: Int64Array) -> int:
        """Tracks positions; returns how many were new."""
        new = self.index.add_many(ls, es)
        self.count += new
        return new

    def union_ledger_bytes(self, ledger_id: int, bitmap: bytes) -> int:
        """Tracks a ledger's entries given as a stored bitmap; returns how many were new."""
        new = self.index.union_ledger_bytes(ledger_id, bitmap)
        self.count += new
        return new

    def remove(self, ledger_id: int, entry_id: int) -> None:
        """Untracks a position known to be tracked."""
        self.index.remove(ledger_id, entry_id)
        self.count -= 1

    def remove_many(self, ls: Int64Array, es: Int64Array) -> BoolArray:
        """Untracks positions; returns which of them were tracked."""
        live = self.index.remove_many(ls, es)
        self.count -= int(live.sum())
        return live

    def remove_at_most(self, ledger_id: int, entry_id: int) -> int:
        """Untracks every position at or below ``ledger_id:entry_id``; returns how many."""
        before = self.index.total_cardinality()
        self.index.remove_at_most(ledger_id, entry_id)
        removed = before - self.index.total_cardinality()
        self.count -= removed
        return removed

    def remove_ledgers(self, start_ledger_id: int, end_ledger_id: int) -> None:
        """Untracks every position of ledgers ``start..end`` (inclusive)."""
        before = self.index.total_cardinality()
        self.index.remove_open_closed(start_ledger_id, -1, end_ledger_id, MAX_ENTRY_ID)
        self.count -= before - self.index.total_cardinality()

    def clear(self) -> None:
        """Untracks everything."""
        self.index.clear()
        self.count = 0

    def memory_usage(self) -> int:
        """Heap bytes of the index."""
        return self.index.memory_usage()
