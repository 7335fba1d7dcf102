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

``run_ceiling`` measures what no dispatcher can beat on this loop: cursorkit's own decisions,
recorded, are replayed by a stand-in whose calls do nothing (the column form still makes each
delivery's two numpy views, as any column API must). What is left between it and cursorkit is the
dispatcher's own work.
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

__all__ = [
    "LEDGER_SIZE",
    "LoopInputs",
    "LoopSpec",
    "loop_cursor",
    "prepare",
    "run_ceiling",
    "run_fresh",
    "run_loop",
]

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


def _fresh(spec: LoopSpec, *, naive: bool = False) -> tuple[Any, Cursor]:
    """A new dispatcher (cursorkit's, or the naive peer) with its own selector, and its cursor."""
    from cursorkit.bench.peers import NaiveDispatcher
    from cursorkit.keyshared.dispatcher import KeySharedDispatcher
    from cursorkit.keyshared.selectors import ConsistentHashingSelector

    cursor = loop_cursor(spec)
    selector: ConsistentHashingSelector[Any] = ConsistentHashingSelector()
    kind = NaiveDispatcher if naive else KeySharedDispatcher
    return kind(selector=selector, cursor=cursor), cursor


def run_fresh(spec: LoopSpec, inputs: LoopInputs, form: Form, *, naive: bool = False) -> float:
    """``run_loop`` on a new dispatcher (cursorkit's, or the naive peer) with its own selector and cursor."""
    d, cursor = _fresh(spec, naive=naive)
    return run_loop(d, cursor, spec, inputs, form)


class _Recorder:
    """Passes every call to a dispatcher, noting its read checks and deliveries (by consumer name)."""

    def __init__(self, d: Any) -> None:
        self.d = d
        self.reads: list[bool] = []
        self.sent: list[list[tuple[str, int]]] = []

    def should_read(self) -> bool:
        answer: bool = self.d.should_read()
        self.reads.append(answer)
        return answer

    def dispatch(self) -> Any:
        out = self.d.dispatch()
        self.sent.append([(c.name, len(ps)) for c, ps in out])
        return out

    def dispatch_columns(self) -> Any:
        out = self.d.dispatch_columns()
        self.sent.append([(c.name, len(ls)) for c, ls, _ in out])
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.d, name)


class _Replay:
    """A dispatcher doing no work: it gives back a recorded run's answers, to the same loop."""

    def __init__(self, rec: _Recorder, inputs: LoopInputs) -> None:
        self._reads = iter(rec.reads)
        self._sent = iter(rec.sent)
        self._by_name: dict[str, _Consumer] = {}
        self._positions = inputs.positions
        self._ledgers, self._entries = inputs.ledgers, inputs.entries

    def should_read(self) -> bool:
        return next(self._reads)

    def dispatch(self) -> list[tuple[_Consumer, list[Position]]]:
        out, at, ps = [], 0, self._positions
        for name, k in next(self._sent):
            out.append((self._by_name[name], ps[at : at + k]))
            at += k
        return out

    def dispatch_columns(self) -> list[tuple[_Consumer, I64, I64]]:
        out, at, ls, es = [], 0, self._ledgers, self._entries
        for name, k in next(self._sent):
            out.append((self._by_name[name], ls[at : at + k], es[at : at + k]))
            at += k
        return out

    def add_consumer(self, c: _Consumer, permits: int) -> None:
        self._by_name[c.name] = c

    def remove_consumer(self, c: _Consumer) -> None:
        pass

    def add_read(self, positions: Any, slots: Any) -> None:
        pass

    def add_read_columns(self, ledgers: Any, entries: Any, slots: Any) -> None:
        pass

    def ack_many(self, c: _Consumer, positions: Any) -> None:
        pass

    def ack_columns(self, c: _Consumer, ledgers: Any, entries: Any) -> None:
        pass

    def add_permits(self, c: _Consumer, n: int) -> None:
        pass


def run_ceiling(spec: LoopSpec, inputs: LoopInputs, form: Form, *, rounds: int = 1) -> float:
    """Seconds of the loop driving a dispatcher that does nothing (best of ``rounds``): the bound.

    A cursorkit run is recorded first (not timed); the replay gets the same read answers and the
    same deliveries (as slices of the published positions or columns, so the column form still
    makes two numpy arrays per delivery), and every other call returns at once.
    """
    d, cursor = _fresh(spec)
    rec = _Recorder(d)
    run_loop(rec, cursor, spec, inputs, form)
    best = float("inf")
    for _ in range(rounds):
        done = loop_cursor(spec)  # every message acknowledged, as the loop checks at the end
        done.ack_cumulative(inputs.positions[-1])
        best = min(best, run_loop(_Replay(rec, inputs), done, spec, inputs, form))
    return best
