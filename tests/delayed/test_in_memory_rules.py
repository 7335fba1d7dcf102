"""InMemoryTrackerState: Pulsar's in-memory tracker rules with an injected clock, against a model."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cursorkit import errors
from cursorkit._core import InMemoryTrackerState
from delay_queue_model import MAX_ENTRY, MAX_I64, ModelTracker, precision_bits
from fuzz_budget import runs


class Clock:
    """A settable clock (ms)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.now


def tracker(now: int = 0, **config: Any) -> tuple[InMemoryTrackerState, Clock]:
    clock = Clock(now)
    return InMemoryTrackerState(clock=clock, **config), clock


def scheduled(t: InMemoryTrackerState, n: int) -> list[tuple[int, int]]:
    rows = t.get_scheduled_messages(n)
    assert rows.dtype == np.int64
    assert rows.ndim == 2
    assert rows.shape[1] == 2
    return [(int(a), int(b)) for a, b in rows.tolist()]


# -- the rules, one by one ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tick", "precision"),
    [(0, 1), (1, 1), (2, 2), (8, 8), (100, 64), (500, 256), (511, 256), (512, 512), (1000, 512)],
)
def test_precision_table(tick: int, precision: int) -> None:
    t, _ = tracker(tick_time_ms=tick)
    assert t.precision_ms == precision
    assert 1 << precision_bits(tick) == precision


def test_defaults_are_pulsars() -> None:
    t = InMemoryTrackerState()
    assert (t.tick_time_ms, t.strict, t.fixed_delay_lookahead, t.precision_ms) == (1000, False, 50_000, 512)
    assert (t.number_of_delayed_messages, t.highest_delivery_time, t.closed) == (0, 0, False)
    assert abs(t.now() - time.time() * 1000) < 5_000  # the system clock when none is given


def test_rounds_down_and_releases_a_whole_cell() -> None:
    t, clock = tracker(1_000)
    assert t.add_message(7, 0, 10_000)  # stored 9_728: cell 9_728..=10_239
    assert t.next_delivery_time() == 9_728
    clock.now = 9_238  # cutoff 10_238: the cell's end 10_239 is not due yet
    assert not t.has_message_available()
    assert scheduled(t, 10) == []
    clock.now = 9_239
    assert t.has_message_available()
    assert scheduled(t, 10) == [(7, 0)]


def test_strict_rounds_up_and_is_never_early() -> None:
    t, clock = tracker(0, strict=True)
    assert t.add_message(7, 0, 60_400)
    assert t.add_message(7, 1, 61_000)
    assert t.add_message(7, 2, MAX_I64 - 10)
    assert t.next_delivery_time() == 60_416
    clock.now = 60_415
    assert not t.has_message_available()
    clock.now = 60_416
    assert scheduled(t, 10) == [(7, 0)]
    assert t.next_delivery_time() == 61_440  # 61_000 rounded up
    clock.now = 61_439
    assert scheduled(t, 10) == []
    clock.now = MAX_I64 - 1
    assert scheduled(t, 10) == [(7, 1)]
    assert t.next_delivery_time() == MAX_I64  # saturated, never early
    clock.now = MAX_I64
    assert scheduled(t, 10) == [(7, 2)]


def test_refusals_are_counted_and_clear_the_fixed_delay() -> None:
    t, clock = tracker(5_000, fixed_delay_lookahead=1)
    assert not t.add_message(1, 0, -1)
    assert not t.add_message(1, 1, 6_000)  # exactly at the cutoff
    assert t.add_message(1, 2, 6_001)
    assert t.add_message(1, 2, 7_000)  # held already: True, stored once
    assert t.number_of_delayed_messages == 1
    assert t.counters() == {
        "added": 1,
        "duplicates": 1,
        "rejected_due": 1,
        "rejected_negative": 1,
        "delivered": 0,
    }
    assert not t.should_pause_all_deliveries()  # refusals cleared the fixed-delay flag
    clock.now = 10**6
    assert scheduled(t, 5) == [(1, 2)]
    assert t.counters()["delivered"] == 1


