"""Key_Shared hash load: how many messages each consumer would get under each selector.

Two steps, so the expensive one runs where the keys are. :func:`slot_histograms` turns a column of
message keys into two 65,536-long counts of messages per hash slot (one per slot function); it runs per
partition inside Spark and the partial histograms simply add up. :func:`key_load` then registers
``consumers`` simulated consumers with each selector and adds up the counts of the slots each one owns;
it touches 65,536 slots per selector, whatever the number of messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.keyshared.hashing import DEFAULT_RANGE_SIZE, NONE_KEY, hash_many, slots
from cursorkit.keyshared.selectors import (
    DEFAULT_POINTS_PER_CONSUMER,
    AutoSplitSelector,
    ConsistentHashingSelector,
    ExclusiveRangeSelector,
)
from cursorkit.pipeline.results import KeyLoad

__all__ = [
    "SELECTORS",
    "SLOT_COUNT",
    "SimulatedConsumer",
    "consumer_names",
    "even_ranges",
    "key_load",
    "slot_histograms",
]

SLOT_COUNT = DEFAULT_RANGE_SIZE
"""Length of a slot histogram: one count per slot ``0..65535`` (slot 0 is never hit by either function)."""

SELECTORS = ("auto_split", "consistent", "exclusive")
"""The selectors :func:`key_load` simulates, in the order of its result."""

Histogram = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SimulatedConsumer:
    """A stand-in consumer for the selectors: they only need a hashable object with a name."""

    name: str


def _key_column(keys: Any) -> pa.Array | pa.ChunkedArray:
    """The key column as a string/binary Arrow array ``hash_many`` reads, nulls filled with NONE_KEY."""
    if not isinstance(keys, pa.Array | pa.ChunkedArray):
        raise InvalidInputType(f"keys must be an Arrow array or chunked array, got {type(keys).__name__}")
    kind = keys.type
    if pa.types.is_null(kind):  # a key column with no value at all
        return pa.array([NONE_KEY] * len(keys), pa.binary())
    if pa.types.is_dictionary(kind):
        keys = keys.cast(kind.value_type)
        kind = keys.type
    if pa.types.is_string_view(kind):
        keys = keys.cast(pa.large_string())
    elif pa.types.is_binary_view(kind):
        keys = keys.cast(pa.large_binary())
    elif not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)) and (
        not pa.types.is_large_binary(kind)
    ):
        raise InvalidInputType(f"keys must be an Arrow string or binary column, got {kind}")
    if keys.null_count:
        keys = pc.fill_null(keys, pa.scalar(NONE_KEY, pa.binary()).cast(keys.type))
    return keys


def slot_histograms(keys: pa.Array | pa.ChunkedArray) -> tuple[Histogram, Histogram]:
    """Messages per hash slot of one key column: ``(range_counts, consistent_counts)``.

    Each is a 65,536-long int64 array indexed by slot: ``range_counts`` under the auto-split/exclusive
    slot function, ``consistent_counts`` under consistent hashing's. A null key is a message without a
    key and hashes as ``NONE_KEY``. Histograms of several partitions add up to the whole topic's.
    String, binary (large, view or dictionary-encoded) and all-null columns are accepted.
    """
    column = _key_column(keys)
    if len(column) == 0:
        empty = np.zeros(SLOT_COUNT, dtype=np.int64)
        return empty, empty.copy()
    hashes = hash_many(column)
    range_counts = np.bincount(slots(hashes, "range"), minlength=SLOT_COUNT).astype(np.int64, copy=False)
    consistent_counts = np.bincount(slots(hashes, "consistent"), minlength=SLOT_COUNT).astype(
        np.int64, copy=False
    )
    return range_counts, consistent_counts


def consumer_names(consumers: int) -> list[str]:
    """The simulated consumers' names, ``consumer-0`` .. ``consumer-{n-1}``, in the order they join."""
    return [f"consumer-{i}" for i in range(consumers)]


