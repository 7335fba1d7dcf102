"""ledger_to_bytes is byte-identical to pyroaring's run-optimised portable serialisation."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyroaring
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import RangeSet

LEDGER = 42
C = 65536  # values per roaring container


def reference_bytes(entries: Iterable[int]) -> bytes:
    """pyroaring: BitMap(entries); run_optimize(); serialize()."""
    bm = pyroaring.BitMap(entries)
    bm.run_optimize()
    return bytes(bm.serialize())


def ledger_with(entries: np.ndarray) -> RangeSet:
    """A RangeSet whose ledger LEDGER holds the entries (plus a neighbour ledger)."""
    rs = RangeSet()
    rs.add_many(np.full(len(entries), LEDGER, dtype=np.int64), entries.astype(np.int64))
    rs.add(LEDGER + 1, 7)
    return rs


def assert_golden(rs: RangeSet, entries: np.ndarray) -> None:
    """Our bytes equal pyroaring's, and pyroaring reads them back as the same set."""
    ours = rs.ledger_to_bytes(LEDGER)
    assert isinstance(ours, bytes)
    assert ours == reference_bytes(entries.tolist())
    back = pyroaring.BitMap.deserialize(ours)
    assert back == pyroaring.BitMap(entries.tolist())


rng = np.random.default_rng(7)
CASES: dict[str, np.ndarray] = {
    "single": np.array([5]),
    "zero": np.array([0]),
    "dense_runs": np.concatenate([np.arange(0, 1000), np.arange(5000, 9000)]),
    "sparse": np.array([1, 5, 100, 4000, 60000]),
    "every_other": np.arange(0, 20_000, 2),
    "array_4096": np.arange(0, 8192, 2),
    "bitmap_4097": np.arange(0, 8194, 2),
    "full_container": np.arange(C, 2 * C),
    "full_container_minus_one": np.concatenate([np.arange(C, 2 * C - 10), [2 * C - 1]]),
    "random_bitmap_container": np.unique(rng.integers(0, C, size=30_000)),
    "mix_several_containers": np.unique(
        np.concatenate(
            [
                np.arange(0, 3000),  # run
                rng.integers(C, 2 * C, size=500),  # array
                rng.integers(2 * C, 3 * C, size=20_000),  # bitmap
                np.arange(3 * C, 4 * C),  # full
                np.arange(5 * C + 10, 5 * C + 20),  # small run after a missing key
                [2**32 - 1],
            ]
        )
    ),
    "top_container_full": np.arange(2**32 - C, 2**32),
    "max_value": np.array([0, 2**32 - 1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_bytes(name: str) -> None:
    """Dense runs, sparse values, full and mixed containers serialise like CRoaring."""
    entries = CASES[name].astype(np.int64)
    assert_golden(ledger_with(entries), entries)


@pytest.mark.parametrize(
    "runs",
    [[(0, 2)], [(10, 12)], [(0, 1), (5, 7)], [(0, 2), (10, 11)], [(C, C + 2)]],
    ids=["3", "3-offset", "2+3", "3+2", "3-second-container"],
)
def test_run_array_tie_prefers_array(runs: list[tuple[int, int]]) -> None:
    """At a run/array size tie (2 + 4*runs == 2*card) the bytes are BitMap(entries)'s array form."""
    rs = RangeSet()
    for first, last in runs:
        rs.add_open_closed(LEDGER, first - 1, LEDGER, last)
    entries = np.array([e for first, last in runs for e in range(first, last + 1)], dtype=np.int64)
    assert_golden(rs, entries)


def test_absent_ledger_is_none() -> None:
    """A ledger with no entries has no bitmap."""
    rs = ledger_with(np.array([1, 2, 3]))
    assert rs.ledger_to_bytes(LEDGER + 2) is None
    rs.remove_at_most(LEDGER, 3)
    assert rs.ledger_to_bytes(LEDGER) is None


def test_after_removals_and_range_adds() -> None:
    """The canonical form does not depend on the history that produced the set."""
    rs = RangeSet()
    rs.add_open_closed(LEDGER, -1, LEDGER, 3 * C)  # run containers
    for e in range(0, 3 * C, 3):  # punch holes: bitmap containers
        rs.remove(LEDGER, e)
    rs.remove_open_closed(LEDGER, C - 1, LEDGER, 2 * C - 1)  # empty the middle container
    rs.remove_open_closed(LEDGER, 2 * C + 100, LEDGER, 3 * C - 100)  # shrink to an array
    entries = np.array(
        [
            e
            for e in range(3 * C + 1)
            if (e % 3 or e == 3 * C) and not C <= e < 2 * C and not 2 * C + 100 < e <= 3 * C - 100
        ],
        dtype=np.int64,
    )
    assert rs.total_cardinality() == len(entries)
    assert_golden(rs, entries)
    rs.compact()
    assert_golden(rs, entries)


def test_after_round_trips() -> None:
    """Bitmaps restored from to_bytes and from_long_list_map serialise identically."""
    entries = CASES["mix_several_containers"]
    small = entries[entries < 3 * C]
    rs = ledger_with(small.astype(np.int64))
    assert_golden(RangeSet.from_bytes(rs.to_bytes()), small)
    assert_golden(RangeSet.from_long_list_map(rs.to_long_list_map()), small)


@given(
    st.lists(
        st.one_of(
            st.integers(0, 3 * C),
            st.integers(0, 300),
            st.integers(2**32 - 300, 2**32 - 1),
        ),
        max_size=300,
    ),
    st.lists(st.tuples(st.integers(0, 3 * C), st.integers(0, 5000)), max_size=4),
)
def test_golden_random(points: list[int], runs: list[tuple[int, int]]) -> None:
    """Random mixes of points and runs match pyroaring byte for byte."""
    entries = set(points)
    rs = RangeSet()
    for e in points:
        rs.add(LEDGER, e)
    for start, length in runs:
        rs.add_open_closed(LEDGER, start - 1, LEDGER, start + length)
        entries.update(range(start, start + length + 1))
    if not entries:
        assert rs.ledger_to_bytes(LEDGER) is None
        return
    assert_golden(rs, np.array(sorted(entries), dtype=np.int64))