def test_strict_cutoff_is_now() -> None:
    t, _ = tracker(5_000, strict=True)
    assert not t.add_message(1, 0, 5_000)
    assert t.add_message(1, 0, 5_001)


def test_fixed_delay_detection_and_pause() -> None:
    t, clock = tracker(0, tick_time_ms=1_000, fixed_delay_lookahead=3)
    for entry, at in enumerate([10_000, 10_500, 9_500]):  # 9_500 is not below 10_500 - 1_000
        assert t.add_message(1, entry, at)
    assert t.highest_delivery_time == 10_500
    assert t.should_pause_all_deliveries()
    clock.now = 9_000  # 9_216 (9_500 rounded down) is now due
    assert not t.should_pause_all_deliveries()
    clock.now = 0
    assert t.add_message(1, 3, 9_499)  # below 10_500 - 1_000: not a fixed delay any more
    assert not t.should_pause_all_deliveries()
    clock.now = 10**6
    assert len(scheduled(t, 100)) == 4
    assert t.highest_delivery_time == 0  # emptied: start over
    clock.now = 0
    for entry in range(3):
        assert t.add_message(2, entry, 20_000)
    assert t.should_pause_all_deliveries()


def test_lookahead_zero_never_pauses() -> None:
    t, _ = tracker(0, fixed_delay_lookahead=0)
    for entry in range(10):
        t.add_message(1, entry, 50_000)
    assert not t.should_pause_all_deliveries()


def test_scheduled_sorted_by_position_and_limited() -> None:
    t, clock = tracker(0, tick_time_ms=1)
    for ledger, entry, at in [(5, 1, 100), (2, 9, 101), (2, 3, 102), (9, 0, 500)]:
        assert t.add_message(ledger, entry, at)
    clock.now = 200
    assert scheduled(t, 2) == [(2, 9), (5, 1)]  # the two earliest, sorted by position
    assert scheduled(t, 0) == []
    assert t.get_scheduled_messages(0).shape == (0, 2)
    assert scheduled(t, 10) == [(2, 3)]
    assert t.number_of_delayed_messages == 1
    assert t.contains_message(9, 0)
    assert not t.contains_message(2, 3)


def test_reset_tick_time_keeps_the_precision() -> None:
    t, _ = tracker(0, tick_time_ms=1_000)
    t.reset_tick_time(8)
    assert (t.tick_time_ms, t.precision_ms) == (8, 512)
    assert not t.add_message(1, 0, 8)  # the new tick sets the cutoff
    assert t.add_message(1, 0, 9)
    with pytest.raises(errors.InvalidArgument):
        t.reset_tick_time(-1)
    assert t.tick_time_ms == 8


def test_add_many_mask_matches_single_adds() -> None:
    ledgers = [1, 1, 2, 2, 3, 1]
    entries = [0, 1, 0, 0, 7, 0]
    ats = [5_000, -3, 1_000, 9_000, 2_000, 6_000]
    bulk, _ = tracker(0, fixed_delay_lookahead=2)
    mask = bulk.add_many(np.array(ledgers), np.array(entries), np.array(ats))
    assert mask.dtype == np.bool_
    assert mask.tolist() == [True, False, False, True, True, True]
    single, _ = tracker(0, fixed_delay_lookahead=2)
    assert [single.add_message(*row) for row in zip(ledgers, entries, ats, strict=True)] == mask.tolist()
    assert bulk.counters() == single.counters()
    assert bulk.should_pause_all_deliveries() == single.should_pause_all_deliveries()
    assert bulk.number_of_delayed_messages == 3


