"""A broker's event loop over one Key_Shared subscription, as a benchmark: per-event calls, not bulk ones.

A broker does not ack a round at once. Each step it reads a batch when the dispatcher lets it,
dispatches, and then the consumers' acks arrive one consumer at a time, a few positions each (what
the client grouped since it received them ``ack_lag`` steps earlier), each followed by that
consumer's flow permits. Every ``churn_every`` messages read, one consumer leaves (its unacked
messages go back for redelivery) and a new one joins. The same loop drives cursorkit's
``KeySharedDispatcher`` through its object API or its column API, and a naive pure-Python
dispatcher with no ordering guarantee at all.

Producers' draws (keys, positions, slots) are made before the clock starts; the loop checks that
every message was acknowledged exactly once, so a faster run cannot be a wrong one.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from cursorkit import Cursor, Position
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash

__all__ = ["LEDGER_SIZE", "LoopInputs", "LoopSpec", "loop_cursor", "prepare", "run_fresh", "run_loop"]

I64 = npt.NDArray[np.int64]
Form = Literal["objects", "columns"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSpec:
    """The shape of the loop (the defaults are the standard run's)."""

    messages: int = 200_000
    consumers: int = 100
    permits: int = 1000
    """Each consumer's receiver queue: its first flow, and the cap of what it holds."""
    keys: int = 10_000
    zipf: float = 1.1
    read_batch: int = 100
    """Entries a read takes (Pulsar's ``dispatcherMaxReadBatchSize``)."""
    ack_lag: int = 3
    """Steps between a consumer receiving messages and its ack of them."""
    churn_every: int = 10_000
    """Messages read between one consumer leaving and another joining."""
    seed: int = 20_261_126


@dataclass(frozen=True, slots=True)
class LoopInputs:
    """What the producers published: positions (as objects and as columns) and their slots."""

    positions: list[Position]
    ledgers: I64
    entries: I64
    slots: I64


class _Consumer:
    """A consumer as a selector sees it: a name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def prepare(spec: LoopSpec) -> LoopInputs:
    """The messages of one run: Zipf-drawn keys hashed to consistent-hashing slots, in ledgers of 50k."""
    rng = np.random.default_rng(spec.seed)
    key_slots = np.array(
        [slot_of_hash(sticky_key_hash(f"key-{k}".encode()), "consistent") for k in range(spec.keys)],
        dtype=np.int64,
    )
    keys = (rng.zipf(spec.zipf, spec.messages) - 1) % spec.keys
    index = np.arange(spec.messages, dtype=np.int64)
    ledgers, entries = 1 + index // LEDGER_SIZE, index % LEDGER_SIZE
    positions = list(map(Position, ledgers.tolist(), entries.tolist()))
    return LoopInputs(positions, ledgers, entries, key_slots[keys])


LEDGER_SIZE = 50_000
"""Entries per ledger of the published messages (Pulsar's ``managedLedgerMaxEntriesPerLedger``)."""


def loop_cursor(spec: LoopSpec) -> Cursor:
    """The subscription's cursor, knowing its ledgers (so mark-delete rolls across them, as a broker's)."""
    ledgers = -(-spec.messages // LEDGER_SIZE)
    sizes = {1 + i: min(LEDGER_SIZE, spec.messages - i * LEDGER_SIZE) for i in range(ledgers)}
    return Cursor(Position(1, -1), ledger_sizes=sizes)


def run_loop(d: Any, cursor: Cursor, spec: LoopSpec, inputs: LoopInputs, form: Form) -> float:
    """Runs the loop on dispatcher ``d`` (its selector fresh, ``cursor`` its cursor); returns seconds.

    Raises ``AssertionError`` when a message is not acknowledged exactly once, or the loop stalls.
    """
    n = spec.messages
    made = 0

    def consumer() -> _Consumer:
        nonlocal made
        made += 1
        return _Consumer(f"c{made}")

    live: list[_Consumer] = [consumer() for _ in range(spec.consumers)]
    for c in live:
        d.add_consumer(c, spec.permits)
    gc.collect()
    gc.freeze()
    objects = form == "objects"
    positions, ls, es, slots = inputs.positions, inputs.ledgers, inputs.entries, inputs.slots
    received: deque[tuple[int, _Consumer, Any, Any]] = deque()
    gone: set[_Consumer] = set()
    read = acked = step = 0
    next_churn = spec.churn_every
    stalled = 0
    t0 = time.perf_counter()
    while acked < n:
        step += 1
        if read < n and d.should_read():
            k = min(spec.read_batch, n - read)
            if objects:
                d.add_read(positions[read : read + k], slots[read : read + k])
            else:
                d.add_read_columns(ls[read : read + k], es[read : read + k], slots[read : read + k])
            read += k
        if objects:
            for c, ps in d.dispatch():
                received.append((step, c, ps, None))
        else:
            for c, cl, ce in d.dispatch_columns():
                received.append((step, c, cl, ce))
        due = step - spec.ack_lag
        progressed = False
        while received and received[0][0] <= due:
            _, c, a, b = received.popleft()
            if c in gone:
                continue  # it left before acking: its messages went back for redelivery
            if objects:
                d.ack_many(c, a)
                count = len(a)
            else:
                d.ack_columns(c, a, b)
                count = len(a)
            d.add_permits(c, count)
            acked += count
            progressed = True
        if read >= next_churn:
            next_churn += spec.churn_every
            leaver = live.pop(0)
            gone.add(leaver)
            d.remove_consumer(leaver)
            joiner = consumer()
            live.append(joiner)
            d.add_consumer(joiner, spec.permits)
        stalled = 0 if progressed or received else stalled + 1
        if stalled > 1000:
            gc.unfreeze()
            raise AssertionError(f"the loop stalled at {acked:,} of {n:,} messages acked")
    seconds = time.perf_counter() - t0
    gc.unfreeze()
    assert acked == n, f"{acked:,} acks for {n:,} messages"
    assert cursor.mark_delete_position == positions[-1], (
        f"mark-delete {cursor.mark_delete_position}, expected {positions[-1]}"
    )
    return seconds


def run_fresh(spec: LoopSpec, inputs: LoopInputs, form: Form, *, naive: bool = False) -> float:
    """``run_loop`` on a new dispatcher (cursorkit's, or the naive peer) with its own selector and cursor."""
    from cursorkit.bench.peers import NaiveDispatcher
    from cursorkit.keyshared.dispatcher import KeySharedDispatcher
    from cursorkit.keyshared.selectors import ConsistentHashingSelector

    cursor = loop_cursor(spec)
    selector: ConsistentHashingSelector[Any] = ConsistentHashingSelector()
    d: Any = (
        NaiveDispatcher(selector=selector, cursor=cursor)
        if naive
        else KeySharedDispatcher(selector=selector, cursor=cursor)
    )
    return run_loop(d, cursor, spec, inputs, form)
