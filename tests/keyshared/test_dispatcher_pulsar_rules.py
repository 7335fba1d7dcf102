"""KeySharedDispatcher rules checked one by one against Pulsar 4's Key_Shared dispatcher (issue 20).

Each test is named after the Pulsar rule or configuration it follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import UNLIMITED, AckResult, KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector
from cursorkit.keyshared.sim import Simulation


@dataclass(eq=False)
class C:
    name: str


def dispatcher(**kw: object) -> tuple[KeySharedDispatcher, Cursor]:
    cursor = Cursor(Position(1, -1))
    return KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, **kw), cursor  # type: ignore[arg-type]


def sent(deliveries: list[tuple[object, list[Position]]]) -> list[Position]:
    return sorted(p for _, ps in deliveries for p in ps)


def test_replayed_positions_the_cursor_acked_are_dropped_not_sent_again() -> None:
    """Pulsar: positions at or below mark-delete never enter replay; deleted ones are dropped on read."""
    d, cursor = dispatcher()
    c = C("c")
    d.add_consumer(c, 0)
    d.add_entries([(Position(1, e), b"k") for e in range(3)])
    assert d.dispatch() == []  # no permits: all three wait in replay
    assert d.replay_queue == [Position(1, 0), Position(1, 1), Position(1, 2)]
    cursor.ack_cumulative(Position(1, 0))
    cursor.ack(Position(1, 2))
    d.add_permits(c, 10)
    assert sent(d.dispatch()) == [Position(1, 1)]
    assert d.stats().replay_dropped_acked == 2 and d.replay_queue == []


def test_an_entry_at_or_below_mark_delete_never_enters_the_replay_queue() -> None:
    d, cursor = dispatcher()
    c = C("c")
    d.add_consumer(c, 0)
    cursor.ack_cumulative(Position(1, 4))
    d.add_entries([(Position(1, e), b"k") for e in (3, 4, 5)], replay=True)
    assert d.replay_queue == [Position(1, 5)]
    assert d.stats().replay_dropped_acked == 2


def test_read_size_is_the_look_ahead_room_capped_by_permits() -> None:
    """Pulsar reads at most max(look-ahead limit - replay size, 1) entries, and no more than permits."""
    d, _ = dispatcher(look_ahead_per_consumer=3, look_ahead_per_subscription=0)
    c = C("c")
    d.add_consumer(c, 100)
    assert d.look_ahead_limit == 3 and d.max_entries_to_read() == 3
    d.add_consumer(C("idle"), 0)  # a second consumer doubles the limit
    assert d.look_ahead_limit == 6 and d.max_entries_to_read() == 6
    d2, _ = dispatcher()
    few = C("few")
    d2.add_consumer(few, 2)
    assert d2.max_entries_to_read() == 2  # permits bind
    d3, _ = dispatcher()
    d3.add_consumer(C("none"), 0)
    assert d3.max_entries_to_read() == 0 and d3.stats().read_blocked == "no-permits"


@pytest.mark.parametrize(
    ("per_sub", "per_consumer", "consumers", "expected"),
    [
        (200_000, 50_000, 2, 100_000),
        (200_000, 50_000, 5, 200_000),
        (0, 50_000, 3, 150_000),
        (0, 0, 2, UNLIMITED),
    ],
)
def test_look_ahead_limits_of_zero_fall_back_to_max_unacked(
    per_sub: int, per_consumer: int, consumers: int, expected: int
) -> None:
    """keySharedLookAhead… = 0 means no such limit: maxUnackedMessagesPerSubscription/PerConsumer apply."""
    d, _ = dispatcher(
        look_ahead_per_consumer=0,
        look_ahead_per_subscription=0,
        max_unacked_per_subscription=per_sub,
        max_unacked_per_consumer=per_consumer,
    )
    for i in range(consumers):
        d.add_consumer(C(f"c{i}"), 1)
    assert d.look_ahead_limit == expected
    assert d.should_read()  # an empty replay queue never blocks on look-ahead


def test_an_ack_from_another_consumer_is_applied_where_the_message_is_pending() -> None:
    """Pulsar finds the consumer holding the message, removes it there and acks the cursor."""
    d, cursor = dispatcher()
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(2)])
    assert sent(d.dispatch()) == [Position(1, 0), Position(1, 1)]
    holder = a if d.unacked(a) else b
    d.add_consumer(b, 10)
    other = b if holder is a else a
    assert d.ack(other, Position(1, 0)) == AckResult(from_other_consumer=1)
    assert d.unacked(holder) == [Position(1, 1)] and cursor.is_acked(Position(1, 0))
    assert d.ack(holder, Position(1, 0)) == AckResult(duplicates=1)  # a duplicate is a no-op
    assert d.ack_many(holder, [Position(1, 1), Position(1, 1)]) == AckResult(acked=1, duplicates=1)
    assert cursor.mark_delete_position == Position(1, 1)


def test_a_nack_of_a_message_not_pending_on_that_consumer_is_skipped() -> None:
    d, _ = dispatcher()
    a = C("a")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(2)])
    d.dispatch()
    assert d.nack(a, [Position(1, 1), Position(1, 7)]) == 1
    assert d.replay_queue == [Position(1, 1)] and d.unacked(a) == [Position(1, 0)]


def test_acking_a_position_waiting_in_replay_removes_it_from_the_queue() -> None:
    d, cursor = dispatcher()
    a = C("a")
    d.add_consumer(a, 0)
    d.add_entries([(Position(1, 0), b"k")])
    d.dispatch()
    assert d.ack(a, Position(1, 0)) == AckResult(not_pending=1)
    assert d.replay_queue == [] and cursor.mark_delete_position == Position(1, 0)


def moved_hash_setup() -> tuple[KeySharedDispatcher, C, C, bytes]:
    """c1 holds one unacked message of a key whose hash moves to c2 when c2 joins (auto-split)."""
    d, _ = dispatcher()
    c1, c2 = C("c1"), C("c2")
    d.add_consumer(c1, 10)
    key = next(k for k in (f"k{i}".encode() for i in range(10_000)) if d.slot_of(k) <= 32768)
    d.add_entries([(Position(1, 0), key)])
    assert sent(d.dispatch()) == [Position(1, 0)]
    d.add_consumer(c2, 10)  # auto-split hands the upper half to c2: the hash drains on c1
    (s1, _) = d.stats().consumers
    assert s1.draining_hashes_count == 1
    return d, c1, c2, key


def test_draining_hashes_cleared_total_counts_every_clear() -> None:
    """Pulsar counts every draining hash cleared, blocked or not (#23421's counters)."""
    d, c1, _, _ = moved_hash_setup()
    assert not d.ack(c1, Position(1, 0))  # nobody was blocked: no unblock, but a clear
    stats = d.stats()
    assert stats.consumers[0].draining_hashes_cleared_total == 1
    assert stats.draining_hashes_cleared_total == 1 and stats.draining_hashes_count == 0


def test_a_draining_hash_given_back_to_its_owner_is_released_at_once() -> None:
    """Pulsar 4.x after #24736: released on the membership change, not at the next dispatch."""
    d, c1, c2, _ = moved_hash_setup()
    d.remove_consumer(c2)  # the hash comes back to c1, where it drains
    stats = d.stats()
    assert stats.draining_hashes_count == 0 and stats.consumers[0].draining_hashes_cleared_total == 1
    assert d.unacked(c1) == [Position(1, 0)]  # the message itself stays unacked on c1


def test_subscription_stats_sum_the_consumers_draining_counters() -> None:
    d, _, _, _ = moved_hash_setup()
    stats = d.stats()
    assert stats.draining_hashes_count == sum(c.draining_hashes_count for c in stats.consumers) == 1
    assert stats.draining_hashes_unacked_messages == 1


def test_redelivery_counts_follow_nacks_and_redelivers_not_leavers() -> None:
    """Pulsar counts nacks and redelivers per position and sends the count with the message.

    A leaving consumer's messages go back to replay uncounted; an ack drops the count.
    """
    d, _ = dispatcher()
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(3)])
    d.dispatch()
    d.nack(a, [Position(1, 0)])
    d.redeliver(a)  # 1:1 and 1:2 (1:0 is in replay, not pending)
    ((who, ps, counts),) = d.dispatch_with_counts()
    assert who is a and ps == [Position(1, 0), Position(1, 1), Position(1, 2)]
    assert counts.tolist() == [1, 1, 1]
    d.nack(a, [Position(1, 0)])
    d.add_consumer(b, 10)
    returned = d.remove_consumer(a)  # a leaves: its unacked messages go back, their counts unchanged
    assert set(returned) == {Position(1, 1), Position(1, 2)}
    out = {p: n for _, ps, ns in d.dispatch_with_counts() for p, n in zip(ps, ns.tolist(), strict=True)}
    assert out == {Position(1, 0): 2, Position(1, 1): 1, Position(1, 2): 1}
    d.ack_many(b, [Position(1, 1), Position(1, 2)])
    assert d.redelivery_count(Position(1, 1)) == 0 and d._core.redeliveries_tracked() == 1


