"""Key_Shared hash-range selectors: which consumer receives each sticky-key hash slot.

Three selectors with Pulsar's rules, each a thin wrapper over its state in Rust:

* ``AutoSplitSelector(range_size=65536)`` - PIP-34: a joiner takes the lower half of the first widest
  range; a leaver's range merges into the next higher one (the top one into the consumer below).
* ``ConsistentHashingSelector(points_per_consumer=100)`` - Pulsar 4's default: ring points named
  ``name + NUL + name_index + NUL + i``; a colliding point keeps its owner and queues the newcomer.
* ``ExclusiveRangeSelector(range_size=65536)`` - ``STICKY``: consumers bring non-overlapping ranges.

A consumer is any hashable object with a ``name`` (str); registering the same (equal) object twice is
``InvalidArgument``, an unknown one ``UnknownConsumer``. The wrapper gives each consumer a small integer
*index* (the lowest free one; a removed consumer's index is reused by a later add), which is what the
Rust side and ``select_many`` work with: ``select_many(slots)`` returns an int64 array of indices, -1
where nobody owns the slot, and ``consumers_by_index`` maps them back. Its last item is always None,
so ``np.asarray(sel.consumers_by_index, dtype=object)[sel.select_many(slots)]`` maps -1 to None too.

Every ``add_consumer`` / ``remove_consumer`` returns an :class:`Impact`: the hash ranges each previous
owner lost (Pulsar's ``ImpactedConsumersResult``, the leaver included) and each new owner gained,
computed exactly slot by slot, and naming only consumers whose slots actually moved. This works
around a quirk of Pulsar's snapshot diff (``ConsumerHashAssignmentsSnapshot``): when an
exclusive-range consumer is added, Pulsar charges the newcomer's range to the next consumer up, which
never held it. The diff also omits the part of a partially overlapped old range that no new range
covers; only the exclusive selector leaves such holes, and they are reported here. Every error leaves
the selector unchanged.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from cursorkit import _core
from cursorkit.errors import InvalidArgument, InvalidInputType, UnknownConsumer

__all__ = [
    "DEFAULT_POINTS_PER_CONSUMER",
    "DEFAULT_RANGE_SIZE",
    "AutoSplitSelector",
    "ConsistentHashingSelector",
    "ExclusiveRangeSelector",
    "Impact",
    "NamedConsumer",
]

DEFAULT_RANGE_SIZE = 65536
"""Pulsar's ``DEFAULT_RANGE_SIZE`` (``2 << 15``): the auto-split and exclusive hash space."""
DEFAULT_POINTS_PER_CONSUMER = 100
"""Pulsar's ``subscriptionKeySharedConsistentHashingReplicaPoints`` default."""

_log = logging.getLogger(__name__)

HashRange = tuple[int, int]


class NamedConsumer(Protocol):
    """What a selector needs of a consumer: a name (consistent hashing names its ring points by it)."""

    @property
    def name(self) -> str:
        """The consumer name (Pulsar's ``consumerName``)."""
        ...


C = TypeVar("C", bound=NamedConsumer)


@dataclass(frozen=True, slots=True)
class Impact(Generic[C]):
    """What one membership change moved: merged inclusive ``(start, end)`` hash ranges per consumer.

    ``removed`` holds the ranges taken away from each previous owner (the leaver included);
    ``added`` the ranges each consumer gained; ``impacted`` every consumer in either.
    """

    removed: Mapping[C, tuple[HashRange, ...]]
    added: Mapping[C, tuple[HashRange, ...]]
    impacted: frozenset[C]


class _Native(Protocol):
    """The methods the three native selector states share."""

    def add_consumer(
        self, consumer_id: int, name: str, ranges: Iterable[tuple[int, int]] | None = None
    ) -> tuple[list[tuple[int, list[HashRange]]], list[tuple[int, list[HashRange]]]]: ...
    def remove_consumer(
        self, consumer_id: int
    ) -> tuple[list[tuple[int, list[HashRange]]], list[tuple[int, list[HashRange]]]]: ...
    def select(self, slot: int) -> int | None: ...
    def select_many(self, slots: Any) -> npt.NDArray[np.int64]: ...
    def consumer_key_hash_ranges(self) -> list[tuple[int, list[HashRange]]]: ...
    def assignments(self) -> list[tuple[int, int, int]]: ...
    @property
    def key_hash_range(self) -> tuple[int, int]: ...


N = TypeVar("N", bound=_Native)


def _name_of(consumer: object) -> str:
    """The consumer's ``name``; InvalidInputType unless it is a str on a hashable object."""
    try:
        hash(consumer)
    except TypeError:
        raise InvalidInputType(f"a consumer must be hashable, got {type(consumer).__name__}") from None
    name = getattr(consumer, "name", None)
    if not isinstance(name, str):
        raise InvalidInputType(
            f"a consumer must have a str .name, got {type(consumer).__name__} with name {name!r}"
        )
    return name