def test_bad_input_is_typed_and_changes_nothing() -> None:
    t, clock = tracker(0)
    t.add_message(1, 1, 10_000)
    before = (t.number_of_delayed_messages, t.counters())
    with pytest.raises(errors.InvalidArgument):
        t.add_message(1, 2, 2**63)
    with pytest.raises(errors.InvalidPosition):
        t.add_message(-1, 2, 10_000)
    with pytest.raises(errors.InvalidPosition):
        t.add_message(1, MAX_ENTRY + 1, 10_000)
    with pytest.raises(errors.InvalidPosition):
        t.add_message(2**63, 0, 10_000)
    with pytest.raises(errors.InvalidInputType):
        t.add_message(1, 2.0, 10_000)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        t.add_message(1, 2, "10000")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidPosition, match="index 1"):
        t.add_many([1, 1], [5, -1], [10_000, 10_000])
    with pytest.raises(errors.InvalidArgument):
        t.add_many([1], [5], np.array([2**63], dtype=np.uint64))
    with pytest.raises(errors.LengthMismatch):
        t.add_many([1, 1], [5], [10_000, 10_000])
    with pytest.raises(errors.InvalidArgument):
        t.get_scheduled_messages(-1)
    with pytest.raises(errors.InvalidInputType):
        t.get_scheduled_messages(None)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidPosition):
        t.contains_message(1, -1)
    assert (t.number_of_delayed_messages, t.counters()) == before
    assert clock.now == 0


def test_constructor_checks_its_config() -> None:
    with pytest.raises(errors.InvalidArgument):
        InMemoryTrackerState(tick_time_ms=-1)
    with pytest.raises(errors.InvalidArgument):
        InMemoryTrackerState(fixed_delay_lookahead=-1)
    with pytest.raises(errors.InvalidArgument):
        InMemoryTrackerState(tick_time_ms=2**63)
    with pytest.raises(errors.InvalidInputType):
        InMemoryTrackerState(strict=1)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        InMemoryTrackerState(tick_time_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputType):
        InMemoryTrackerState(clock=12345)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        InMemoryTrackerState(1000)  # type: ignore[misc]


class Boom(Exception):
    pass


def test_clock_errors() -> None:
    def boom() -> int:
        raise Boom("clock down")

    t = InMemoryTrackerState(clock=boom)
    with pytest.raises(Boom):
        t.add_message(1, 1, 10)
    with pytest.raises(Boom):
        t.has_message_available()
    assert t.next_delivery_time() is None  # needs no clock
    for bad in ("5", 5.0, None, True):
        t = InMemoryTrackerState(clock=lambda bad=bad: bad)
        with pytest.raises(errors.InvalidInputType):
            t.now()
    t = InMemoryTrackerState(clock=lambda: 2**64)
    with pytest.raises(errors.InvalidArgument):
        t.get_scheduled_messages(1)
    t = InMemoryTrackerState(clock=lambda: np.int64(42))
    assert t.now() == 42


def test_clock_read_once_per_call_and_may_reenter() -> None:
    t, clock = tracker(0)
    t.add_message(1, 1, 10_000)
    t.has_message_available()
    t.get_scheduled_messages(5)
    t.add_many([1], [2], [20_000])
    assert clock.calls == 4
    t.next_delivery_time()
    t.contains_message(1, 2)
    assert clock.calls == 4

    holder: list[InMemoryTrackerState] = []

    def reentrant() -> int:
        if holder:
            holder[0].number_of_delayed_messages  # noqa: B018 - the clock reads the tracker
        return 0

    holder.append(InMemoryTrackerState(clock=reentrant))
    assert holder[0].add_message(1, 1, 10_000)


def test_close_frees_and_refuses_further_calls() -> None:
    t, clock = tracker(0)
    t.add_many(np.zeros(10_000, dtype=np.int64), np.arange(10_000), np.full(10_000, 50_000))
    assert t.buffer_memory_usage > 0
    calls = clock.calls
    t.close()
    assert t.closed
    assert t.number_of_delayed_messages == 0
    assert t.buffer_memory_usage == 0
    assert t.tick_time_ms == 1000
    calls_and_args: list[tuple[str, tuple[Any, ...]]] = [
        ("add_message", (1, 1, 10)),
        ("add_many", ([1], [1], [10])),
        ("has_message_available", ()),
        ("get_scheduled_messages", (1,)),
        ("next_delivery_time", ()),
        ("should_pause_all_deliveries", ()),
        ("contains_message", (1, 1)),
        ("reset_tick_time", (5,)),
        ("clear", ()),
        ("now", ()),
        ("counters", ()),
    ]
    for name, args in calls_and_args:
        with pytest.raises(errors.TrackerClosed):
            getattr(t, name)(*args)
    assert clock.calls == calls  # a closed tracker never reads its clock
    t.close()  # idempotent
    assert "closed=True" in repr(t)