def test_redelivery_counts_are_cleared_when_the_last_consumer_leaves() -> None:
    """Pulsar clears its redelivery tracker when its consumer list becomes empty."""
    d, _ = dispatcher()
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, 0), b"k")])
    d.dispatch()
    d.nack(a, [Position(1, 0)])
    d.remove_consumer(a)
    assert d.redelivery_count(Position(1, 0)) == 0 and d._core.redeliveries_tracked() == 0
    d.add_consumer(b, 10)
    d.add_entries([(Position(1, 0), b"k")])  # read again after the rewind
    ((who, ps, counts),) = d.dispatch_with_counts()
    assert who is b and ps == [Position(1, 0)] and counts.tolist() == [0]


def test_journaled_counts_are_the_dispatchers_own_and_outlive_the_last_consumer() -> None:
    """Durable counts (beyond Pulsar): each raise is journaled at its new value.

    Counts stay when the last consumer leaves, a lost consumer's messages count one more, and a
    seed keeps the higher count.
    """
    d, _ = dispatcher()
    d.journal_redelivery_counts()
    a, b = C("a"), C("b")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(3)])
    d.dispatch()
    d.nack(a, [Position(1, 0)])
    d.redeliver(a)
    raised = d.take_raised_counts()
    journal = {(int(ledger), int(e)): int(n) for ledger, e, n in zip(*raised, strict=True)}
    assert journal == {(1, 0): 1, (1, 1): 1, (1, 2): 1}
    assert not d.take_raised_counts()
    d.dispatch()
    returned = d.remove_consumer(a)  # the last one: the counts stay
    d.raise_redelivery_counts(returned)  # its connection was lost
    assert [d.redelivery_count(Position(1, e)) for e in range(3)] == [2, 2, 2]
    assert [int(n) for n in d.take_raised_counts().counts] == [2, 2, 2]
    d.seed_redelivery_counts([1, 1], [1, 5], [7, 3])
    assert d.redelivery_count(Position(1, 1)) == 7 and d.redelivery_count(Position(1, 5)) == 3
    assert not d.take_raised_counts()  # seeds come from the store: not journaled again
    d.add_consumer(b, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(3)])
    out = {p: n for _, ps, ns in d.dispatch_with_counts() for p, n in zip(ps, ns.tolist(), strict=True)}
    assert out == {Position(1, 0): 2, Position(1, 1): 7, Position(1, 2): 2}


