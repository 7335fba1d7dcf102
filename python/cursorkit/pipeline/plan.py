"""The bucket plan of a rebuilt delayed index: which ledgers each immutable bucket covers.

A live PIP-195 tracker seals its mutable bucket at the first ledger boundary after it holds
``min_index_count_per_bucket`` indexes; the plan replays that rule over the per-ledger counts of
not-yet-due delayed messages, so a rebuilt index has the buckets a broker would have cut. The last
bucket holds the remainder (a live tracker would keep it mutable; a rebuild seals it too, so a
restart recovers every index).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cursorkit.errors import InvalidArgument

__all__ = ["PlannedBucket", "plan_buckets"]


@dataclass(frozen=True, slots=True)
class PlannedBucket:
    """One bucket of the plan: an inclusive ledger range and its planned index count."""

    start_ledger_id: int
    end_ledger_id: int
    messages: int


def plan_buckets(counts: Mapping[int, int], min_index_count_per_bucket: int) -> list[PlannedBucket]:
    """Buckets over the ledgers of ``counts`` ({ledger: not-yet-due messages}) in ledger order.

    Ledgers without delayed messages belong to no bucket (a bucket's range is the first to the last
    ledger it holds indexes of, as a live tracker records it).
    """
    if min_index_count_per_bucket < 1:
        raise InvalidArgument(
            f"min_index_count_per_bucket must be positive, got {min_index_count_per_bucket}"
        )
    plan: list[PlannedBucket] = []
    start = end = -1
    held = 0
    for ledger in sorted(counts):
        n = counts[ledger]
        if n < 0:
            raise InvalidArgument(f"ledger {ledger} has a negative count {n}")
        if not n:
            continue
        if held >= min_index_count_per_bucket:
            plan.append(PlannedBucket(start, end, held))
            held = 0
        if not held:
            start = ledger
        end = ledger
        held += n
    if held:
        plan.append(PlannedBucket(start, end, held))
    return plan
