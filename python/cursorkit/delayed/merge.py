"""Bucket merges (PIP-195): which adjacent buckets a merge takes, and the merge itself.

The window minimises (messages, earliest next segment, position); the merge reads every segment of
its sources, filters them by the index and writes one bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from cursorkit import _core
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import ImmutableBucket, SegmentArrays
from cursorkit.errors import InvalidArgument

if TYPE_CHECKING:
    from cursorkit.delayed.bucket_tracker import BucketDelayedDeliveryTracker

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


def merge_buckets(t: BucketDelayedDeliveryTracker, sources: list[ImmutableBucket]) -> ImmutableBucket | None:
    """Merges adjacent sources of ``t`` into one bucket: all their segments, filtered by the index.

    The merged snapshot is written and recorded (merged in, sources out, one atomic properties
    change) before the sources are dropped and their snapshots deleted; a failure deletes nothing.
    """
    parts: list[SegmentArrays] = []
    for s in sources:
        assert s.bucket_id is not None
        sid, last = s.bucket_id, s.last_segment_entry_id
        blobs = t._timed("load", partial(t.storage.get_bucket_snapshot_segment, sid, 1, last))
        parts.append(snapshot.decode(blobs))
    ts = np.concatenate([p.timestamps for p in parts])
    ls = np.concatenate([p.ledger_ids for p in parts])
    es = np.concatenate([p.entry_ids for p in parts])
    live = t._index.contains_many(ls, es)
    ts, ls, es = _core.sort_indexes(ts[live], ls[live], es[live])
    start, end = sources[0].start_ledger_id, sources[-1].end_ledger_id
    merged: ImmutableBucket | None = None
    new_id: int | None = None
    if len(ts):
        segs = t._cut(ts, ls, es)
        merged = ImmutableBucket(
            start,
            end,
            last_segment_entry_id=len(segs),
            number_bucket_delayed_messages=len(ts),
            first_schedule_timestamps=snapshot.first_timestamps(segs),
        )
        new_id, length = t._write_snapshot(segs, merged.key)
        merged.bucket_id, merged.snapshot_length = new_id, length
        try:
            t._props.apply({merged.key: str(new_id)}, [s.key for s in sources])
        except Exception:
            t._delete_quietly(new_id)
            raise
    else:
        t._props.apply({}, [s.key for s in sources])
    with t._lock:
        for s in sources:
            if not s.removed:
                t._remove(s)
                t._snapshot_bytes -= s.snapshot_length
        if merged is not None:
            t._snapshot_bytes += merged.snapshot_length
            t._insert(merged)
            t._push_segment(merged, 1, *segs.segment(0))
        t._settle()
    for s in sources:  # committed: a failed delete only leaves an orphan recovery removes
        if s.bucket_id is not None:
            t._delete_quietly(s.bucket_id)
    return merged
