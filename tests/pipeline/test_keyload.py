"""Key_Shared hash load (``cursorkit.pipeline.keyload``) against a key-by-key brute-force model.

The model hashes every key in pure Python (``selector_model.sticky_key_hash``), applies the slot
functions by hand and asks the pure-Python selector models who owns the slot; the code under test goes
through Arrow, the Rust hashing, slot histograms and ``select_many`` instead.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import selector_model as model
from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.keyshared.hashing import NONE_KEY
from cursorkit.pipeline.keyload import (
    SELECTORS,
    SLOT_COUNT,
    SimulatedConsumer,
    consumer_names,
    even_ranges,
    key_load,
    slot_histograms,
)

# ------------------------------------------------------------------------------------------- model


def range_slot(h: int) -> int:
    return h % 65536 or 1


def consistent_slot(h: int) -> int:
    return h % 65535 + 1


def brute_force(keys: list[bytes | None], consumers: int, points: int) -> dict[str, list[int]]:
    """Messages per consumer under each selector, one key at a time."""
    auto = model.AutoSplitModel(65536)
    ring = model.ConsistentHashingModel(points)
    exclusive = model.ExclusiveModel(65536)
    names = [f"consumer-{i}" for i in range(consumers)]
    size = 65536
    for i, name in enumerate(names):
        assert auto.add(i)
        ring.add(i, name)
        exclusive.add(i, [(i * size // consumers, (i + 1) * size // consumers - 1)])
    tallies = {s: Counter[int]() for s in SELECTORS}
    for key in keys:
        h = model.sticky_key_hash(NONE_KEY if key is None else key)
        for selector, owner in (
            ("auto_split", auto.select(range_slot(h))),
            ("consistent", ring.select(consistent_slot(h))),
            ("exclusive", exclusive.select(range_slot(h))),
        ):
            assert owner is not None
            tallies[selector][owner] += 1
    return {s: [tallies[s][i] for i in range(consumers)] for s in SELECTORS}


def loads_of(keys: pa.Array, consumers: int, points: int = 100) -> dict[str, list[int]]:
    range_counts, consistent_counts = slot_histograms(keys)
    result = key_load(range_counts, consistent_counts, consumers, points_per_consumer=points)
    assert [k.selector for k in result] == list(SELECTORS)
    for k in result:
        assert k.consumers == consumer_names(consumers)
    return {k.selector: k.messages for k in result}


keys_strategy = st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=60)


# ------------------------------------------------------------------------------------------ properties


@given(keys=keys_strategy, consumers=st.integers(1, 6), points=st.integers(1, 12))
def test_matches_brute_force_binary(keys: list[bytes | None], consumers: int, points: int) -> None:
    assert loads_of(pa.array(keys, pa.binary()), consumers, points) == brute_force(keys, consumers, points)


@given(
    keys=st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=40),
    consumers=st.integers(1, 5),
    large=st.booleans(),
)
def test_matches_brute_force_string(keys: list[str | None], consumers: int, large: bool) -> None:
    array = pa.array(keys, pa.large_string() if large else pa.string())
    as_bytes = [None if k is None else k.encode() for k in keys]
    assert loads_of(array, consumers, 100) == brute_force(as_bytes, consumers, 100)


@given(keys=keys_strategy)
def test_histograms_match_slot_functions(keys: list[bytes | None]) -> None:
    range_counts, consistent_counts = slot_histograms(pa.array(keys, pa.binary()))
    assert range_counts.shape == consistent_counts.shape == (SLOT_COUNT,)
    assert range_counts.dtype == consistent_counts.dtype == np.int64
    want_range = np.zeros(SLOT_COUNT, np.int64)
    want_consistent = np.zeros(SLOT_COUNT, np.int64)
    for key in keys:
        h = model.sticky_key_hash(NONE_KEY if key is None else key)
        want_range[range_slot(h)] += 1
        want_consistent[consistent_slot(h)] += 1
    np.testing.assert_array_equal(range_counts, want_range)
    np.testing.assert_array_equal(consistent_counts, want_consistent)


@given(parts=st.lists(keys_strategy, max_size=4))
def test_partition_histograms_add_up(parts: list[list[bytes | None]]) -> None:
    whole = slot_histograms(pa.array([k for p in parts for k in p], pa.binary()))
    summed = [np.zeros(SLOT_COUNT, np.int64), np.zeros(SLOT_COUNT, np.int64)]
    for p in parts:
        r, c = slot_histograms(pa.array(p, pa.binary()))
        summed[0] += r
        summed[1] += c
    np.testing.assert_array_equal(whole[0], summed[0])
    np.testing.assert_array_equal(whole[1], summed[1])
    chunked = slot_histograms(pa.chunked_array([pa.array(p, pa.binary()) for p in parts], pa.binary()))
    np.testing.assert_array_equal(chunked[0], summed[0])
    np.testing.assert_array_equal(chunked[1], summed[1])


def models(consumers: int, points: int) -> dict[str, object]:
    auto = model.AutoSplitModel(65536)
    ring = model.ConsistentHashingModel(points)
    exclusive = model.ExclusiveModel(65536)
    for i in range(consumers):
        auto.add(i)
        ring.add(i, f"consumer-{i}")
        exclusive.add(i, [even_ranges(consumers)[i]])
    return {"auto_split": auto, "consistent": ring, "exclusive": exclusive}


@given(
    consumers=st.integers(1, 9),
    points=st.integers(1, 8),
    extra=st.lists(st.integers(0, SLOT_COUNT - 1), max_size=30),
    data=st.data(),
)
def test_slot_ownership_matches_models(
    consumers: int, points: int, extra: list[int], data: st.DataObject
) -> None:
    """Counts placed on range edges (where an off-by-one shows) and random slots land on the right owner."""
    selectors = models(consumers, points)
    ring = selectors["consistent"]
    assert isinstance(ring, model.ConsistentHashingModel)
    edges = [x for s, e in even_ranges(consumers) for x in (s, e, e + 1)]
    edges += [x for s, e, _ in ring.assignments() for x in (s, e, e + 1)]
    picked = [x for x in edges + extra if 0 <= x < SLOT_COUNT]
    hist = np.zeros(SLOT_COUNT, np.int64)
    for x in picked:
        hist[x] += data.draw(st.integers(1, 1000))
    got = {k.selector: k.messages for k in key_load(hist, hist, consumers, points_per_consumer=points)}
    for name, sel in selectors.items():
        want = [0] * consumers
        for x in np.flatnonzero(hist):
            owner = sel.select(int(x))  # type: ignore[attr-defined]
            if owner is not None:
                want[owner] += int(hist[x])
        assert got[name] == want, name


@given(
    range_counts=st.lists(st.integers(0, 10**6), min_size=20, max_size=20),
    consumers=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_totals_conserved(range_counts: list[int], consumers: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    hist_r = np.zeros(SLOT_COUNT, np.int64)
    hist_c = np.zeros(SLOT_COUNT, np.int64)
    hist_r[rng.integers(1, SLOT_COUNT, size=20)] += range_counts
    hist_c[rng.integers(1, SLOT_COUNT, size=20)] += range_counts[::-1]
    for load in key_load(hist_r, hist_c, consumers):
        assert len(load.messages) == consumers
        assert all(m >= 0 for m in load.messages)
        total = hist_c.sum() if load.selector == "consistent" else hist_r.sum()
        assert sum(load.messages) == total


@given(consumers=st.integers(1, 300))
def test_even_ranges_cover_slots(consumers: int) -> None:
    ranges = even_ranges(consumers)
    assert len(ranges) == consumers
    assert ranges[0][0] == 0
    assert ranges[-1][1] == SLOT_COUNT - 1
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert start == end + 1
    sizes = [e - s + 1 for s, e in ranges]
    assert max(sizes) - min(sizes) <= 1


# ------------------------------------------------------------------------------------------- examples


def test_nulls_hash_as_none_key() -> None:
    with_nulls = slot_histograms(pa.array(["a", None, None], pa.string()))
    spelled = slot_histograms(pa.array(["a", "NONE_KEY", "NONE_KEY"], pa.string()))
    np.testing.assert_array_equal(with_nulls[0], spelled[0])
    np.testing.assert_array_equal(with_nulls[1], spelled[1])
    h = model.sticky_key_hash(NONE_KEY)
    assert with_nulls[0][range_slot(h)] >= 2
    assert with_nulls[1][consistent_slot(h)] >= 2


def test_all_null_column() -> None:
    r, c = slot_histograms(pa.nulls(4))
    h = model.sticky_key_hash(NONE_KEY)
    assert r[range_slot(h)] == 4 and r.sum() == 4
    assert c[consistent_slot(h)] == 4 and c.sum() == 4


@pytest.mark.parametrize(
    "array",
    [
        pa.array(["x", "y", None, "x"]).dictionary_encode(),
        pa.array(["x", "y", None, "x"], pa.string_view()),
        pa.array([b"x", b"y", None, b"x"], pa.binary_view()),
        pa.array([b"x", b"y", None, b"x"], pa.large_binary()),
        pa.chunked_array([["x", "y"], [None, "x"]]),
    ],
    ids=["dictionary", "string_view", "binary_view", "large_binary", "chunked"],
)
def test_other_key_types(array: pa.Array) -> None:
    want = slot_histograms(pa.array(["x", "y", None, "x"], pa.string()))
    got = slot_histograms(array)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_empty_columns() -> None:
    for empty in (pa.array([], pa.string()), pa.chunked_array([], pa.binary())):
        r, c = slot_histograms(empty)
        assert r.shape == (SLOT_COUNT,) and not r.any() and not c.any()
    for load in key_load(*slot_histograms(pa.array([], pa.string())), 3):
        assert load.messages == [0, 0, 0]
        assert load.imbalance == 1.0


def test_one_consumer_gets_everything() -> None:
    keys = pa.array([f"key-{i}" for i in range(500)] + [None] * 7)
    for load in key_load(*slot_histograms(keys), 1):
        assert load.consumers == ["consumer-0"]
        assert load.messages == [507]
        assert load.imbalance == 1.0


def test_load_spreads_over_many_keys() -> None:
    keys = pa.array([f"key-{i}" for i in range(20_000)])
    loads = key_load(*slot_histograms(keys), 4)
    by_name = {k.selector: k for k in loads}
    # Auto-split with 4 consumers gives even quarters; uniform hashes keep every share near 1/4.
    assert by_name["auto_split"].imbalance < 1.1
    assert by_name["exclusive"].imbalance < 1.1
    assert by_name["consistent"].imbalance < 2.0


def test_numpy_and_list_histograms_accepted() -> None:
    hist = [0] * SLOT_COUNT
    hist[5] = 3
    loads = key_load(hist, np.array(hist, dtype=np.uint32), 2)
    assert [sum(k.messages) for k in loads] == [3, 3, 3]


@pytest.mark.parametrize("consumers", [0, -1, SLOT_COUNT + 1])
def test_consumer_count_out_of_range(consumers: int) -> None:
    z = np.zeros(SLOT_COUNT, np.int64)
    with pytest.raises(InvalidArgument, match="consumers"):
        key_load(z, z, consumers)


def test_bad_arguments() -> None:
    z = np.zeros(SLOT_COUNT, np.int64)
    with pytest.raises(InvalidInputType):
        key_load(z, z, True)
    with pytest.raises(InvalidInputType):
        key_load(z, z, 2.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="shape"):
        key_load(z[:100], z, 2)
    with pytest.raises(InvalidArgument, match="negative"):
        key_load(z - 1, z, 2)
    with pytest.raises(InvalidInputType):
        key_load(z.astype(float), z, 2)
    with pytest.raises(InvalidArgument, match="points_per_consumer"):
        key_load(z, z, 2, points_per_consumer=0)
    with pytest.raises(InvalidInputType):
        slot_histograms(pa.array([1, 2, 3]))
    with pytest.raises(InvalidInputType):
        slot_histograms(["a", "b"])  # type: ignore[arg-type]


def test_simulated_consumer_is_a_value() -> None:
    assert SimulatedConsumer("consumer-0") == SimulatedConsumer("consumer-0")
    assert hash(SimulatedConsumer("a")) == hash(SimulatedConsumer("a"))
