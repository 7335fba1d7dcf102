"""The per-key in-flight cap (``max_unacked_per_key``, beyond Pulsar) against a model of what is held.

Random reads, dispatches, acks, nacks and permits: no key ever has more than the cap sent and not
acknowledged, a key held for the cap says so in the stats' "why blocked", each key's first
deliveries keep position order, and acking everything drains the topic.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzz_budget
from cursorkit import Cursor, Position
from cursorkit.errors import CursorkitError
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector


@dataclass(eq=False)
class C:
    name: str


def _keys(d: KeySharedDispatcher, n: int) -> list[bytes]:
    """``n`` keys on distinct slots (so a key's count is its slot's)."""
    keys: list[bytes] = []
    slots: set[int] = set()
    i = 0
    while len(keys) < n:
        k = f"key-{i}".encode()
        i += 1
        if d.slot_of(k) not in slots:
            slots.add(d.slot_of(k))
            keys.append(k)
    return keys


op = st.one_of(
    st.tuples(st.just("read"), st.lists(st.integers(0, 4), min_size=1, max_size=6)),
    st.tuples(st.just("dispatch"), st.just(0)),
    st.tuples(st.just("ack"), st.integers(0, 1_000)),
    st.tuples(st.just("nack"), st.integers(0, 1_000)),
    st.tuples(st.just("permits"), st.integers(0, 5)),
)


@settings(max_examples=fuzz_budget.runs(100, 2_000), deadline=None)
@pytest.mark.fuzz
@given(cap=st.integers(1, 3), ops=st.lists(op, max_size=60))
def test_no_key_holds_more_than_the_cap(cap: int, ops: list[tuple[str, object]]) -> None:
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, max_unacked_per_key=cap)
    consumers = [C("a"), C("b")]
    for c in consumers:
        d.add_consumer(c, 3)
    keys = _keys(d, 5)
    key_of: dict[Position, bytes] = {}
    held: dict[Position, C] = {}
    first_sent: dict[bytes, list[Position]] = {k: [] for k in keys}
    ever_sent: set[Position] = set()
    next_entry = 0

    def dispatch() -> None:
        for consumer, positions in d.dispatch():
            for p in positions:
                assert p not in held
                held[p] = consumer
                if p not in ever_sent:
                    ever_sent.add(p)
                    first_sent[key_of[p]].append(p)
        for k in keys:
            n = sum(1 for p in held if key_of[p] == k)
            assert n <= cap, f"{k!r}: {n} unacked, cap {cap}"
        blocked = d.stats().blocked
        for k in keys:
            why = blocked.get(d.slot_of(k))
            if why is not None and why.reason == "key-unacked-limit":
                n = sum(1 for p in held if key_of[p] == k)
                assert n >= cap, f"{k!r} held for the cap with {n} of {cap} out"

    for name, arg in ops:
        if name == "read":
            assert isinstance(arg, list)
            positions = []
            for i in arg:
                p = Position(1, next_entry)
                next_entry += 1
                key_of[p] = keys[i]
                positions.append(p)
            d.add_read(positions, [d.slot_of(key_of[p]) for p in positions])
        elif name == "dispatch":
            dispatch()
        elif name in ("ack", "nack") and held:
            assert isinstance(arg, int)
            p = sorted(held)[arg % len(held)]
            consumer = held.pop(p)
            if name == "ack":
                d.ack(consumer, p)
            else:
                d.nack(consumer, [p])
        elif name == "permits":
            assert isinstance(arg, int)
            d.add_permits(consumers[arg % 2], arg)
    for k, sent in first_sent.items():
        assert sent == sorted(sent), f"{k!r} first deliveries out of order: {sent}"
    for c in consumers:
        d.add_permits(c, 10_000)
    for _ in range(10_000):
        dispatch()
        if not held:
            break
        for p, consumer in list(held.items()):
            d.ack(consumer, p)
            del held[p]
    assert next_entry == 0 or cursor.mark_delete_position == Position(1, next_entry - 1)


def test_a_held_key_waits_and_the_others_go() -> None:
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(selector=AutoSplitSelector(), cursor=cursor, max_unacked_per_key=2)
    c = C("a")
    d.add_consumer(c, 100)
    hot, cold = _keys(d, 2)
    positions = [Position(1, i) for i in range(5)]
    d.add_read(positions, [d.slot_of(k) for k in (hot, hot, hot, cold, hot)])
    ((_, sent),) = d.dispatch()
    assert sent == [Position(1, 0), Position(1, 1), Position(1, 3)]
    why = d.stats().blocked[d.slot_of(hot)]
    assert (why.reason, why.position) == ("key-unacked-limit", Position(1, 2))
    d.ack(c, Position(1, 0))
    ((_, sent),) = d.dispatch()
    assert sent == [Position(1, 2)]
    assert d.max_unacked_per_key == 2


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(CursorkitError):
        KeySharedDispatcher(
            selector=AutoSplitSelector(), cursor=Cursor(Position(1, -1)), max_unacked_per_key=-1
        )