class _Selector(Generic[C, N]):
    """Consumer objects <-> indices around a native selector state; one lock orders membership changes."""

    __slots__ = ("_by_index", "_config", "_free", "_index", "_lock", "_native")

    def __init__(self, native: N, config: str) -> None:
        self._native = native
        self._config = config  # for repr
        self._index: dict[C, int] = {}
        self._by_index: list[C | None] = []
        self._free: list[int] = []  # a heap of indices freed by removals
        self._lock = threading.Lock()

    def _add(self, consumer: C, ranges: Iterable[tuple[int, int]] | None) -> tuple[Impact[C], int]:
        name = _name_of(consumer)
        with self._lock:
            if consumer in self._index:
                raise InvalidArgument(f"consumer {consumer!r} is already registered")
            index = self._free[0] if self._free else len(self._by_index)
            removed, added = self._native.add_consumer(index, name, ranges)  # raises: nothing changed
            if self._free:
                heapq.heappop(self._free)
            else:
                self._by_index.append(None)
            self._by_index[index] = consumer
            self._index[consumer] = index
            return self._impact(removed, added), index

    def remove_consumer(self, consumer: C) -> Impact[C]:
        """Unregister ``consumer``; returns what moved (its ranges go to the others, or nowhere)."""
        with self._lock:
            index = self.index_of(consumer)
            removed, added = self._native.remove_consumer(index)
            impact = self._impact(removed, added)
            del self._index[consumer]
            self._by_index[index] = None
            heapq.heappush(self._free, index)
            return impact

    def _impact(
        self, removed: list[tuple[int, list[HashRange]]], added: list[tuple[int, list[HashRange]]]
    ) -> Impact[C]:
        lost = {self._consumer(i): tuple(r) for i, r in removed}
        gained = {self._consumer(i): tuple(r) for i, r in added}
        return Impact(removed=lost, added=gained, impacted=frozenset(lost) | frozenset(gained))

    def _consumer(self, index: int) -> C:
        consumer = self._by_index[index]
        assert consumer is not None, f"index {index} has no consumer"  # the native side knows only ours
        return consumer

    def index_of(self, consumer: C) -> int:
        """The index of a registered consumer (``UnknownConsumer`` otherwise)."""
        try:
            return self._index[consumer]
        except KeyError:
            raise UnknownConsumer(f"consumer {consumer!r} is not registered") from None
        except TypeError:
            raise InvalidInputType(f"a consumer must be hashable, got {type(consumer).__name__}") from None

    def select(self, slot: int) -> C | None:
        """The consumer owning ``slot`` (a sticky-key hash slot), or None."""
        index = self._native.select(slot)
        return None if index is None else self._by_index[index]

    def select_many(self, slots: Any) -> npt.NDArray[np.int64]:
        """The owner index of every slot (int64/uint32 numpy without copying, Arrow or ints), -1: none.

        Map indices to consumers with :attr:`consumers_by_index` (whose last item, None, catches -1);
        an index stays valid until its consumer is removed (a later add may reuse it).
        """
        return self._native.select_many(slots)

    @property
    def consumers_by_index(self) -> tuple[C | None, ...]:
        """Consumer of each index (None where free), plus a final None so that index -1 maps to None."""
        return (*self._by_index, None)

    @property
    def consumers(self) -> tuple[C, ...]:
        """The registered consumers, by index."""
        return tuple(c for c in self._by_index if c is not None)

    def consumer_key_hash_ranges(self) -> dict[C, list[HashRange]]:
        """Each consumer's merged inclusive hash ranges, ordered by their first range.

        A consistent-hashing consumer whose points all collided owns nothing and is absent.
        """
        return {self._consumer(i): list(r) for i, r in self._native.consumer_key_hash_ranges()}

    def assignments(self) -> list[tuple[int, int, C]]:
        """The snapshot, Pulsar's ``ConsumerHashAssignmentsSnapshot``: ``(start, end, consumer)`` rows."""
        return [(s, e, self._consumer(i)) for s, e, i in self._native.assignments()]

    @property
    def key_hash_range(self) -> tuple[int, int]:
        """The inclusive slot range this selector's hashing produces (Pulsar's ``getKeyHashRange``)."""
        return self._native.key_hash_range

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, consumer: object) -> bool:
        try:
            return consumer in self._index
        except TypeError:  # unhashable: never registered
            return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._config}, consumers={len(self)})"