def test_when_the_last_consumer_leaves_everything_is_read_again_once() -> None:
    """Pulsar empties the replay queue and rewinds the read position when no consumer is left."""
    d, cursor = dispatcher()
    a = C("a")
    d.add_consumer(a, 2)
    d.add_entries([(Position(1, e), f"k{e}".encode()) for e in range(5)])
    first = sent(d.dispatch())
    d.ack(a, first[0])
    assert len(d.replay_queue) + len(d.unacked(a)) == 4
    d.remove_consumer(a)
    assert d.replay_queue == [] and d.stats().replay_size == 0
    d.add_entries([(Position(1, 5), b"k5")])  # read while nobody is connected: released too
    rewind = d.take_rewind()
    assert rewind == cursor.mark_delete_position and d.take_rewind() is None
    b = C("b")
    d.add_consumer(b, 100)
    after = rewind.entry_id + 1
    d.add_entries(
        [(Position(1, e), f"k{e}".encode()) for e in range(after, 6) if not cursor.is_acked(Position(1, e))]
    )
    again = sent(d.dispatch())
    assert again == [Position(1, e) for e in range(6) if Position(1, e) != first[0]]
    assert len(again) == len(set(again))  # nothing twice


def test_last_sent_seeds_individually_sent_with_the_cursors_ack_holes() -> None:
    """Pulsar 3.3 (PIP-282): on first use the individually-sent set starts from the acked ranges."""
    cursor = Cursor(Position(1, -1))
    cursor.ack(Position(1, 1))
    cursor.ack(Position(1, 2))
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, mode="last-sent")
    a = C("a")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, 0), b"k")])
    assert sent(d.dispatch()) == [Position(1, 0)]
    assert d.stats().last_sent_position == "1:2"  # 1:1 and 1:2 were acked: they count as sent


