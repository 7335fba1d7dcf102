"""KeySharedDispatcher: PIP-282's two out-of-order scenarios, PIP-379 draining, bad input, simulations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit import Cursor, DispatchPausePolicy, Position
from cursorkit.delayed import InMemoryDelayedDeliveryTracker
from cursorkit.errors import CursorkitError, InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.keyshared.dispatcher import AckResult, Entry, KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector
from cursorkit.keyshared.sim import Simulation


@dataclass(eq=False)
class C:
    name: str


def find_key(d: KeySharedDispatcher, lo: int, hi: int, prefix: str) -> bytes:
    """A key whose slot lies in [lo, hi]."""
    for i in range(100_000):
        k = f"{prefix}-{i}".encode()
        if lo <= d.slot_of(k) <= hi:
            return k
    raise AssertionError("no key found")


def scenario(mode: str, start: Position) -> tuple[KeySharedDispatcher, C, C, bytes, bytes]:
    """c2 joins first, then c1: c1 owns [0, 32768], c2 [32769, 65536]; a later c3 takes [0, 16384]."""
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(start), mode=mode)  # type: ignore[arg-type]
    c1, c2 = C("c1"), C("c2")
    d.add_consumer(c2, 1000)
    d.add_consumer(c1, 1)
    key_a = find_key(d, 0, 16384, "a")
    key_b = find_key(d, 32769, 65536, "b")
    return d, c1, c2, key_a, key_b


def sent_to(deliveries: list[tuple[object, list[Position]]], consumer: object) -> list[Position]:
    return [p for c, ps in deliveries if c is consumer for p in ps]


@pytest.mark.parametrize("mode", ["last-sent", "draining"])
def test_pip_282_issue_1(mode: str) -> None:
    d, c1, c2, key_a, key_b = scenario(mode, Position(1, 5))
    d.add_entries(
        [(Position(1, e), key_a) for e in (6, 7, 8)] + [(Position(1, e), key_b) for e in (9, 10, 11)]
    )
    first = d.dispatch()
    assert sent_to(first, c1) == [Position(1, 6)]  # c1 has one permit and never acks 1:6
    assert sent_to(first, c2) == [Position(1, 9), Position(1, 10), Position(1, 11)]
    c3 = C("c3")
    d.add_consumer(c3, 1000)  # key-a now selects c3
    assert sent_to(d.dispatch(), c3) == []  # 1:7 and 1:8 must not overtake 1:6
    reason = d.stats().blocked[d.slot_of(key_a)]
    assert reason.reason == ("recently-joined" if mode == "last-sent" else "draining")
    d.remove_consumer(c1)  # 1:6 is redelivered
    got = sent_to(d.dispatch(), c3)
    for p in got:
        d.ack(c3, p)
    got += sent_to(d.dispatch(), c3)
    assert got == [Position(1, 6), Position(1, 7), Position(1, 8)]


@pytest.mark.parametrize("mode", ["last-sent", "draining"])
def test_pip_282_issue_2(mode: str) -> None:
    d, c1, _c2, key_a, _ = scenario(mode, Position(2, 0))
    d.add_entries([(Position(2, 1), key_a)])
    assert sent_to(d.dispatch(), c1) == [Position(2, 1)]
    d.add_entries([(Position(2, 2), key_a)])
    assert d.dispatch() == []  # no permits on c1: 2:2 goes to the replay queue
    assert d.replay_queue == [Position(2, 2)]
    c3 = C("c3")
    d.add_consumer(c3, 1000)
    assert sent_to(d.dispatch(), c3) == []  # the replayed 2:2 must wait for 2:1
    d.remove_consumer(c1)
    got = sent_to(d.dispatch(), c3)
    for p in got:
        d.ack(c3, p)
    got += sent_to(d.dispatch(), c3)
    assert got == [Position(2, 1), Position(2, 2)]


def test_out_of_order_mode_does_not_wait() -> None:
    d, c1, _c2, key_a, _ = scenario("out-of-order", Position(2, 0))
    d.add_entries([(Position(2, 1), key_a), (Position(2, 2), key_a)])
    d.dispatch()
    c3 = C("c3")
    d.add_consumer(c3, 1000)
    assert sent_to(d.dispatch(), c3) == [Position(2, 2)]


def test_draining_hash_is_released_by_the_owners_ack() -> None:
    d, c1, _c2, key_a, _ = scenario("draining", Position(3, -1))
    d.add_permits(c1, 5)
    d.add_entries([(Position(3, e), key_a) for e in range(3)])
    assert sent_to(d.dispatch(), c1) == [Position(3, 0), Position(3, 1), Position(3, 2)]
    c3 = C("c3")
    d.add_consumer(c3, 10)
    d.add_entries([(Position(3, 3), key_a)])
    assert d.dispatch() == []
    st_c1 = next(s for s in d.stats().consumers if s.name == "c1")
    assert st_c1.draining_hashes_count == 1 and st_c1.draining_hashes_unacked_messages == 3
    d.ack(c1, Position(3, 0))
    d.ack(c1, Position(3, 1))
    assert d.dispatch() == []
    assert d.ack(c1, Position(3, 2))  # the last unacked message of the hash: unblocked
    assert sent_to(d.dispatch(), c3) == [Position(3, 3)]
    assert d.stats().unblocked_events == 1


def test_pip_299_pause_stops_reads_not_replays() -> None:
    cursor = Cursor(Position(1, -1), max_unacked_ranges_to_persist=1)
    policy = DispatchPausePolicy(broker=True)
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, policy=policy)
    c = C("c")
    d.add_consumer(c, 10)
    assert d.should_read()
    d.add_entries([(Position(1, e), b"k") for e in range(4)])
    sent = sent_to(d.dispatch(), c)
    for p in (sent[1], sent[3]):  # two ack holes: two ranges, over the limit of one
        d.ack(c, p)
    assert not d.should_read()
    assert d.stats().blocked_on_ack_state_persistent
    assert d.stats().read_blocked == "paused"
    d.ack(c, sent[0])  # 1:0..1:1 contiguous: mark-delete moves, one range left
    assert d.should_read()


def test_look_ahead_limit_stops_reads() -> None:
    d = KeySharedDispatcher(
        selector=AutoSplitSelector(),
        cursor=Cursor(Position(1, -1)),
        look_ahead_per_consumer=2,
        look_ahead_per_subscription=3,
    )
    a, b = C("a"), C("b")
    d.add_consumer(a, 0)  # owns [32769, 65536] once b joins
    d.add_consumer(b, 10)
    assert d.look_ahead_limit == 3
    keys = [find_key(d, 32769, 65536, f"k{i}") for i in range(3)]
    d.add_entries([(Position(1, e), k) for e, k in enumerate(keys)])
    assert d.dispatch() == []
    assert len(d.replay_queue) == 3
    assert not d.should_read()  # b still has permits: only the look-ahead limit stops the read
    assert d.stats().read_blocked == "look-ahead"
    assert {r.reason for r in d.stats().blocked.values()} == {"no-permits"}


def test_bad_input_is_typed_and_changes_nothing() -> None:
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    a = C("a")
    d.add_consumer(a, 5)
    with pytest.raises(InvalidArgument):
        d.add_consumer(a, 5)
    with pytest.raises(UnknownConsumer):
        d.add_permits(C("ghost"), 1)
    with pytest.raises(InvalidArgument):
        d.add_permits(a, -1)
    with pytest.raises(InvalidInputType):
        d.add_permits(a, 1.5)  # type: ignore[arg-type]
    assert d.ack(a, Position(1, 0)) == AckResult(not_pending=1)  # never sent: Pulsar acks the cursor
    with pytest.raises(InvalidInputType):
        d.ack(a, (1, 0))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputType):
        d.add_entries([(1, b"k")])  # type: ignore[list-item]
    with pytest.raises(InvalidInputType):
        d.add_consumer(object(), 1)
    with pytest.raises(InvalidArgument):
        KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(), mode="fifo")  # type: ignore[arg-type]
    assert d.stats().consumers[0].available_permits == 5


def check_draining_refs(d: KeySharedDispatcher, sim: Simulation) -> None:
    """A draining hash's reference count is exactly its owner's unacked messages of that hash."""
    for stats in d.stats().consumers:
        consumer = sim.consumers[stats.name]
        unacked: dict[int, int] = {}
        for pos in d.unacked(consumer):
            slot = sim.key_slots[sim.key_of[pos]]
            unacked[slot] = unacked.get(slot, 0) + 1
        for h, refs, _blocked in stats.draining_hashes:
            assert refs == unacked.get(h, 0), (
                f"hash {h} on {stats.name}: {refs} refs, {unacked.get(h, 0)} unacked"
            )


@settings(max_examples=300, deadline=None)
@given(
    mode=st.sampled_from(["draining", "last-sent"]),
    consistent=st.booleans(),
    seed=st.integers(0, 2**16),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["publish", "join", "leave", "step", "stall", "resume"]), st.integers(0, 5)
        ),
        min_size=5,
        max_size=40,
    ),
)
def test_simulated_churn_keeps_key_order(
    mode: str, consistent: bool, seed: int, ops: list[tuple[str, int]]
) -> None:
    """With no nacks nothing is lost, in both modes; draining mode also keeps every ordering rule.

    Draining keeps per-key publish order at successive owners and a single owner per key at all times;
    last-sent (PIP-282) does not always: see ``test_last_sent_reorders_where_draining_does_not``.
    """
    sim = churn(mode, consistent, seed, ops)
    for c in sim.consumers.values():
        c.stalled = False
    sim.drain(max_rounds=20_000)
    if mode == "draining":
        assert not sim.checker.violations, sim.checker.violations[:3]
    assert sim.checker.acked == {p for p, _ in sim.log}


def churn(mode: str, consistent: bool, seed: int, ops: list[tuple[str, int]]) -> Simulation:
    """Runs the churn ops (checking the draining invariants after each) and returns the simulation."""
    selector = ConsistentHashingSelector(points_per_consumer=20) if consistent else AutoSplitSelector()
    d = KeySharedDispatcher(selector=selector, cursor=Cursor(Position(1, -1)), mode=mode)  # type: ignore[arg-type]
    sim = Simulation(d, seed=seed, keys=30, distribution="zipf", ledger_size=50, read_batch=7)
    sim.join("base", 3, ack_delay=1)
    names = 0
    for op, n in ops:
        if op == "publish":
            sim.publish(1 + n * 5)
        elif op == "join":
            names += 1
            sim.join(f"c{names}", 1 + n, ack_delay=n % 3)
        elif op == "leave" and len(sim.consumers) > 1:
            sim.leave(sorted(sim.consumers)[n % len(sim.consumers)])
        elif op == "stall" and sim.consumers:
            sim.consumers[sorted(sim.consumers)[n % len(sim.consumers)]].stalled = True
        elif op == "resume":
            for c in sim.consumers.values():
                c.stalled = False
        else:
            for _ in range(n + 1):
                sim.step()
        if mode == "draining":
            assert not sim.checker.violations, sim.checker.violations[:3]
            check_draining_refs(d, sim)
    return sim


def test_last_sent_reorders_where_draining_does_not() -> None:
    """PIP-282's gap (Pulsar #23307, which led to PIP-379), reproduced and pinned.

    A joiner's limit is the *contiguous* last sent position (1:13); the old owner already holds 1:23
    of key-2, sent individually past a gap (1:14 waits in replay). Once mark-delete reaches 1:13 the
    joiner is free, receives key-2's 1:26 and acks it; when the old owner leaves, its 1:23 follows.
    Draining mode keeps key-2 on the old owner until 1:23 is acked, so the same churn stays ordered.
    """
    ops = [("publish", 0), ("publish", 5), ("join", 0), ("join", 0), ("leave", 2), ("step", 0), ("step", 1)]
    ops += [("step", 5), ("stall", 0), ("join", 0), ("step", 0), ("leave", 0)]
    found = {}
    for mode in ("last-sent", "draining"):
        sim = churn(mode, True, 496, ops)
        sim.drain(max_rounds=20_000)
        assert sim.checker.acked == {p for p, _ in sim.log}
        found[mode] = sim.checker.violations
    assert found["draining"] == []
    assert "key b'key-2': 1:23 delivered to c3 after 1:26 was acked" in found["last-sent"]


def test_script_dsl() -> None:
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    sim = Simulation(d, seed=1, keys=10)
    sim.run_script(
        """
        join c1 5
        publish 50
        step 3
        join c2 5     # takes half the hash range
        stall c1
        step 2
        resume c1
        nack c2 1
        leave c1
        drain
        """
    )
    assert sim.checker.acked == {p for p, _ in sim.log}
    with pytest.raises(InvalidArgument):
        sim.run_script("fly c1")
    assert Entry(Position(1, 0), 5).slot == 5


def test_delayed_messages_wait_for_their_time() -> None:
    """The tracker hook: a message with a future deliver-at is held, then dispatched once due."""
    from cursorkit.delayed import InMemoryDelayedDeliveryTracker

    now = [0]
    tracker = InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=lambda: now[0])
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)), delayed=tracker)
    c = C("c")
    d.add_consumer(c, 10)
    slot = d.slot_of(b"k")
    d.add_entries(
        [Entry(Position(1, 0), slot, 5_000), Entry(Position(1, 1), slot), Entry(Position(1, 2), slot, -1)]
    )
    assert sent_to(d.dispatch(), c) == [Position(1, 1), Position(1, 2)]  # due or not delayed
    assert tracker.number_of_delayed_messages == 1
    now[0] = 4_000
    assert d.dispatch() == []
    now[0] = 5_000
    assert sent_to(d.dispatch(), c) == [Position(1, 0)]


class _CountingTracker(InMemoryDelayedDeliveryTracker):
    """A tracker whose ``add_many`` is overridden: the dispatcher must call it through Python."""

    calls = 0

    def add_many(self, ledger_ids: Any, entry_ids: Any, deliver_at: Any) -> Any:
        type(self).calls += 1
        return super().add_many(ledger_ids, entry_ids, deliver_at)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=300),
    st.booleans(),
)
def test_a_read_splits_into_held_and_sent_entries_at_any_length(
    rows: list[tuple[int, int]], overridden: bool
) -> None:
    """A read of any length splits into what the tracker holds and what goes out now.

    Reads span words of 64 and a partial last one: exactly the held entries wait, the rest go out
    in read order, and the held ones follow once due. The native tracker is handed the read in
    Rust; a subclass that overrides ``add_many`` is called through Python, with the same outcome.
    """
    import numpy as np

    now = [0]
    make = _CountingTracker if overridden else InMemoryDelayedDeliveryTracker
    tracker = make(tick_time_ms=1, clock=lambda: now[0])
    calls = _CountingTracker.calls
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)), delayed=tracker)
    c = C("c")
    d.add_consumer(c, 10_000)
    n = len(rows)
    # 0: no deliver-at; 1: in the past; 2 and 3: held until 1,000 or 2,000.
    at = np.array([(0, -1, 1_000, 2_000)[kind] for kind, _ in rows], dtype=np.int64)
    slots = np.array([key * 1_000 for _, key in rows], dtype=np.int64)
    d.add_read_columns(np.ones(n, dtype=np.int64), np.arange(n, dtype=np.int64), slots, at)
    sent = sent_to(d.dispatch(), c)
    assert sent == [Position(1, e) for e in range(n) if rows[e][0] < 2]
    assert tracker.number_of_delayed_messages == sum(k >= 2 for k, _ in rows)
    assert _CountingTracker.calls == calls + overridden
    now[0] = 1_000
    assert sorted(sent_to(d.dispatch(), c)) == [Position(1, e) for e in range(n) if rows[e][0] == 2]
    now[0] = 2_000
    assert sorted(sent_to(d.dispatch(), c)) == [Position(1, e) for e in range(n) if rows[e][0] == 3]


def test_bulk_ack_accepts_what_pulsar_accepts_and_redeliver_returns_everything() -> None:
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    c = C("c")
    d.add_consumer(c, 5)
    d.add_entries([(Position(1, e), b"k") for e in range(3)])
    assert sent_to(d.dispatch(), c) == [Position(1, e) for e in range(3)]
    assert d.ack_many(c, [Position(1, 0), Position(1, 9)]) == AckResult(acked=1, not_pending=1)
    assert d.ack_many(c, [Position(1, 0), Position(1, 0)]) == AckResult(duplicates=2)
    with pytest.raises(InvalidInputType):
        d.ack_many(c, [Position(1, 1), "1:2"])  # type: ignore[list-item]
    assert d.unacked(c) == [Position(1, 1), Position(1, 2)]
    assert d.cursor.mark_delete_position == Position(1, 0)
    assert d.redeliver(c) == [Position(1, 1), Position(1, 2)]
    assert d.replay_queue == [Position(1, 1), Position(1, 2)]
    assert sent_to(d.dispatch(), c) == [Position(1, 1), Position(1, 2)]
    (stats,) = d.stats().consumers
    assert stats.key_hash_ranges == [(0, 65536)] and stats.msg_out_counter == 5


def test_keys_of_the_wrong_type_are_refused() -> None:
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    with pytest.raises(InvalidInputType):
        d.add_entries([(Position(1, 0), 5)])  # type: ignore[list-item]
    with pytest.raises(InvalidInputType):
        d.slot_of(None)  # type: ignore[arg-type]
    assert d.stats().replay_size == 0


def test_columnar_reads() -> None:
    """``add_read`` is ``add_entries`` as columns: same dispatch, typed errors, state unchanged."""
    import numpy as np

    from cursorkit.delayed import InMemoryDelayedDeliveryTracker

    now = [0]
    tracker = InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=lambda: now[0])
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)), delayed=tracker)
    c = C("c")
    d.add_consumer(c, 10)
    slot = d.slot_of(b"k")
    positions = [Position(1, e) for e in range(3)]
    with pytest.raises(InvalidArgument):
        d.add_read(positions, [slot, slot])
    with pytest.raises(InvalidInputType):
        d.add_read([(1, 0)], [slot])  # type: ignore[list-item]
    d.add_read(positions, np.full(3, slot), deliver_at=[-1, 500, -1])
    assert sent_to(d.dispatch(), c) == [Position(1, 0), Position(1, 2)]
    now[0] = 500
    assert sent_to(d.dispatch(), c) == [Position(1, 1)]


@given(st.integers(1, 40), st.lists(st.integers(0, 90), max_size=8))
@settings(max_examples=60, deadline=None)
def test_the_simulation_numbers_positions_densely_per_ledger(ledger_size: int, chunks: list[int]) -> None:
    """Published message i sits at (i // ledger_size + 1, i % ledger_size), chunks crossing ledgers or not."""
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(points_per_consumer=5), cursor=Cursor())
    sim = Simulation(d, seed=1, keys=7, ledger_size=ledger_size)
    drawn = [sim.draw_keys(n) for n in chunks]
    for keys in drawn:
        sim.publish_keys(keys)
    total = sum(chunks)
    assert sim.ledgers.tolist() == [i // ledger_size + 1 for i in range(total)]
    assert sim.entries.tolist() == [i % ledger_size for i in range(total)]
    flat = [int(k) for keys in drawn for k in keys]
    assert sim.keys.tolist() == flat
    assert sim.slots.tolist() == [sim.key_slots[k] for k in flat]


def test_the_simulation_is_deterministic_per_seed() -> None:
    def trace(seed: int) -> list[tuple[str, Position]]:
        d = KeySharedDispatcher(selector=ConsistentHashingSelector(points_per_consumer=10), cursor=Cursor())
        sim = Simulation(d, seed=seed, keys=50, distribution="zipf", read_batch=9)
        log: list[tuple[str, Position]] = []
        original = d.dispatch_columns

        def recording() -> list[tuple[object, Any, Any]]:
            out = original()
            log.extend(
                (getattr(c, "name", "?"), Position(lid, eid))
                for c, ls, es in out
                for lid, eid in zip(ls.tolist(), es.tolist(), strict=True)
            )
            return out

        d.dispatch_columns = recording  # type: ignore[method-assign]
        sim.run_script("join a 3\njoin b 2\npublish 200\nstep 10\njoin c 4\nleave a\ndrain")
        return log

    assert trace(7) == trace(7)
    assert trace(7) != trace(8)


@pytest.mark.parametrize(
    "form",
    [
        *("int64", "strided", "int32", "big-endian", "longlong", "subclass", "read-only"),
        *("list", "tuple", "arrow"),
    ],
)
def test_ack_columns_reads_every_column_form_alike(form: str) -> None:
    """Short int64 arrays take a stack copy; every other form the general reader: same outcome."""
    import numpy as np

    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    c = C("c")
    d.add_consumer(c, 100)
    d.add_entries([(Position(1, e), b"k") for e in range(20)])
    assert len(sent_to(d.dispatch(), c)) == 20
    wide_l = np.ones(20, dtype=np.int64)
    wide_e = np.arange(0, 20, dtype=np.int64)
    ls: Any
    es: Any
    if form == "int64":
        ls, es = wide_l[1:20:2].copy(), wide_e[1:20:2].copy()
    elif form == "strided":
        ls, es = wide_l[1:20:2], wide_e[1:20:2]  # views, not contiguous
    elif form == "int32":
        ls, es = wide_l[1:20:2].astype(np.int32), wide_e[1:20:2].astype(np.int32)
    elif form == "big-endian":
        ls, es = wide_l[1:20:2].astype(">i8"), wide_e[1:20:2].astype(">i8")
    elif form == "longlong":
        ls, es = wide_l[1:20:2].astype(np.longlong), wide_e[1:20:2].astype(np.longlong)
    elif form == "subclass":
        ls, es = np.ma.masked_array(wide_l[1:20:2]), np.ma.masked_array(wide_e[1:20:2])
    elif form == "read-only":
        ls, es = wide_l[1:20:2].copy(), wide_e[1:20:2].copy()
        ls.flags.writeable = es.flags.writeable = False
    elif form == "list":
        ls, es = [1] * 10, list(range(1, 20, 2))
    elif form == "tuple":
        ls, es = (1,) * 10, tuple(range(1, 20, 2))
    else:
        pa = pytest.importorskip("pyarrow")
        ls, es = pa.array([1] * 10, pa.int64()), pa.array(range(1, 20, 2), pa.int64())
    assert d.ack_columns(c, ls, es) == AckResult(acked=10)
    assert d.unacked(c) == [Position(1, e) for e in range(0, 20, 2)]
    with pytest.raises(InvalidArgument):
        d.ack_columns(c, np.ones(3, dtype=np.int64), np.arange(2, dtype=np.int64))
    assert d.ack_columns(c, np.ones(0, dtype=np.int64), np.ones(0, dtype=np.int64)) == AckResult()
    assert d.ack_columns(c, np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64)) == AckResult(acked=1)
    assert d.cursor.mark_delete_position == Position(1, 1)