class AutoSplitSelector(_Selector[C, _core.AutoSplitSelectorState]):
    """PIP-34's auto-split selector: each joiner halves the first widest range and takes its lower half.

    ``range_size`` (a power of two in 2..65536) is the hash space; ranges read ``[previous bound + 1,
    bound]`` with the top bound ``range_size`` (so the top range reports one value past the last slot, as
    in Pulsar), and slots are ``0..range_size-1``. Adding a consumer when no range is wider than one
    slot raises ``ConsumerAssignError``.
    """

    __slots__ = ()

    def __init__(self, range_size: int = DEFAULT_RANGE_SIZE) -> None:
        super().__init__(_core.AutoSplitSelectorState(range_size), f"range_size={range_size}")

    def add_consumer(self, consumer: C) -> Impact[C]:
        """Register ``consumer``; returns what moved (the lower half of the widest range, to it)."""
        return self._add(consumer, None)[0]

    @property
    def range_size(self) -> int:
        """The size of the hash space."""
        return self._native.range_size


class ConsistentHashingSelector(_Selector[C, _core.ConsistentHashingSelectorState]):
    """Pulsar 4's consistent-hashing selector: ``points_per_consumer`` ring points per consumer.

    Point ``i`` of a consumer is the slot of ``name + NUL + name_index + NUL + i``, where
    ``name_index`` is the lowest index unused by a registered consumer of the same name (so same-name
    consumers differ and a quick rejoin gets its points back). A slot belongs to the first point at or
    after it, wrapping to the first point; slots are 1..65535 (a raw hash beyond wraps too). A consumer
    whose points all collide owns nothing until a point's owner leaves; this is logged as an error
    with Pulsar's advice.
    """

    __slots__ = ()

    def __init__(self, points_per_consumer: int = DEFAULT_POINTS_PER_CONSUMER) -> None:
        super().__init__(
            _core.ConsistentHashingSelectorState(points_per_consumer),
            f"points_per_consumer={points_per_consumer}",
        )

    def add_consumer(self, consumer: C) -> Impact[C]:
        """Register ``consumer``; returns what moved (the arcs its new points cut from their owners)."""
        impact, index = self._add(consumer, None)
        if not self._native.owns_points(index):
            n = self.points_per_consumer
            _log.error(
                "Failed to add consumer %r to the hash ring: all of its %d points collided. Consider "
                "increasing the number of points (%d) per consumer by setting "
                "subscriptionKeySharedConsistentHashingReplicaPoints=%d",
                consumer,
                n,
                n,
                max(int(n * 1.5), n + 1),
            )
        return impact

    @property
    def points_per_consumer(self) -> int:
        """Ring points each consumer adds."""
        return self._native.points_per_consumer

    def points(self, consumer: C) -> list[int]:
        """The consumer's ring points by point index (owned or queued behind a colliding owner)."""
        return self._native.points(self.index_of(consumer))

    def name_index(self, consumer: C) -> int:
        """The consumer's name index (0 unless another consumer of its name was registered first)."""
        return self._native.name_index(self.index_of(consumer))

    def owned_points(self, consumer: C) -> int:
        """How many ring points the consumer owns (0 when all of its points collided)."""
        return self._native.owned_points(self.index_of(consumer))

    @staticmethod
    def point(name: str, name_index: int, i: int) -> int:
        """Ring point ``i`` of a consumer named ``name`` with ``name_index``."""
        return _core.ConsistentHashingSelectorState.point(name, name_index, i)


class ExclusiveRangeSelector(_Selector[C, _core.ExclusiveRangeSelectorState]):
    """The exclusive (``STICKY``) selector: each consumer brings inclusive ``(start, end)`` ranges.

    ``add_consumer`` raises ``ConsumerAssignError`` for no ranges, ``start > end``, overlapping own
    ranges, or a range overlapping another consumer's (the message names that consumer and range;
    :meth:`conflicting_consumer` finds it for Pulsar's ping-the-holder flow). A slot is
    ``hash % range_size``; slots nobody claims select None. Ranges are not checked against
    ``range_size`` (as in Pulsar): a part beyond it is never selected.
    """

    __slots__ = ()

    def __init__(self, range_size: int = DEFAULT_RANGE_SIZE) -> None:
        super().__init__(_core.ExclusiveRangeSelectorState(range_size), f"range_size={range_size}")

    def add_consumer(self, consumer: C, ranges: Iterable[tuple[int, int]]) -> Impact[C]:
        """Register ``consumer`` with its hash ranges; returns what moved (the ranges, to it)."""
        return self._add(consumer, ranges)[0]

    @property
    def range_size(self) -> int:
        """The modulus applied to hashes."""
        return self._native.range_size

    def ranges_of(self, consumer: C) -> list[HashRange]:
        """The ranges the consumer registered, sorted by start."""
        return self._native.ranges_of(self.index_of(consumer))

    def conflicting_consumer(self, ranges: Iterable[tuple[int, int]]) -> tuple[C, HashRange] | None:
        """The first registered consumer holding a range that overlaps ``ranges``, with that range."""
        found = self._native.conflicting_consumer(ranges)
        if found is None:
            return None
        index, held = found
        return self._consumer(index), held