def even_ranges(consumers: int, range_size: int = SLOT_COUNT) -> list[tuple[int, int]]:
    """``consumers`` contiguous inclusive slot ranges of near-equal size covering ``0..range_size-1``."""
    bounds = [i * range_size // consumers for i in range(consumers + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(consumers)]


def _histogram(counts: object, name: str) -> Histogram:
    """``counts`` as a 65,536-long int64 array; InvalidArgument for another shape or negative counts."""
    try:
        array = np.asarray(counts)
    except (TypeError, ValueError) as e:
        raise InvalidInputType(f"{name} must be an integer array, got {type(counts).__name__}") from e
    if array.dtype.kind not in "iu":
        raise InvalidInputType(f"{name} must hold integers, got dtype {array.dtype}")
    if array.shape != (SLOT_COUNT,):
        raise InvalidArgument(f"{name} must have shape ({SLOT_COUNT},), got {array.shape}")
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise InvalidArgument(f"{name} must not hold negative counts")
    return array.astype(np.int64, copy=False)


def _loads(owner: npt.NDArray[np.int64], counts: Histogram, consumers: int) -> list[int]:
    """Sum of ``counts`` per owner index ``0..consumers-1``; slots owned by nobody (-1) are dropped."""
    owned = owner >= 0
    totals = np.bincount(owner[owned], weights=counts[owned], minlength=consumers)
    # float64 sums of integers stay exact below 2**53 messages per consumer.
    return [int(v) for v in np.rint(totals[:consumers])]


def key_load(
    range_counts: npt.ArrayLike,
    consistent_counts: npt.ArrayLike,
    consumers: int,
    *,
    points_per_consumer: int = DEFAULT_POINTS_PER_CONSUMER,
) -> list[KeyLoad]:
    """Messages per consumer under each Key_Shared selector, from the two slot histograms.

    ``consumers`` simulated consumers ``consumer-0`` .. ``consumer-{n-1}`` join in that order:
    ``auto_split`` (PIP-34, each joiner halving the widest range) and ``exclusive`` (one even contiguous
    range each) read ``range_counts``; ``consistent`` (``points_per_consumer`` ring points each) reads
    ``consistent_counts``. Returns one :class:`KeyLoad` per selector, in :data:`SELECTORS` order.
    ``consumers`` must be in ``1..65536`` (auto-split cannot split the hash space any finer).
    """
    if isinstance(consumers, bool) or not isinstance(consumers, int | np.integer):
        raise InvalidInputType(f"consumers must be an int, got {type(consumers).__name__}")
    consumers = int(consumers)
    if not 1 <= consumers <= SLOT_COUNT:
        raise InvalidArgument(f"consumers must be in 1..{SLOT_COUNT}, got {consumers}")
    range_hist = _histogram(range_counts, "range_counts")
    consistent_hist = _histogram(consistent_counts, "consistent_counts")

    names = consumer_names(consumers)
    members = [SimulatedConsumer(n) for n in names]
    auto_split: AutoSplitSelector[SimulatedConsumer] = AutoSplitSelector()
    consistent: ConsistentHashingSelector[SimulatedConsumer] = ConsistentHashingSelector(points_per_consumer)
    exclusive: ExclusiveRangeSelector[SimulatedConsumer] = ExclusiveRangeSelector()
    for member, hash_range in zip(members, even_ranges(consumers), strict=True):
        auto_split.add_consumer(member)
        consistent.add_consumer(member)
        exclusive.add_consumer(member, [hash_range])

    all_slots = np.arange(SLOT_COUNT, dtype=np.int64)
    result = []
    for selector_name, selector, hist in (
        ("auto_split", auto_split, range_hist),
        ("consistent", consistent, consistent_hist),
        ("exclusive", exclusive, range_hist),
    ):
        # Fresh selectors hand out indices 0, 1, ... in join order, so index i is members[i].
        assert selector.consumers == tuple(members)
        loads = _loads(selector.select_many(all_slots), hist, consumers)
        result.append(KeyLoad(selector=selector_name, consumers=list(names), messages=loads))
    return result
