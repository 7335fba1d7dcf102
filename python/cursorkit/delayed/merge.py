"""Which adjacent buckets a merge takes (PIP-195): fewest messages, earliest next segment, leftmost."""

from __future__ import annotations

from collections.abc import Sequence

from cursorkit.delayed.bucket import ImmutableBucket
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