def test_clear_releases_memory_and_starts_over() -> None:
    t, _ = tracker(0, fixed_delay_lookahead=1)
    t.add_many(np.zeros(1000, dtype=np.int64), np.arange(1000), np.arange(1000) * 997 + 10_000)
    t.add_message(0, 5000, 1_500)  # below highest - tick: not a fixed delay
    assert not t.should_pause_all_deliveries()
    t.clear()
    assert (t.number_of_delayed_messages, t.highest_delivery_time, t.buffer_memory_usage) == (0, 0, 0)
    t.add_message(0, 1, 10_000)
    assert t.should_pause_all_deliveries()


def test_subclass_takes_its_own_keywords() -> None:
    class Tracker(InMemoryTrackerState):
        def __init__(self, *, tick_time_ms: int = 1000, name: str = "t", **_: Any) -> None:
            self.name = name

    t = Tracker(tick_time_ms=8, name="orders", clock=lambda: 0)
    assert (t.name, t.tick_time_ms, t.precision_ms) == ("orders", 8, 8)
    assert repr(t).startswith("<Tracker delayed=0 tick_time_ms=8")


# -- against the model ---------------------------------------------------------------------------

POSITIONS = st.tuples(st.integers(0, 4), st.integers(0, 40))


class TrackerMachine(RuleBasedStateMachine):
    """Drives a tracker and the model with the same calls and clock; compares every result."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock(1_000_000)
        self.t = InMemoryTrackerState(clock=self.clock)
        self.model = ModelTracker(1000, False, 50_000)

    @initialize(
        tick=st.sampled_from([0, 1, 8, 100, 500, 1000, 5000]),
        strict=st.booleans(),
        lookahead=st.sampled_from([0, 1, 3, 20]),
        start=st.sampled_from([0, 1_000_000, MAX_I64 - 100_000]),
    )
    def configure(self, tick: int, strict: bool, lookahead: int, start: int) -> None:
        self.clock.now = start
        self.t = InMemoryTrackerState(
            tick_time_ms=tick, strict=strict, fixed_delay_lookahead=lookahead, clock=self.clock
        )
        self.model = ModelTracker(tick, strict, lookahead)

    @rule(
        pos=POSITIONS,
        offset=st.integers(-2_000, 30_000),
        special=st.sampled_from([0] * 8 + [1, 2, 3, 4]),
    )
    def add_message(self, pos: tuple[int, int], offset: int, special: int) -> None:
        at = [min(self.clock.now + offset, MAX_I64), -1, 0, MAX_I64, -(2**63)][special]
        assert self.t.add_message(*pos, at) == self.model.add(*pos, at, self.clock.now)

    @rule(rows=st.lists(st.tuples(POSITIONS, st.integers(-2_000, 30_000)), max_size=25))
    def add_many(self, rows: list[tuple[tuple[int, int], int]]) -> None:
        ats = [min(self.clock.now + off, MAX_I64) for _, off in rows]
        mask = self.t.add_many(
            [p[0] for p, _ in rows], [p[1] for p, _ in rows], np.array(ats, dtype=np.int64)
        )
        want = [self.model.add(p[0], p[1], at, self.clock.now) for (p, _), at in zip(rows, ats, strict=True)]
        assert mask.tolist() == want

    @rule(step=st.integers(0, 3_000) | st.sampled_from([511, 512, 513, 999, 1000, 1001]))
    def advance(self, step: int) -> None:
        self.clock.now = min(self.clock.now + step, MAX_I64)

    @rule(max_messages=st.integers(0, 6) | st.sampled_from([100, 2000]))
    def get_scheduled(self, max_messages: int) -> None:
        assert scheduled(self.t, max_messages) == self.model.get_scheduled(max_messages, self.clock.now)

    @rule()
    def has_message_available(self) -> None:
        assert self.t.has_message_available() == self.model.has_message_available(self.clock.now)

    @rule()
    def should_pause(self) -> None:
        assert self.t.should_pause_all_deliveries() == self.model.should_pause(self.clock.now)

    @rule(pos=POSITIONS)
    def contains(self, pos: tuple[int, int]) -> None:
        assert self.t.contains_message(*pos) == self.model.queue.contains(*pos)

    @rule(tick=st.sampled_from([1, 10, 1000, 4000]))
    def reset_tick_time(self, tick: int) -> None:
        self.t.reset_tick_time(tick)
        self.model.tick = tick

    @rule()
    def clear(self) -> None:
        self.t.clear()
        self.model.clear()

    @invariant()
    def same_state(self) -> None:
        """The timing contract after every step: readiness, next time, count and membership."""
        assert self.t.number_of_delayed_messages == len(self.model.queue)
        assert self.t.next_delivery_time() == self.model.next_delivery_time()
        assert self.t.has_message_available() == self.model.has_message_available(self.clock.now)
        for ledger in range(5):
            for entry in range(0, 41, 4):
                assert self.t.contains_message(ledger, entry) == self.model.queue.contains(ledger, entry)
        assert self.t.highest_delivery_time == self.model.highest
        assert self.t.counters() == self.model.counters


TrackerMachine.TestCase.settings = settings(
    max_examples=runs(80, 10_000), stateful_step_count=runs(40, 80), deadline=None
)
TestTrackerMachine = pytest.mark.fuzz(TrackerMachine.TestCase)


@settings(max_examples=60, deadline=None)
@given(
    tick=st.integers(0, 10_000),
    strict=st.booleans(),
    at=st.integers(0, MAX_I64) | st.integers(0, 10**6),
    now=st.integers(-(10**6), 10**6) | st.integers(0, MAX_I64),
)
def test_never_early_and_at_most_one_precision_late(tick: int, strict: bool, at: int, now: int) -> None:
    """Never due early, never more than one precision late.

    Not before deliver_at (strict) or deliver_at - tick (default); always from deliver_at + precision.
    """
    t, clock = tracker(now, tick_time_ms=tick, strict=strict)
    model = ModelTracker(tick, strict, 0)
    assert t.add_message(1, 1, at) == model.add(1, 1, at, now)
    if not len(model.queue):
        return
    earliest = at if strict else at - tick
    latest = min(at + model.precision, MAX_I64)
    for probe in sorted({earliest - 1, earliest, at, latest - 1, latest, MAX_I64}):
        if probe < now:
            continue
        clock.now = probe
        available = t.has_message_available()
        assert available == model.has_message_available(probe)
        if probe < earliest:
            assert not available
        if probe >= latest:
            assert available


# -- threads --------------------------------------------------------------------------------------


def test_threads_add_and_drain_every_message_once() -> None:
    clock = Clock(0)
    t = InMemoryTrackerState(clock=clock, fixed_delay_lookahead=0)
    threads, per_thread = 8, 4_000
    barrier = threading.Barrier(threads)

    def add(i: int) -> int:
        barrier.wait()
        held = 0
        entries = np.arange(per_thread, dtype=np.int64)
        half = per_thread // 2
        held += int(t.add_many(np.full(half, i), entries[:half], 10_000 + entries[:half]).sum())
        for e in entries[half:].tolist():
            held += t.add_message(i, e, 10_000 + e)
            assert t.contains_message(i, e)
        return held

    with ThreadPoolExecutor(threads) as pool:
        assert sum(pool.map(add, range(threads))) == threads * per_thread
    assert t.number_of_delayed_messages == threads * per_thread

    clock.now = 10**9
    barrier = threading.Barrier(threads)

    def drain(_: int) -> list[tuple[int, int]]:
        barrier.wait()
        got: list[tuple[int, int]] = []
        while rows := scheduled(t, 97):
            got.extend(rows)
        return got

    with ThreadPoolExecutor(threads) as pool:
        delivered = [p for part in pool.map(drain, range(threads)) for p in part]
    assert len(delivered) == len(set(delivered)) == threads * per_thread
    assert t.number_of_delayed_messages == 0
    assert t.counters()["delivered"] == threads * per_thread
