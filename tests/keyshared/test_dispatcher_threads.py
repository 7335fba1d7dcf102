"""KeySharedDispatcher under threads: consumers acking and flowing while the broker reads and dispatches.

The per-event calls go straight into Rust and release the GIL on large inputs, so their locks, not
Python's, keep the state whole. One thread reads and dispatches, one thread per consumer acks what
it received (single acks, ``Position`` lists and columns, small and large) and flows permits back,
one more polls the read and count calls; every message must be sent once and acked once, each
key's messages must reach its consumer in publish order, and the cursor must equal a sequential
replay of every ack on a fresh cursor.
"""

from __future__ import annotations

import queue
import random
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector

MESSAGES = 30_000
CONSUMERS = 4
PERMITS = 700
READ = 300
"""Entries per read: above the size at which a read or dispatch releases the GIL."""


class C:
    """A consumer."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


@contextmanager
def tight_switching() -> Iterator[None]:
    """Threads switch every few bytecodes, so calls interleave as much as CPython lets them."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _consume(
    d: KeySharedDispatcher,
    c: C,
    inbox: queue.Queue[tuple[Any, Any] | None],
    acked: list[Position],
    totals: list[int],
    seed: int,
) -> None:
    """Acks what arrives in random-sized groups and forms, then flows the same count back."""
    rng = random.Random(seed)
    while (item := inbox.get()) is not None:
        ls, es = item
        positions = list(map(Position, ls.tolist(), es.tolist()))
        i = 0
        while i < len(positions):
            k = rng.choice((1, 2, 5, 16, 300))
            group = positions[i : i + k]
            form = rng.randrange(3)
            if form == 0 and len(group) == 1:
                result = d.ack(c, group[0])
            elif form == 1:
                result = d.ack_many(c, group)
            else:
                result = d.ack_columns(c, ls[i : i + k], es[i : i + k])
            assert result.acked == len(group), (result, group[:3])
            acked.extend(group)
            totals[0] += len(group)
            d.add_permits(c, len(group))
            i += k


def test_threads_acking_flowing_and_dispatching_match_a_sequential_replay() -> None:
    rng = np.random.default_rng(28)
    cursor = Cursor(Position(1, -1))
    selector: ConsistentHashingSelector[C] = ConsistentHashingSelector()
    d = KeySharedDispatcher(selector=selector, cursor=cursor)
    consumers = [C(f"c{i}") for i in range(CONSUMERS)]
    for c in consumers:
        d.add_consumer(c, PERMITS)
    key_slots = np.array([d.slot_of(f"k{k}".encode()) for k in range(200)], dtype=np.int64)
    keys = rng.integers(0, len(key_slots), MESSAGES)
    slots = key_slots[keys]
    entries = np.arange(MESSAGES, dtype=np.int64)
    ledgers = np.ones(MESSAGES, dtype=np.int64)
    inboxes: dict[C, queue.Queue[tuple[Any, Any] | None]] = {c: queue.Queue() for c in consumers}
    received: dict[str, list[int]] = {c.name: [] for c in consumers}
    acked: dict[str, list[Position]] = {c.name: [] for c in consumers}
    totals = {c.name: [0] for c in consumers}
    errors: list[BaseException] = []
    done = threading.Event()

    def guarded(f: Any, *args: Any) -> None:
        try:
            f(*args)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            done.set()

    def broker() -> None:
        read = sent = 0
        while sent < MESSAGES and not done.is_set():
            if read < MESSAGES and d.should_read():
                k = min(READ, MESSAGES - read)
                d.add_read_columns(ledgers[read : read + k], entries[read : read + k], slots[read : read + k])
                read += k
            for c, cl, ce in d.dispatch_columns():
                received[c.name].extend(ce.tolist())
                sent += len(cl)
                inboxes[c].put((cl, ce))
        for box in inboxes.values():
            box.put(None)

    def poller() -> None:
        while not done.is_set():
            d.should_read()
            d.redelivery_count(Position(1, 7))
            d.stats()

    with tight_switching():
        threads = [threading.Thread(target=guarded, args=(broker,))]
        threads += [
            threading.Thread(
                target=guarded, args=(_consume, d, c, inboxes[c], acked[c.name], totals[c.name], i)
            )
            for i, c in enumerate(consumers)
        ]
        watcher = threading.Thread(target=guarded, args=(poller,))
        for t in threads:
            t.start()
        watcher.start()
        for t in threads:
            t.join(timeout=120)
        done.set()
        watcher.join(timeout=10)
    assert not errors, errors[:1]
    assert not any(t.is_alive() for t in [*threads, watcher]), "a thread hung"

    # Every message sent once and acked once; each key's messages reached one consumer in order.
    everything = sorted(e for got in received.values() for e in got)
    assert everything == list(range(MESSAGES))
    assert sum(t[0] for t in totals.values()) == MESSAGES
    owner_of_key: dict[int, str] = {}
    for name, got in received.items():
        for key, group in _by_key(got, keys).items():
            assert owner_of_key.setdefault(key, name) == name, f"key {key} went to two consumers"
            assert group == sorted(group), f"key {key} out of order on {name}"
    # The cursor equals a sequential replay of every ack.
    replay = Cursor(Position(1, -1))
    for name in sorted(acked):
        for p in acked[name]:
            replay.ack(p)
    assert cursor.mark_delete_position == replay.mark_delete_position == Position(1, MESSAGES - 1)
    assert cursor.individually_deleted == replay.individually_deleted
    stats = d.stats()
    assert stats.replay_size == 0
    assert all(d.unacked(c) == [] for c in consumers)


def _by_key(entries: list[int], keys: np.ndarray) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for e in entries:
        out.setdefault(int(keys[e]), []).append(e)
    return out


@pytest.mark.parametrize("calls", [2_000])
def test_concurrent_calls_on_one_consumer_never_double_count(calls: int) -> None:
    """Two threads acking the same positions for one consumer: each position counts once."""
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)))
    c = C("c")
    d.add_consumer(c, calls)
    slot = d.slot_of(b"k")
    d.add_read_columns(np.ones(calls, np.int64), np.arange(calls, dtype=np.int64), np.full(calls, slot))
    ((_, sent),) = d.dispatch()
    counts = [0, 0]

    def acker(i: int) -> None:
        for p in sent:
            counts[i] += d.ack(c, p).acked

    with tight_switching():
        threads = [threading.Thread(target=acker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert sum(counts) == calls
    assert d.cursor.mark_delete_position == Position(1, calls - 1)
