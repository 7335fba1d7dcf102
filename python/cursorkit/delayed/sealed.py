"""``SealedBuckets``: the immutable buckets in ledger order, found by ledger, and their stored bytes."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from cursorkit.delayed.bucket import ImmutableBucket


class SealedBuckets:
    """The sealed buckets, ordered by start ledger (callers hold the tracker's lock)."""

    def __init__(self) -> None:
        self._buckets: list[ImmutableBucket] = []
        self._starts: list[int] = []
        self.end = -1
        """The highest ledger any bucket ever covered (the tail only takes ledgers above it)."""
        self.snapshot_bytes = 0
        """Stored bytes of the buckets' durable snapshots."""

    def covering(self, ledger_id: int) -> ImmutableBucket | None:
        """The bucket whose range holds ``ledger_id``, if any."""
        i = bisect.bisect_right(self._starts, ledger_id) - 1
        if i >= 0 and self._buckets[i].covers(ledger_id):
            return self._buckets[i]
        return None

    def insert(self, b: ImmutableBucket) -> None:
        """Adds a bucket in its place."""
        self.end = max(self.end, b.end_ledger_id)
        i = bisect.bisect_left(self._starts, b.start_ledger_id)
        self._buckets.insert(i, b)
        self._starts.insert(i, b.start_ledger_id)

    def remove(self, b: ImmutableBucket) -> None:
        """Drops a bucket (and its barrier) once; it is marked ``removed``."""
        if b.removed:
            return
        b.removed = True
        b.barrier = None
        i = self._buckets.index(b)
        del self._buckets[i]
        del self._starts[i]

    def as_list(self) -> list[ImmutableBucket]:
        """The buckets in ledger order (a copy)."""
        return list(self._buckets)

    def __iter__(self) -> Iterator[ImmutableBucket]:
        return iter(self._buckets)

    def __len__(self) -> int:
        return len(self._buckets)
