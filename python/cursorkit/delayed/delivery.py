"""``Delivery``: due indexes leave in exact (deliver-at, ledger, entry) order, whatever is loaded.

After every change the tracker *settles*: untracked heads leave the queues and every bucket whose
loaded segment is used up gets its next one, so the shared queue's head is always the earliest
tracked index and ``has_message_available`` / ``next_delivery_time`` are exact at every moment (a
broker that arms its timer from them never waits while something is due).
"""

from __future__ import annotations

import numpy as np

from cursorkit.delayed.bucket import ImmutableBucket, Int64Array
from cursorkit.delayed.clock import I64_MAX
from cursorkit.delayed.lifecycle import BucketLifecycle
from cursorkit.delayed.parts import TrackerParts
from cursorkit.errors import BucketNotFound, CorruptSnapshot, PersistFailed


class Delivery:
    """Settles the tail and the shared queue, loads next segments, and pops due indexes (under the lock)."""

    def __init__(
        self,
        *,
        parts: TrackerParts,
        lifecycle: BucketLifecycle,
    ) -> None:
        self._parts = parts
        self._lifecycle = lifecycle

    def settle(self) -> None:
        """Restores the delivery invariant after any change to the queues or the index.

        Untracked indexes at the heads (expired re-adds, trims, merged or downgraded duplicates)
        leave, and while the shared head lies beyond the earliest barrier, that bucket's loaded
        segment is used up: its next segment is loaded (or the bucket retired). Afterwards the
        shared head is the earliest tracked index unless a load failed (see ``next_time``).
        """
        self._parts.tail.queue.drop_untracked(self._parts.positions.index)
        while True:
            self._parts.queue.queue.drop_untracked(self._parts.positions.index)
            b = self._parts.queue.min_barrier()
            if b is None or b.barrier is None:
                return
            head = self._parts.queue.queue.peek()
            if head is not None and head <= b.barrier:
                return
            if not self._advance(b):
                return

    def next_time(self) -> int | None:
        """Earliest deliver-at still tracked, or None when nothing is.

        The queue heads give it, except for buckets whose next segment could not be loaded yet:
        their metadata's ``min_schedule_timestamp`` of that segment stands in for it.
        """
        heads = [
            h[0] for h in (self._parts.tail.queue.peek(), self._parts.queue.queue.peek()) if h is not None
        ]
        heads.extend(c.next_unloaded_timestamp() for c in self._parts.queue.stalled(self._parts.sealed))
        return min(heads) if heads else None

    def pop_due(self, cutoff: int, max_messages: int) -> Int64Array:
        """Up to ``max_messages`` indexes due by ``cutoff``, untracked, as (ledger, entry) rows sorted."""
        ts, ls, es = self._parts.tail.queue.pop_due(cutoff, I64_MAX)
        if len(ts):
            self._parts.queue.queue.add_many(ts, ls, es)
        self.settle()  # retries a load that failed earlier
        out_l: list[Int64Array] = []
        out_e: list[Int64Array] = []
        remaining = max_messages
        while remaining > 0:
            limit = self._parts.queue.pop_limit(cutoff, self._parts.sealed)
            ts, ls, es = self._parts.queue.queue.pop_until(limit[0], limit[1], limit[2], remaining)
            if not len(ts):
                break
            live = self._parts.positions.remove_many(ls, es)
            k = int(live.sum())
            if k:
                out_l.append(ls[live] if k < len(ls) else ls)
                out_e.append(es[live] if k < len(es) else es)
                self._parts.tally.add("delivered", k)
                remaining -= k
            self.settle()  # a popped barrier loads its bucket's next segment at once
        if not out_l:
            return np.empty((0, 2), dtype=np.int64)
        ls_all, es_all = np.concatenate(out_l), np.concatenate(out_e)
        order = np.lexsort((es_all, ls_all))
        return np.stack((ls_all[order], es_all[order]), axis=1)

    def _advance(self, b: ImmutableBucket) -> bool:
        """Loads the bucket's next segment (or retires it after its last); False if loading failed."""
        nxt = b.current_segment_entry_id + 1
        if nxt > b.last_segment_entry_id:
            self._lifecycle.retire(b)
            return True
        try:
            cols = self._parts.io.segment(b, nxt)
        except (PersistFailed, OSError):
            return False  # counted in op_stats; retried on the next call
        except (CorruptSnapshot, BucketNotFound) as e:
            self._lifecycle.lose(b, f"segment {nxt}: {e}")
            return True
        self._parts.queue.push(b, nxt, *cols, self._parts.positions)
        self._parts.tally.add("segment_loads")
        return True
