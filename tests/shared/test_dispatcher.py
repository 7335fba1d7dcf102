"""SharedDispatcher: round-robin turns, priority levels, replay first, counts, limits, bad input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from cursorkit import Cursor, Position
from cursorkit.delayed import InMemoryDelayedDeliveryTracker
from cursorkit.errors import CursorkitError, InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.shared import SharedAckResult, SharedDispatcher


@dataclass(eq=False)
class C:
    name: str


def ps(*entries: int) -> list[Position]:
    return [Position(1, e) for e in entries]


def sent(out: list[tuple[C, list[Position], list[int]]]) -> dict[str, list[int]]:
    return {c.name: [p.entry_id for p in positions] for c, positions, _ in out}


def test_turns_alternate_in_round_robin_batches() -> None:
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)), round_robin_batch=2)
    a, b = C("a"), C("b")
    d.add_consumer(a, 100)
    d.add_consumer(b, 100)
    d.add_read(ps(*range(7)))
    assert sent(d.dispatch()) == {"a": [0, 1, 4, 5], "b": [2, 3, 6]}


def test_the_best_priority_level_is_served_first() -> None:
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)))
    low, high = C("low"), C("high")
    d.add_consumer(low, 100, priority=5)
    d.add_consumer(high, 3, priority=0)
    d.add_read(ps(*range(5)))
    assert sent(d.dispatch()) == {"high": [0, 1, 2], "low": [3, 4]}


def test_permits_count_messages_of_batches() -> None:
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)))
    a = C("a")
    d.add_consumer(a, 5)
    d.add_read(ps(0, 1, 2), messages=[4, 4, 4])
    assert sent(d.dispatch()) == {"a": [0, 1]}
    assert d.stats().consumers[0].available_permits == -3
    assert d.stats().consumers[0].unacked_messages == 8
    assert d.entries_to_read() == 0  # entry 2 waits: nothing new is read


def test_nack_comes_back_first_with_its_count_and_ack_from_another_consumer() -> None:
    cursor = Cursor(Position(1, -1))
    d = SharedDispatcher(cursor=cursor)
    a, b = C("a"), C("b")
    d.add_consumer(a, 2)
    d.add_read(ps(0, 1))
    d.dispatch()
    assert d.nack(a, ps(1, 7)) == 1  # 7 is not held by a: ignored
    d.add_consumer(b, 10)
    d.add_read(ps(2))
    out = d.dispatch()
    assert sent(out) == {"b": [1, 2]}
    assert out[0][2] == [1, 0]
    assert d.ack(ps(0)) == SharedAckResult(
        released=1, not_held=0, duplicates=0
    )  # a held it; any consumer may ack
    assert d.ack(ps(1, 2, 2)) == SharedAckResult(released=2, not_held=1, duplicates=1)
    assert cursor.mark_delete_position == Position(1, 2)
    assert d.redelivery_count(Position(1, 1)) == 0


def test_a_leaver_returns_its_messages_without_a_raise_and_acked_ones_never_come_back() -> None:
    cursor = Cursor(Position(1, -1))
    d = SharedDispatcher(cursor=cursor)
    a, b = C("a"), C("b")
    d.add_consumer(a, 3)
    d.add_read(ps(0, 1, 2))
    d.dispatch()
    cursor.ack(Position(1, 1))  # acked on the cursor by someone else while a holds it
    assert d.remove_consumer(a) == ps(0, 1, 2)
    d.add_consumer(b, 10)
    out = d.dispatch()
    assert sent(out) == {"b": [0, 2]}
    assert out[0][2] == [0, 0]
    assert d.stats().replay_dropped_acked == 1


def test_redeliver_all_and_cumulative_acks() -> None:
    cursor = Cursor(Position(1, -1))
    d = SharedDispatcher(cursor=cursor)
    a = C("a")
    d.add_consumer(a, 10)
    d.add_read(ps(0, 1, 2, 3))
    d.dispatch()
    assert d.redeliver_all(a) == 4
    out = d.dispatch()
    assert out[0][2] == [1, 1, 1, 1]
    assert d.ack_cumulative(Position(1, 2)) == SharedAckResult(released=3, not_held=0, duplicates=0)
    assert d.held_by(a) == ps(3)
    assert cursor.mark_delete_position == Position(1, 2)


def test_limits_stop_a_consumer_and_the_subscription() -> None:
    d = SharedDispatcher(
        cursor=Cursor(Position(1, -1)), max_unacked_per_consumer=2, max_unacked_per_subscription=3
    )
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_consumer(b, 10)
    d.add_read(ps(*range(10)))
    out = d.dispatch()
    assert sum(len(p) for _, p, _ in out) == 3
    assert d.entries_to_read() == 0


def test_paused_consumers_get_nothing() -> None:
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)))
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_consumer(b, 10)
    d.set_paused(a, True)
    d.add_read(ps(0, 1, 2))
    assert sent(d.dispatch()) == {"b": [0, 1, 2]}
    assert d.stats().consumers[0].paused


class OneByOne:
    """A tracker hook with only ``add_message`` (no bulk ``add_many``): asked entry by entry."""

    def __init__(self, tracker: InMemoryDelayedDeliveryTracker) -> None:
        self.tracker = tracker
        self.asked = 0

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        self.asked += 1
        return self.tracker.add_message(ledger_id, entry_id, deliver_at)

    def get_scheduled_messages(self, max_messages: int) -> Any:
        return self.tracker.get_scheduled_messages(max_messages)


@pytest.mark.parametrize("bulk", [True, False], ids=["add_many", "add_message"])
def test_delayed_messages_wait_in_the_tracker_until_due(bulk: bool) -> None:
    """Entries with a future deliver-at wait; a past one or none goes at once (either tracker hook)."""
    now = [1_000]
    tracker = InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=lambda: now[0])
    hook = tracker if bulk else OneByOne(tracker)
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)), delayed=hook)
    a = C("a")
    d.add_consumer(a, 10)
    d.add_read(ps(0, 1, 2, 3, 4), messages=[1, 2, 3, 4, 5], deliver_at=[0, 5_000, 0, 500, 7_000])
    assert sent(d.dispatch()) == {"a": [0, 2, 3]}
    assert d.stats().consumers[0].unacked_messages == 1 + 3 + 4
    assert tracker.number_of_delayed_messages == 2
    if not bulk:
        assert hook.asked == 3  # only the entries with a deliver-at time
    now[0] = 5_000
    assert sent(d.dispatch()) == {"a": [1]}
    now[0] = 7_000
    assert sent(d.dispatch()) == {"a": [4]}


def test_reset_forgets_what_was_sent() -> None:
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)))
    a = C("a")
    d.add_consumer(a, 10)
    d.add_read(ps(0, 1))
    d.dispatch()
    d.reset()
    assert d.held_by(a) == []
    assert d.stats().unacked_messages == 0


def test_bad_input_gets_typed_errors() -> None:
    with pytest.raises(InvalidInputType):
        SharedDispatcher(cursor="nope")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        SharedDispatcher(cursor=Cursor(Position(1, -1)), round_robin_batch=0)
    d = SharedDispatcher(cursor=Cursor(Position(1, -1)))
    a = C("a")
    with pytest.raises(UnknownConsumer):
        d.add_permits(a, 1)
    with pytest.raises(InvalidInputType):
        d.add_consumer(object())
    d.add_consumer(a, 1)
    with pytest.raises(InvalidArgument):
        d.add_consumer(a, 1)
    with pytest.raises(InvalidArgument):
        d.add_permits(a, -1)
    with pytest.raises(CursorkitError):
        d.add_read(ps(0), messages=[0])
    with pytest.raises(CursorkitError):
        d.add_read(ps(0, 1), messages=np.array([1], dtype=np.int64))
    with pytest.raises(InvalidInputType):
        d.add_read([(1, 0)])  # type: ignore[list-item]
    with pytest.raises(CursorkitError):
        d.add_read([Position(1, -1)])
