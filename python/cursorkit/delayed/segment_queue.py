"""``SegmentQueue``: the loaded segments of every sealed bucket in one queue, and their barriers.

Only each bucket's earliest unconsumed segment is loaded; its last index is a *barrier* past which
nothing is popped until that bucket's next segment is loaded, so delivery is in exact
(deliver-at, ledger, entry) order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from cursorkit._core import DelayQueue
from cursorkit.delayed.bucket import ImmutableBucket, Int64Array, Key
from cursorkit.delayed.clock import I64_MAX
from cursorkit.delayed.positions import TrackedPositions


class SegmentQueue:
    """The shared queue (loaded segments, indexes of ledgers the tail cannot take) and the barriers."""

    def __init__(self) -> None:
        self.queue = DelayQueue()
        self._barriers: list[tuple[Key, int, ImmutableBucket]] = []
        self._seq = itertools.count()

    def push(
        self,
        b: ImmutableBucket,
        segment_id: int,
        ts: Int64Array,
        ls: Int64Array,
        es: Int64Array,
        positions: TrackedPositions,
    ) -> None:
        """Queues a segment's still-tracked indexes and sets the bucket's barrier."""
        live = positions.contains_many(ls, es)
        if live.all():
            self.queue.add_many(ts, ls, es)
        else:
            self.queue.add_many(ts[live], ls[live], es[live])
        b.current_segment_entry_id = segment_id
        b.barrier = (int(ts[-1]), int(ls[-1]), int(es[-1]))
        heapq.heappush(self._barriers, (b.barrier, next(self._seq), b))

    def min_barrier(self) -> ImmutableBucket | None:
        """The live bucket with the earliest barrier (stale heap entries leave on the way)."""
        while self._barriers:
            key, _, b = self._barriers[0]
            if b.removed or b.barrier != key:
                heapq.heappop(self._barriers)
                continue
            return b
        return None

    def stalled(self, buckets: Iterable[ImmutableBucket]) -> list[ImmutableBucket]:
        """Buckets whose loaded segment is used up while their next one is not loaded.

        Only a failed load leaves one (settling stops there); usually the list is empty.
        """
        b = self.min_barrier()
        if b is None or b.barrier is None:
            return []
        head = self.queue.peek()
        if head is not None and head <= b.barrier:
            return []
        return [c for c in buckets if c.barrier is not None and (head is None or head > c.barrier)]

    def pop_limit(self, cutoff: int, buckets: Iterable[ImmutableBucket]) -> Key:
        """The last index that may leave now: due, and before every bucket's unloaded indexes.

        A bucket's unloaded segments follow its barrier; one whose next segment failed to load
        holds back only indexes from that segment's ``min_schedule_timestamp`` on.
        """
        limit: Key = (cutoff, I64_MAX, I64_MAX)
        stalled = set(self.stalled(buckets))
        if not stalled:  # every load succeeded: the earliest barrier
            b = self.min_barrier()
            return min(limit, b.barrier) if b is not None and b.barrier is not None else limit
        for c in buckets:
            if c.barrier is not None:
                bound = (c.next_unloaded_timestamp() - 1, I64_MAX, I64_MAX) if c in stalled else c.barrier
                limit = min(limit, bound)
        return limit

    def clear(self) -> None:
        """Empties the queue and forgets every barrier."""
        self.queue.clear()
        self._barriers.clear()
