"""One delayed index per topic: each subscription gets each due message once, and only if it read it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    InMemoryDelayedDeliveryTracker,
    MemoryCursorProperties,
    SharedDelayedIndex,
)
from cursorkit.errors import InvalidArgument
from manual_clock import Clock


def rows(a: np.ndarray) -> list[tuple[int, int]]:
    return [tuple(r) for r in a.tolist()]


def test_each_subscription_gets_each_due_message_once() -> None:
    clock = Clock()
    index = SharedDelayedIndex(InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=clock))
    a, b = index.subscription("a"), index.subscription("b")
    for e in range(5):
        assert a.add_message(1, e, 100 + e)
        assert b.add_message(1, e, 100 + e)  # already tracked for the topic
    assert index.tracker.number_of_delayed_messages == 5
    clock.now = 101  # cutoff now + tick = 102
    assert rows(a.get_scheduled_messages(10)) == [(1, 0), (1, 1), (1, 2)]
    assert rows(a.get_scheduled_messages(10)) == []
    assert rows(b.get_scheduled_messages(2)) == [(1, 0), (1, 1)]
    assert b.has_message_available()
    assert rows(b.get_scheduled_messages(10)) == [(1, 2)]
    clock.now = 200
    assert rows(b.get_scheduled_messages(10)) == [(1, 3), (1, 4)]
    assert rows(a.get_scheduled_messages(10)) == [(1, 3), (1, 4)]
    assert a.number_of_delayed_messages == 0 and not a.has_message_available()


def test_a_subscription_behind_reads_due_messages_itself() -> None:
    clock = Clock()
    index = SharedDelayedIndex(InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=clock))
    fast, slow = index.subscription("fast"), index.subscription("slow")
    for e in range(4):
        fast.add_message(1, e, 100)
    slow.add_message(1, 0, 100)  # slow has read only 1:0 so far
    clock.now = 100
    assert rows(fast.get_scheduled_messages(10)) == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert not slow.add_message(1, 1, 100)  # due when slow reads it: dispatched directly
    assert rows(slow.get_scheduled_messages(10)) == [(1, 0)]  # not 1:1 a second time


def test_late_subscription_and_removal() -> None:
    clock = Clock()
    index = SharedDelayedIndex(InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=clock))
    a = index.subscription("a")
    a.add_message(1, 0, 50)
    clock.now = 60
    c = index.subscription("c")
    assert rows(c.get_scheduled_messages(10)) == []
    assert rows(a.get_scheduled_messages(10)) == [(1, 0)]
    index.remove_subscription("c")
    with pytest.raises(InvalidArgument):
        c.get_scheduled_messages(1)
    with pytest.raises(InvalidArgument):
        index.remove_subscription("c")
    with pytest.raises(InvalidArgument):
        a.get_scheduled_messages(-1)
    assert index.subscriptions == ["a"]


def test_memory_does_not_grow_with_subscriptions(tmp_path: Path) -> None:
    clock = Clock()
    tracker = BucketDelayedDeliveryTracker(
        FileBucketSnapshotStorage(tmp_path),
        MemoryCursorProperties(),
        clock=clock,
        background=False,
        min_index_count_per_bucket=1000,
    )
    index = SharedDelayedIndex(tracker)
    subs = [index.subscription(f"s{i}") for i in range(10)]
    ls = np.repeat(np.arange(1, 6), 2000)
    es = np.tile(np.arange(2000), 5)
    ats = 10_000 + es
    subs[0].add_many(ls, es, ats)
    one = index.memory_usage()
    for s in subs[1:]:
        assert s.add_many(ls, es, ats).all()
    assert index.memory_usage() <= one * 1.2
    assert tracker.number_of_delayed_messages == 10_000
    clock.now = 20_000
    for s in subs:
        assert len(s.get_scheduled_messages(100_000)) == 10_000
    tracker.close()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 20), st.integers(1, 50), st.integers(0, 30)),
        max_size=40,
    )
)
def test_never_duplicated_never_lost(ops: list[tuple[int, int, int, int]]) -> None:
    """Each subscription reads positions in order; every position reaches every reader exactly once."""
    clock = Clock()
    index = SharedDelayedIndex(InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=clock))
    subs = [index.subscription(f"s{i}") for i in range(3)]
    at = {e: 10 + (e * 7) % 40 for e in range(21)}
    read = [0, 0, 0]
    got: list[list[int]] = [[], [], []]
    for sub, upto, dt, n in ops:
        while read[sub] <= upto:  # the subscription reads its next entries in order
            e = read[sub]
            if not subs[sub].add_message(1, e, at[e]):
                got[sub].append(e)  # due when read: dispatched directly
            read[sub] += 1
        clock.now += dt
        got[sub].extend(e for _, e in rows(subs[sub].get_scheduled_messages(n)))
    clock.now += 1000
    for i, s in enumerate(subs):
        got[i].extend(e for _, e in rows(s.get_scheduled_messages(1000)))
        assert sorted(got[i]) == list(range(read[i])), f"subscription {i}"
