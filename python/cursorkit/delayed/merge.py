"""Bucket merges (PIP-195): which adjacent buckets a merge takes, and the merge itself.

The window minimises (messages, earliest next segment, position); the merge reads every segment of
its sources, filters them by the index and writes one bucket. ``Merges`` runs them as jobs while
the tracker holds more than ``max_num_buckets`` buckets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from cursorkit import _core
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import ImmutableBucket, SegmentArrays
from cursorkit.delayed.delivery import Delivery
from cursorkit.delayed.parts import TrackerParts
from cursorkit.errors import InvalidArgument

MAX_MERGE_NUM = 4
"""Pulsar merges at most four buckets at a time."""


def _eligible(b: ImmutableBucket) -> bool:
    return b.created and not b.merging and b.last_segment_entry_id > b.current_segment_entry_id


def select_merged_buckets(
    buckets: Sequence[ImmutableBucket], k: int = MAX_MERGE_NUM
) -> tuple[int, int] | None:
    """The window ``[i, j)`` of adjacent buckets to merge, or None when no window qualifies.

    ``buckets`` are in ledger-range order. A window of ``k`` is eligible when every bucket in it is
    created, not merging and still has an unloaded segment. Windows minimise (total messages, the
    earliest next-unloaded-segment timestamp, position); when no window of ``k`` qualifies, ``k - 1``
    is tried, down to 2. ``k`` is capped at the number of buckets (Pulsar #26241).

    Raises:
        InvalidArgument: ``k`` < 2.
    """
    if k < 2:
        raise InvalidArgument(f"a merge takes at least 2 buckets, got k={k}")
    ok = [_eligible(b) for b in buckets]
    for size in range(min(k, len(buckets)), 1, -1):
        best: tuple[int, int, int] | None = None
        for i in range(len(buckets) - size + 1):
            if not all(ok[i : i + size]):
                continue
            window = buckets[i : i + size]
            rank = (
                sum(b.number_bucket_delayed_messages for b in window),
                min(b.next_unloaded_timestamp() for b in window),
                i,
            )
            if best is None or rank < best:
                best = rank
        if best is not None:
            return best[2], best[2] + size
    return None


class Merges:
    """Merge jobs of one tracker: queued after a seal, and again while still above the limit."""

    def __init__(
        self,
        *,
        max_num_buckets: int,
        closed: Callable[[], bool],
        parts: TrackerParts,
        delivery: Delivery,
    ) -> None:
        self._parts = parts
        self._max = max_num_buckets
        self._closed = closed
        self._delivery = delivery
        self._queued = False

    def request(self) -> None:
        """Queues a merge job if there are too many buckets and none is queued (under the lock)."""
        if self._max > 0 and len(self._parts.sealed) > self._max and not self._queued:
            self._queued = True
            self._parts.jobs.submit(self._job)

    def _job(self) -> None:
        with self._parts.lock:
            self._queued = False
            if self._closed() or len(self._parts.sealed) <= self._max:
                return
            buckets = self._parts.sealed.as_list()
            window = select_merged_buckets(buckets, min(MAX_MERGE_NUM, len(buckets)))
            if window is None:
                return
            sources = buckets[window[0] : window[1]]
            for s in sources:
                s.merging = True
        t0 = time.perf_counter()
        try:
            merged = self._merge(sources)
        except Exception:
            self._parts.io.op_stats.record("merge", False, (time.perf_counter() - t0) * 1000)
            with self._parts.lock:
                for s in sources:
                    s.merging = False
            raise
        self._parts.io.op_stats.record("merge", True, (time.perf_counter() - t0) * 1000)
        with self._parts.lock:
            self._parts.tally.add("merges")
            if merged is not None:
                self.request()  # still above the limit: merge again

    def _merge(self, sources: list[ImmutableBucket]) -> ImmutableBucket | None:
        """Merges adjacent sources into one bucket: all their segments, filtered by the index.

        The merged snapshot is written and recorded (merged in, sources out, one atomic properties
        change) before the sources are dropped and their snapshots deleted; a failure deletes nothing.
        """
        parts: list[SegmentArrays] = []
        for s in sources:
            assert s.bucket_id is not None
            parts.append(snapshot.decode(self._parts.io.load(s.bucket_id, 1, s.last_segment_entry_id)))
        ts = np.concatenate([p.timestamps for p in parts])
        ls = np.concatenate([p.ledger_ids for p in parts])
        es = np.concatenate([p.entry_ids for p in parts])
        live = self._parts.positions.contains_many(ls, es)
        ts, ls, es = _core.sort_indexes(ts[live], ls[live], es[live])
        start, end = sources[0].start_ledger_id, sources[-1].end_ledger_id
        merged: ImmutableBucket | None = None
        if len(ts):
            segs = self._parts.io.cut(ts, ls, es)
            merged = ImmutableBucket(
                start,
                end,
                last_segment_entry_id=len(segs),
                number_bucket_delayed_messages=len(ts),
                first_schedule_timestamps=snapshot.first_timestamps(segs),
            )
            new_id, length = self._parts.io.write(segs, merged.key)
            merged.bucket_id, merged.snapshot_length = new_id, length
            try:
                self._parts.props.apply({merged.key: str(new_id)}, [s.key for s in sources])
            except Exception:
                self._parts.io.delete_quietly(new_id)
                raise
        else:
            self._parts.props.apply({}, [s.key for s in sources])
        with self._parts.lock:
            for s in sources:
                if not s.removed:
                    self._parts.sealed.remove(s)
                    self._parts.sealed.snapshot_bytes -= s.snapshot_length
            if merged is not None:
                self._parts.sealed.snapshot_bytes += merged.snapshot_length
                self._parts.sealed.insert(merged)
                self._parts.queue.push(merged, 1, *segs.segment(0), self._parts.positions)
            self._delivery.settle()
        for s in sources:  # committed: a failed delete only leaves an orphan recovery removes
            if s.bucket_id is not None:
                self._parts.io.delete_quietly(s.bucket_id)
        return merged