def test_last_sent_crosses_a_ledger_boundary_when_only_the_ledger_end_lies_between() -> None:
    """Pulsar 3.3: the gap (LSP, next] holding no entries of the ledger does not stop the LSP."""
    cursor = Cursor(Position(1, -1), ledger_sizes={1: 2, 2: 5})
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, mode="last-sent")
    a = C("a")
    d.add_consumer(a, 10)
    d.add_entries([(Position(1, e), b"k") for e in range(2)] + [(Position(2, 0), b"k")])
    assert sent(d.dispatch()) == [Position(1, 0), Position(1, 1), Position(2, 0)]
    assert d.stats().last_sent_position == "2:0"


def test_replays_to_recently_joined_consumers_stop_at_the_earliest_joiners_limit() -> None:
    """Pulsar 3.3: on replay reads a joiner's limit is the minimum with the earliest joiner's."""
    probe = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(), mode="last-sent")
    pa, pb, pc = C("a"), C("b"), C("c")
    probe.add_consumer(pa)
    probe.add_consumer(pb)
    before = {k: probe.selector.select(probe.slot_of(k)) for k in (f"w{i}".encode() for i in range(5000))}
    probe.add_consumer(pc)
    # A key that a owns while a and b are connected and that moves to c when c joins.
    w = next(k for k, who in before.items() if who is pa and probe.selector.select(probe.slot_of(k)) is pc)

    d = KeySharedDispatcher(
        selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)), mode="last-sent"
    )
    a, b, c = C("a"), C("b"), C("c")
    d.add_consumer(a, 1000)
    d.add_entries([(Position(1, 0), b"first")])
    d.dispatch()  # 1:0 to a, unacked
    d.add_consumer(b, 1000)  # b joins behind 1:0
    d.add_entries([(Position(1, 1), w)])
    assert [p for who, ps in d.dispatch() if who is a for p in ps] == [Position(1, 1)]
    d.add_consumer(c, 1000)  # c joins behind 1:1, and w now selects c
    limits = {s.name: s.last_sent_position_when_joining for s in d.stats().consumers}
    assert limits["b"] == "1:0" and limits["c"] == "1:1"
    d.nack(a, [Position(1, 1)])  # back to replay, now for c
    assert d.dispatch() == []  # replayed 1:1 is past b's limit (1:0): c must not get it yet
    assert d.stats().blocked[d.slot_of(w)].reason == "recently-joined"


@pytest.mark.parametrize("mode", ["draining", "last-sent"])
def test_a_simulation_across_a_zero_consumer_gap_loses_nothing_and_keeps_key_order(mode: str) -> None:
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)), mode=mode)  # type: ignore[arg-type]
    sim = Simulation(d, seed=3, keys=20, distribution="zipf", ledger_size=40, read_batch=6)
    sim.join("a", 4, ack_delay=2)
    sim.publish(60)
    for _ in range(5):
        sim.step()
    sim.leave("a")  # nobody left: the replay queue is released and the broker rewinds
    sim.publish(30)
    for _ in range(3):
        sim.step()  # nothing may be read or sent while nobody is connected
    sim.join("b", 5, ack_delay=1)
    sim.join("c", 5)
    sim.drain()
    assert sim.acked_count >= len(sim.log) and len(sim.checker.acked) == len(sim.log)