def test_dispatch_columns_are_independent_arrays_of_one_dispatch() -> None:
    """A dispatch's columns share one buffer, each with only its consumer's positions.

    Writing into one changes no other, and they outlive the dispatcher and later dispatches.
    """
    import gc

    import numpy as np

    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)))
    consumers = [C(f"c{i}") for i in range(5)]
    for c in consumers:
        d.add_consumer(c, 1000)
    keys = [f"k{i}".encode() for i in range(40)]
    d.add_entries([(Position(1, e), keys[e % 40]) for e in range(200)])
    out = d.dispatch_columns()
    assert len(out) >= 2
    expect = {c: (ls.tolist(), es.tolist()) for c, ls, es in out}
    for _, ls, es in out:
        assert ls.dtype == np.int64 and es.dtype == np.int64
        assert ls.flags.c_contiguous and ls.flags.writeable and len(ls) == len(es)
    assert sorted(e for _, _, es in out for e in es.tolist()) == list(range(200))
    first, ls0, es0 = out[0]
    ls0[:] = -1
    es0 += 1000
    for c, ls, es in out[1:]:
        assert (ls.tolist(), es.tolist()) == expect[c]
    del d
    gc.collect()
    for c, ls, es in out[1:]:
        assert (ls.tolist(), es.tolist()) == expect[c]
    assert ls0.tolist() == [-1] * len(ls0)
    assert es0.tolist() == [e + 1000 for e in expect[first][1]]


def test_batch_entries_take_their_messages_of_permits() -> None:
    """Permits count messages: an entry of 4 messages takes 4 (the last one may overshoot)."""
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)))
    a = C("a")
    d.add_consumer(a, 10)
    positions = [Position(1, e) for e in range(4)]
    d.set_batch_sizes(positions, [4, 4, 4, 4])
    d.add_read(positions, [7, 7, 7, 7])
    (consumer, sent), *_ = d.dispatch()
    assert consumer is a and sent == positions[:3]
    assert d.stats().consumers[0].available_permits == 0
    with pytest.raises(CursorkitError):
        d.set_batch_sizes(positions[:1], [0])
