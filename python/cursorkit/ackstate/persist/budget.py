"""How much of a cursor's state fits a form's limits: batches, ranges and bytes, sized before encoding."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from cursorkit._core import RangeSet
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist.result import BatchRow
from cursorkit.errors import (
    InvalidArgument,
)

__all__ = [
    "BATCH_OVERHEAD",
    "FIXED_BYTES",
    "batches_within",
    "fit_batches",
    "largest_prefix",
    "long_list_map_field_size",
    "ranges_within",
    "runs_per_ledger",
    "varint_len",
    "words_through",
]


def fit_batches(
    batches: list[BatchRow], properties: Mapping[str, int], limits: PersistLimits, who: str
) -> list[BatchRow]:
    """The prefix of partial batches within the count limit and the byte limit.

    Properties cannot be split (as in Pulsar, a persist whose properties alone do not fit fails);
    batches come next, each charged an upper bound of its size in every form (11 B per word, the
    widest varint); the ack ranges get what is left.
    """
    props = sum(12 + len(name.encode()) + 1 + varint_len(value) for name, value in properties.items())
    budget = limits.max_entry_bytes - FIXED_BYTES - props
    if budget < 0:
        raise InvalidArgument(
            f"{who}: properties take about {props} bytes, more than max_entry_bytes={limits.max_entry_bytes}"
        )
    return batches_within(batches, limits.max_batch_deleted_index_to_persist, budget)


def batches_within(batches: list[BatchRow], limit: int, budget: int) -> list[BatchRow]:
    """The prefix of at most ``limit`` partial batches whose sizes' upper bounds fit ``budget`` bytes."""
    kept = batches[:limit]
    used = 0
    for i, (_ledger, _entry, _size, words) in enumerate(kept):
        used += BATCH_OVERHEAD + 11 * (len(words) // 8)
        if used > budget:
            return kept[:i]
    return kept


FIXED_BYTES = 64
"""Upper bound of a record's mark-delete, version, checksum and truncation counters."""
BATCH_OVERHEAD = 48
"""Upper bound of one batch item's tags, lengths, position and size varints."""


MAX_RANGE_BYTES = 50
"""Upper bound of one MessageRange field: tag and length, two endpoints of two 10-byte varints each."""


def ranges_within(acked: RangeSet, limit: int, budget: int) -> int:
    """How many leading ranges fit both the range limit and ``budget`` bytes as MessageRanges."""
    n = min(len(acked), limit)
    if n * MAX_RANGE_BYTES <= budget:  # fits whatever the ids: no need to size them
        return n
    if acked.message_range_wire_size(n) > budget:
        n = largest_prefix(n, lambda k: acked.message_range_wire_size(k) <= budget)
    return n


def words_through(values: npt.NDArray[np.int64], last_entry: int) -> npt.NDArray[np.int64]:
    """BitSet words holding only entries ``<= last_entry``."""
    n = last_entry // 64 + 1
    kept = values[:n].copy().view(np.uint64)
    kept[-1] &= np.uint64((1 << (last_entry % 64 + 1)) - 1)
    return kept.view(np.int64)


def runs_per_ledger(acked: RangeSet) -> dict[int, int]:
    """Ack ranges per ledger."""
    rows = acked.ranges_array()
    ledgers, counts = np.unique(rows[:, 0], return_counts=True)
    return dict(zip(ledgers.tolist(), counts.tolist(), strict=True))


def varint_len(value: int) -> int:
    """Bytes of ``value`` as a protobuf varint (10 for a negative int64)."""
    if value < 0:
        return 10
    return max(1, (value.bit_length() + 6) // 7)


def long_list_map_field_size(ledger: int, values: npt.NDArray[np.int64]) -> int:
    """Bytes of one ``LongListMap`` as PositionInfo field 6 (unpacked int64 words)."""
    v = values.astype(np.int64)
    lengths = np.ones(v.shape, dtype=np.int64)
    for k in range(1, 9):
        lengths += v >= (1 << (7 * k))
    lengths[v < 0] = 10
    payload = 1 + varint_len(ledger) + int(lengths.sum()) + v.size
    return 1 + varint_len(payload) + payload


def largest_prefix(n: int, fits: Callable[[int], bool]) -> int:
    """Largest ``k <= n`` with ``fits(k)`` (monotone), by bisection."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
