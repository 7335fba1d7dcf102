"""Key_Shared selectors: research examples, point naming, collisions, conflicts, bad input, models.

Hypothesis state machines drive each selector and its pure-Python model (``selector_model.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import selector_model as model
from cursorkit import _core, errors
from cursorkit.keyshared.selectors import (
    AutoSplitSelector,
    ConsistentHashingSelector,
    ExclusiveRangeSelector,
    Impact,
)


@dataclass(frozen=True)
class Consumer:
    """A consumer as a dispatcher holds it: hashable, with a name (several may share one)."""

    name: str
    uid: int = 0


def colliding_names(k: int) -> list[str]:
    """``k`` names whose ring point 0 at name index 0 is the same slot (independent murmur3)."""
    seen: dict[int, list[str]] = {}
    i = 0
    while True:
        name = f"n{i}"
        group = seen.setdefault(model.ch_point(name, 0, 0), [])
        group.append(name)
        if len(group) == k:
            return group
        i += 1


COLLIDING = colliding_names(3)


def owners_of(sel: Any, slots: np.ndarray) -> list[Any]:
    """The consumer of each slot through select_many + consumers_by_index (-1 maps to None)."""
    table = np.asarray(sel.consumers_by_index, dtype=object)
    return list(table[sel.select_many(slots)])


def flat(ranges: dict[Any, list[tuple[int, int]]]) -> list[tuple[int, int, Any]]:
    return sorted((s, e, c) for c, rs in ranges.items() for s, e in rs)


# ------------------------------------------------------------------------------ research: auto-split


def test_auto_split_pip34_example() -> None:
    sel: AutoSplitSelector[Consumer] = AutoSplitSelector()
    c1, c2, c3, c4 = (Consumer(f"c{i}") for i in range(1, 5))
    i1 = sel.add_consumer(c1)
    assert i1 == Impact(removed={}, added={c1: ((0, 65536),)}, impacted=frozenset({c1}))
    assert sel.consumer_key_hash_ranges() == {c1: [(0, 65536)]}
    i2 = sel.add_consumer(c2)
    assert sel.consumer_key_hash_ranges() == {c2: [(0, 32768)], c1: [(32769, 65536)]}
    assert i2.removed == {c1: ((0, 32768),)}
    assert i2.added == {c2: ((0, 32768),)}
    assert i2.impacted == {c1, c2}
    i3 = sel.add_consumer(c3)
    assert sel.consumer_key_hash_ranges() == {
        c3: [(0, 16384)],
        c2: [(16385, 32768)],
        c1: [(32769, 65536)],
    }
    assert i3.removed == {c2: ((0, 16384),)}
    i4 = sel.add_consumer(c4)
    assert sel.consumer_key_hash_ranges() == {
        c3: [(0, 16384)],
        c2: [(16385, 32768)],
        c4: [(32769, 49152)],
        c1: [(49153, 65536)],
    }
    assert i4.removed == {c1: ((32769, 49152),)}
    assert sel.select(0) is c3
    assert sel.select(32769) is c4
    assert sel.select(65535) is c1
    assert sel.key_hash_range == (0, 65535)
    assert sel.range_size == 65536
    assert repr(sel) == "AutoSplitSelector(range_size=65536, consumers=4)"


def test_auto_split_remove_rules() -> None:
    sel: AutoSplitSelector[Consumer] = AutoSplitSelector()
    c1, c2, c3, c4 = (Consumer(f"c{i}") for i in range(1, 5))
    for c in (c1, c2, c3, c4):
        sel.add_consumer(c)
    # c1 holds the top bound: c4, just below, takes the top over (merge downward).
    impact = sel.remove_consumer(c1)
    assert impact.removed == {c1: ((49153, 65536),)}
    assert impact.added == {c4: ((49153, 65536),)}
    assert impact.impacted == {c1, c4}
    assert sel.consumer_key_hash_ranges() == {c3: [(0, 16384)], c2: [(16385, 32768)], c4: [(32769, 65536)]}
    # Any other range merges into the next higher one.
    impact = sel.remove_consumer(c3)
    assert impact.added == {c2: ((0, 16384),)}
    assert sel.consumer_key_hash_ranges() == {c2: [(0, 32768)], c4: [(32769, 65536)]}
    # A rejoin splits the widest range again (first of equals: c2's).
    sel.add_consumer(c1)
    assert sel.consumer_key_hash_ranges()[c1] == [(0, 16384)]
    assert sel.index_of(c1) == 0  # the freed index is reused


def test_auto_split_no_more_range() -> None:
    sel: AutoSplitSelector[Consumer] = AutoSplitSelector(range_size=2)
    a, b, c = Consumer("a"), Consumer("b"), Consumer("c")
    sel.add_consumer(a)
    sel.add_consumer(b)
    assert sel.consumer_key_hash_ranges() == {b: [(0, 1)], a: [(2, 2)]}
    with pytest.raises(errors.ConsumerAssignError, match="No more range can be assigned"):
        sel.add_consumer(c)
    assert c not in sel
    assert len(sel) == 2
    assert sel.consumers_by_index == (a, b, None)
    with pytest.raises(errors.InvalidArgument, match="slot 2"):
        sel.select(2)  # slots are 0..range_size-1


@pytest.mark.parametrize("size", [0, 1, 3, 100, 2**17, -4])
def test_auto_split_range_size_must_be_a_power_of_two(size: int) -> None:
    with pytest.raises(errors.InvalidArgument):
        AutoSplitSelector(range_size=size)


# ---------------------------------------------------------------------------- research: consistent


def test_model_murmur_matches_research_vectors() -> None:
    vectors = {
        b"0": (1383186559, 4850),
        b"1": (337030291, 49322),
        b"8": (1032978455, 15786),
        b"key1": (462881061, 7357),
        b"NONE_KEY": (504741539, 56505),
        b"a": (1009084850, 42456),
    }
    for key, (h, slot) in vectors.items():
        assert model.sticky_key_hash(key) == h
        assert h % 65535 + 1 == slot


def test_ch_points_follow_pulsar_4_naming() -> None:
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector(points_per_consumer=3)
    a = Consumer("consumer-a")
    sel.add_consumer(a)
    expected = [model.ch_point("consumer-a", 0, i) for i in range(3)]
    # Computed by hand as well: murmur3 of b"consumer-a\x000\x001", masked, then % 65535 + 1.
    assert expected[1] == (model.murmur3_32(b"consumer-a\x000\x001") & 0x7FFFFFFF) % 65535 + 1
    assert sel.points(a) == expected
    assert ConsistentHashingSelector.point("consumer-a", 0, 2) == expected[2]
    assert sel.name_index(a) == 0
    points = sorted(set(expected))
    assert sel.consumer_key_hash_ranges() == {a: [(1, 65535)]}
    b = Consumer("consumer-b")
    impact = sel.add_consumer(b)
    pb = sorted(set(model.ch_point("consumer-b", 0, i) for i in range(3)))
    ring = sorted([(p, a) for p in points] + [(p, b) for p in pb], key=lambda t: t[0])
    # Point p owns (previous point, p]; the tail after the last point wraps to the first owner.
    want: list[tuple[int, int, Consumer]] = []
    start = 1
    for p, c in ring:
        want.append((start, p, c))
        start = p + 1
    want.append((start, 65535, ring[0][1]))
    assert flat(sel.consumer_key_hash_ranges()) == flat(model.ranges_by_consumer(want))
    assert set(impact.removed) == {a}
    assert impact.added[b] == tuple(model.ranges_by_consumer(want)[b])
    assert sel.key_hash_range == (1, 65535)


def test_ch_separator_prevents_name_digit_collisions() -> None:
    # Pulsar <= 3.2 hashed name + i: "consumer1" + "10" == "consumer11" + "0" (#22050).
    assert ConsistentHashingSelector.point("consumer1", 0, 10) != ConsistentHashingSelector.point(
        "consumer11", 0, 0
    )


def test_ch_same_name_consumers_and_rejoin() -> None:
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector()
    same = [Consumer("worker", uid) for uid in range(3)]
    for c in same:
        sel.add_consumer(c)
    assert [sel.name_index(c) for c in same] == [0, 1, 2]
    assert sel.points(same[1]) == [model.ch_point("worker", 1, i) for i in range(100)]
    before = sel.consumer_key_hash_ranges()
    sel.remove_consumer(same[1])
    again = Consumer("worker", 99)
    sel.add_consumer(again)
    assert sel.name_index(again) == 1  # the lowest free index: the same points as the leaver
    after = sel.consumer_key_hash_ranges()
    assert after[again] == before[same[1]]
    assert after[same[0]] == before[same[0]]


def test_ch_collisions_fifo_and_promotion() -> None:
    a, b, c = (Consumer(n) for n in COLLIDING)
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector(points_per_consumer=1)
    p = model.ch_point(a.name, 0, 0)
    sel.add_consumer(a)
    assert sel.add_consumer(b) == Impact(removed={}, added={}, impacted=frozenset())
    sel.add_consumer(c)
    assert sel.owned_points(a) == 1
    assert sel.owned_points(b) == sel.owned_points(c) == 0
    assert sel.consumer_key_hash_ranges() == {a: [(1, 65535)]}
    assert sel.select(p) is a
    impact = sel.remove_consumer(a)  # the queue head, b, takes the point over
    assert impact.removed == {a: ((1, 65535),)}
    assert impact.added == {b: ((1, 65535),)}
    assert sel.select(p) is b
    sel.remove_consumer(b)
    assert sel.select(7) is c
    sel.remove_consumer(c)
    assert sel.select(7) is None
    assert sel.consumer_key_hash_ranges() == {}


def test_ch_all_points_colliding_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    a, b = Consumer(COLLIDING[0]), Consumer(COLLIDING[1])
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector(points_per_consumer=1)
    sel.add_consumer(a)
    with caplog.at_level(logging.ERROR, logger="cursorkit.keyshared.selectors"):
        sel.add_consumer(b)
    assert "all of its 1 points collided" in caplog.text
    assert "subscriptionKeySharedConsistentHashingReplicaPoints=2" in caplog.text
    assert b in sel
    assert b not in sel.consumer_key_hash_ranges()


def test_ch_wraps_raw_hashes_and_slot_zero() -> None:
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector(points_per_consumer=4)
    a, b = Consumer("x"), Consumer("y")
    sel.add_consumer(a)
    sel.add_consumer(b)
    first = min(sel.points(a) + sel.points(b))
    first_owner = sel.select(first)
    assert sel.select(0) is first_owner
    assert sel.select(2**40) is first_owner  # beyond the ring: the first point
    assert owners_of(sel, np.array([0, 65535, 70000], dtype=np.int64)) == [
        first_owner,
        sel.select(65535),
        first_owner,
    ]


# -------------------------------------------------------------------------------- exclusive


def test_exclusive_conflicts_name_the_holder() -> None:
    sel: ExclusiveRangeSelector[Consumer] = ExclusiveRangeSelector()
    alpha, beta = Consumer("alpha"), Consumer("beta")
    impact = sel.add_consumer(alpha, [(100, 199), (0, 9)])
    assert impact.added == {alpha: ((0, 9), (100, 199))}
    assert sel.ranges_of(alpha) == [(0, 9), (100, 199)]
    cases = [
        ([], "Ranges for KeyShared policy must not be empty."),
        ([(300, 299)], r"Fixed hash range start > end for range: \[300,299\]"),
        ([(400, 500), (300, 400)], r"Consumer's own ranges conflict: \[300,400\] overlaps with \[400,500\]"),
        (
            [(150, 250)],
            r'Range conflict with consumer "alpha" \(id 0\): \[150,250\] overlaps its range \[100,199\]',
        ),
        ([(9, 9)], r'Range conflict with consumer "alpha" \(id 0\): \[9,9\] overlaps its range \[0,9\]'),
    ]
    for ranges, message in cases:
        with pytest.raises(errors.ConsumerAssignError, match=message):
            sel.add_consumer(beta, ranges)
        assert beta not in sel
    assert sel.conflicting_consumer([(10, 99), (199, 300)]) == (alpha, (100, 199))
    assert sel.conflicting_consumer([(10, 99)]) is None
    sel.add_consumer(beta, [(10, 99)])
    assert sel.consumer_key_hash_ranges() == {alpha: [(0, 9), (100, 199)], beta: [(10, 99)]}
    assert sel.select(50) is beta
    assert sel.select(65536 + 50) is beta  # hash % range_size
    assert sel.select(200) is None
    impact = sel.remove_consumer(alpha)
    assert impact.removed == {alpha: ((0, 9), (100, 199))}
    assert impact.added == {}
    assert sel.select(5) is None


def test_exclusive_touching_ranges_merge_in_reports() -> None:
    sel: ExclusiveRangeSelector[Consumer] = ExclusiveRangeSelector(range_size=100)
    a = Consumer("a")
    sel.add_consumer(a, ((0, 9), (10, 19), (90, 120)))
    assert sel.consumer_key_hash_ranges() == {a: [(0, 19), (90, 120)]}
    assert sel.select(99) is a
    assert sel.select(105) is a  # 105 % 100 = 5
    assert sel.key_hash_range == (0, 99)


# -------------------------------------------------------------------------------- bad input


def test_bad_input_is_typed_and_changes_nothing() -> None:
    sel: AutoSplitSelector[Any] = AutoSplitSelector()
    a = Consumer("a")
    sel.add_consumer(a)
    with pytest.raises(errors.InvalidArgument, match="already registered"):
        sel.add_consumer(Consumer("a"))  # equal: the same consumer
    with pytest.raises(errors.UnknownConsumer) as e:
        sel.remove_consumer(Consumer("b"))
    assert isinstance(e.value, KeyError)
    with pytest.raises(errors.InvalidInputType, match="str .name"):
        sel.add_consumer(object())
    with pytest.raises(errors.InvalidInputType, match="hashable"):
        sel.add_consumer([1, 2])
    with pytest.raises(errors.InvalidInputType):
        sel.select("3")
    with pytest.raises(errors.InvalidInputType):
        sel.select(1.5)
    with pytest.raises(errors.InvalidArgument):
        sel.select(-1)
    with pytest.raises(errors.InvalidArgument, match="at index 1"):
        sel.select_many(np.array([0, -2], dtype=np.int64))
    with pytest.raises(errors.InvalidArgument, match="at index 2"):
        sel.select_many([0, 1, 65536])
    with pytest.raises(errors.InvalidInputType):
        sel.select_many(np.array([0.5]))
    assert [1, 2] not in sel
    assert sel.consumers == (a,)
    assert sel.consumer_key_hash_ranges() == {a: [(0, 65536)]}

    ex: ExclusiveRangeSelector[Consumer] = ExclusiveRangeSelector()
    for bad in (5, "ab", [(1,)], [(1, 2, 3)], [("a", 2)], [(1.0, 2)]):
        with pytest.raises(errors.InvalidInputType):
            ex.add_consumer(a, bad)  # type: ignore[arg-type]
    for bad_value in ([(-1, 5)], [(0, 2**32)]):
        with pytest.raises(errors.InvalidArgument):
            ex.add_consumer(a, bad_value)
    assert len(ex) == 0
    with pytest.raises(errors.UnknownConsumer):
        ex.ranges_of(a)
    with pytest.raises(errors.InvalidArgument):
        ExclusiveRangeSelector(range_size=0)
    with pytest.raises(errors.InvalidArgument):
        ExclusiveRangeSelector(range_size=65537)
    with pytest.raises(errors.InvalidInputType):
        ExclusiveRangeSelector(range_size="big")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        ConsistentHashingSelector(points_per_consumer=0)
    ch: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector()
    with pytest.raises(errors.UnknownConsumer):
        ch.points(a)


def test_native_ids_are_checked() -> None:
    native = _core.AutoSplitSelectorState(64)
    with pytest.raises(errors.InvalidArgument):
        native.add_consumer(2**31, "x")
    with pytest.raises(errors.InvalidArgument):
        native.add_consumer(-1, "x")
    with pytest.raises(errors.InvalidInputType):
        native.add_consumer(1, b"x")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument, match="assigns hash ranges itself"):
        native.add_consumer(1, "x", [(0, 5)])
    with pytest.raises(errors.UnknownConsumer):
        native.remove_consumer(1)
    assert native.add_consumer(1, "x") == ([], [(1, [(0, 64)])])
    assert 1 in native and 2 not in native and "1" not in native
    assert native.assignments() == [(0, 64, 1)]


# ------------------------------------------------------------------------------ select_many inputs


@pytest.mark.parametrize("kind", ["int64", "uint32", "int32", "list", "big"])
def test_select_many_inputs(kind: str) -> None:
    sel: ConsistentHashingSelector[Consumer] = ConsistentHashingSelector()
    consumers = [Consumer(f"c{i}") for i in range(5)]
    for c in consumers:
        sel.add_consumer(c)
    sel.remove_consumer(consumers[2])  # a free index in the middle
    slots = np.arange(0, 65536, 7, dtype=np.int64)
    if kind == "big":
        slots = np.tile(slots, 3)  # beyond the GIL-held size
    arg: Any = {
        "int64": slots,
        "uint32": slots.astype(np.uint32),
        "int32": slots.astype(np.int32),
        "list": slots.tolist(),
        "big": slots,
    }[kind]
    got = sel.select_many(arg)
    assert got.dtype == np.int64
    assert owners_of(sel, slots) == [sel.select(int(s)) for s in slots]
    assert set(got.tolist()) == {0, 1, 3, 4}
    assert sel.consumers_by_index[2] is None
    assert sel.consumers_by_index[-1] is None


def test_select_many_none_owner_is_minus_one() -> None:
    sel: ExclusiveRangeSelector[Consumer] = ExclusiveRangeSelector(range_size=16)
    a = Consumer("a")
    sel.add_consumer(a, [(4, 7)])
    assert sel.select_many(np.arange(10, dtype=np.uint32)).tolist() == [-1] * 4 + [0] * 4 + [-1] * 2
    assert owners_of(sel, np.arange(10)) == [None] * 4 + [a] * 4 + [None] * 2


# ------------------------------------------------------------------------------- state machines


NAMES = st.sampled_from(["a", "b", "consumer1", "consumer11", "", *COLLIDING])


class _SelectorMachine(RuleBasedStateMachine):
    """Shared checks: assignments, ranges, impacts and selection agree with the model."""

    sel: Any
    model: Any
    hash_range: tuple[int, int]

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, Consumer] = {}
        self.gone: dict[int, Consumer] = {}  # the consumer the last removal took out
        self.next_uid = 0

    def index(self, c: Consumer) -> int:
        return int(self.sel.index_of(c))

    def model_assignments(self) -> list[tuple[int, int, Consumer]]:
        return [(s, e, self.live[c]) for s, e, c in self.model.assignments()]

    def check_impact(self, impact: Impact[Consumer], before: list[model.Assignment]) -> None:
        removed, added = model.diff(before, self.model.assignments())
        known = {**self.live, **self.gone}
        assert impact.removed == {known[c]: tuple(r) for c, r in removed.items()}
        assert impact.added == {known[c]: tuple(r) for c, r in added.items()}
        assert impact.impacted == set(impact.removed) | set(impact.added)

    def remove_some(self, pick: int) -> None:
        uid = sorted(self.live)[pick % len(self.live)]
        c = self.live[uid]
        before = self.model.assignments()
        self.model.remove(uid)
        self.gone = {uid: c}
        impact = self.sel.remove_consumer(c)
        del self.live[uid]
        self.check_impact(impact, before)
        with pytest.raises(errors.UnknownConsumer):
            self.sel.remove_consumer(c)

    @rule(slot=st.integers(0, 70_000))
    def select(self, slot: int) -> None:
        lo, hi = self.hash_range
        if slot > hi and isinstance(self.sel, AutoSplitSelector):
            with pytest.raises(errors.InvalidArgument):
                self.sel.select(slot)
            return
        want = self.model.select(slot)
        assert self.sel.select(slot) == (None if want is None else self.live[want])

    @invariant()
    def agrees_with_model(self) -> None:
        assert self.sel.assignments() == self.model_assignments()
        ranges = self.sel.consumer_key_hash_ranges()
        want = {self.live[c]: r for c, r in model.ranges_by_consumer(self.model.assignments()).items()}
        assert ranges == want
        assert list(ranges) == list(want)  # ordered by first range
        lo, hi = self.hash_range
        slots = np.arange(lo, hi + 1, dtype=np.int64)
        got = self.sel.select_many(slots)
        by_index = [(s, e, self.index(self.live[c])) for s, e, c in self.model.assignments()]
        expect = model.owners(by_index, hi + 2)
        assert np.array_equal(got, expect[lo : hi + 1])
        assert len(self.sel) == len(self.live)


class AutoSplitMachine(_SelectorMachine):
    @initialize(log_size=st.integers(1, 16))
    def setup(self, log_size: int) -> None:
        self.sel = AutoSplitSelector(range_size=2**log_size)
        self.model = model.AutoSplitModel(2**log_size)
        self.hash_range = (0, 2**log_size - 1)

    @rule(name=NAMES)
    def add(self, name: str) -> None:
        self.next_uid += 1
        c = Consumer(name, self.next_uid)
        before = self.model.assignments()
        if not self.model.add(self.next_uid):
            with pytest.raises(errors.ConsumerAssignError):
                self.sel.add_consumer(c)
            return
        self.live[self.next_uid] = c
        self.gone = {}
        self.check_impact(self.sel.add_consumer(c), before)

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 1000))
    def remove(self, pick: int) -> None:
        self.remove_some(pick)

    @invariant()
    def partitions_the_space(self) -> None:
        spans = sorted((s, e) for rs in self.sel.consumer_key_hash_ranges().values() for s, e in rs)
        if self.live:
            assert spans[0][0] == 0 and spans[-1][1] == self.model.size
            assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:], strict=False))


class ConsistentHashingMachine(_SelectorMachine):
    @initialize(points=st.sampled_from([1, 2, 3, 7, 100]))
    def setup(self, points: int) -> None:
        self.sel = ConsistentHashingSelector(points_per_consumer=points)
        self.model = model.ConsistentHashingModel(points)
        self.hash_range = model.CH_RANGE

    @rule(name=NAMES)
    def add(self, name: str) -> None:
        self.next_uid += 1
        c = Consumer(name, self.next_uid)
        before = self.model.assignments()
        self.model.add(self.next_uid, name)
        self.live[self.next_uid] = c
        self.gone = {}
        self.check_impact(self.sel.add_consumer(c), before)
        assert self.sel.name_index(c) == self.model.name_index(self.next_uid)
        assert self.sel.owned_points(c) == self.model.owned_points(self.next_uid)

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 1000))
    def remove(self, pick: int) -> None:
        self.remove_some(pick)

    @invariant()
    def partitions_the_ring(self) -> None:
        spans = sorted((s, e) for rs in self.sel.consumer_key_hash_ranges().values() for s, e in rs)
        if self.live:
            assert spans[0][0] == 1 and spans[-1][1] == 65535
            assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:], strict=False))
        else:
            assert spans == []


RANGE = st.tuples(st.integers(0, 140), st.integers(-2, 25)).map(lambda t: (t[0], max(0, t[0] + t[1])))


class ExclusiveMachine(_SelectorMachine):
    @initialize(size=st.integers(1, 130))
    def setup(self, size: int) -> None:
        self.sel = ExclusiveRangeSelector(range_size=size)
        self.model = model.ExclusiveModel(size)
        self.hash_range = (0, size - 1)

    @rule(name=NAMES, ranges=st.lists(RANGE, max_size=4))
    def add(self, name: str, ranges: list[tuple[int, int]]) -> None:
        self.next_uid += 1
        c = Consumer(name, self.next_uid)
        problem = self.model.problem(ranges)
        before = self.model.assignments()
        if problem is not None:
            with pytest.raises(errors.ConsumerAssignError, match=problem.replace("(", r"\(")):
                self.sel.add_consumer(c, ranges)
            return
        self.model.add(self.next_uid, ranges)
        self.live[self.next_uid] = c
        self.gone = {}
        self.check_impact(self.sel.add_consumer(c, ranges), before)

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 1000))
    def remove(self, pick: int) -> None:
        self.remove_some(pick)


AutoSplitMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
ConsistentHashingMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
ExclusiveMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestAutoSplit = AutoSplitMachine.TestCase
TestConsistentHashing = ConsistentHashingMachine.TestCase
TestExclusive = ExclusiveMachine.TestCase


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6), st.integers(0, 3)), max_size=8))
def test_exclusive_impact_matches_slot_diff(spec: list[tuple[int, int, int]]) -> None:
    """Add then remove consumers with arbitrary ranges; each impact equals the slot-by-slot diff."""
    sel: ExclusiveRangeSelector[Consumer] = ExclusiveRangeSelector(range_size=64)
    m = model.ExclusiveModel(64)
    people = {i: Consumer(f"p{i}") for i in range(4)}
    for start, width, who in spec:
        ranges = [(start, start + width)]
        if who in m.ranges or m.problem(ranges):
            continue
        before = m.assignments()
        m.add(who, ranges)
        impact = sel.add_consumer(people[who], ranges)
        removed, added = model.diff(before, m.assignments())
        assert impact.removed == {people[c]: tuple(r) for c, r in removed.items()}
        assert impact.added == {people[c]: tuple(r) for c, r in added.items()}
    for who in sorted(m.ranges):
        before = m.assignments()
        m.remove(who)
        impact = sel.remove_consumer(people[who])
        removed, _ = model.diff(before, m.assignments())
        assert impact.removed == {people[c]: tuple(r) for c, r in removed.items()}
