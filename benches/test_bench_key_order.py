"""Key-ordered nacks (issue 31, beyond Pulsar): what keeping key order across nacks costs.

The scenario: 20 consumers with 1,000 permits each, 10,000 keys drawn uniformly, reads of 5,000
entries, draining mode. Consumers behave as Pulsar's client: each round a consumer handles up
to 200 received messages in arrival order, nacks 1% of them (each message at most once) and acks
the rest; acks leave every round (the ack group), nacks every third round (the nack delay), so a
nack arrives after the acks of later messages of its key; permits come back as messages are handled.

Measured, key order on beside off in the same run (the pair's order swapped each round): the time
the dispatcher's calls take per message (dispatch, acks, nacks, permits, reads: the core's share
of a broker's work), the loop's throughput (messages / wall time until all are acked, the model of
the clients included), the keys whose final handlings (the ones whose ack counted) are out of
position order, and the extra handlings (messages handled again).
Targets: no key out of order with key order on (also asserted); key order adds at most 0.5 us of
dispatcher time per message. Without key order keys come out of order (Pulsar, PIP-493).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector

N = 400_000
SMOKE_N = 5_000
CONSUMERS = 20
KEYS = 10_000
PERMITS = 1_000
READ = 5_000
HANDLE = 200
NACK_RATE = 0.01
NACK_EVERY = 3
"""Nacks leave every this many rounds; acks every round."""

ON = cw.CURSORKIT
"""The cursorkit column: key-ordered nacks on."""
OFF = "cursorkit, Pulsar's nacks"
THROUGHPUT = f"{CONSUMERS} consumers, {KEYS:,} keys, 1% nacks, client timers: loop throughput"
CORE = "dispatcher time per message"
ADDED = "dispatcher time added by key order, per message"
OUT_OF_ORDER = "keys whose final handlings are out of order"
EXTRA = "extra handlings per message"
RATIO = "loop throughput: key order on / off"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(THROUGHPUT, "k msgs/s", True, None),
        cw.Row(RATIO, "×", True, None),
        cw.Row(CORE, "us", False, None),
        cw.Row(ADDED, "us", False, 0.5),
        cw.Row(OUT_OF_ORDER, "keys", False, 0.0),
        cw.Row(EXTRA, "×", False, None),
    ],
    peers=(OFF,),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Key-ordered nacks - {mode}", judge=not smoke)


@dataclass(eq=False)
class _Client:
    name: str
    queue: list[Position] = field(default_factory=list)
    acks: dict[Position, int] = field(default_factory=dict)
    nacks: list[Position] = field(default_factory=list)


@dataclass
class Outcome:
    """One run: its time, the dispatcher's share of it, keys out of order, handlings."""

    seconds: float
    core: float
    out_of_order: int
    handlings: int


def run(n: int, key_ordered: bool) -> Outcome:
    """The scenario of the module docs over ``n`` messages."""
    rng = random.Random(7)
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(
        selector=ConsistentHashingSelector(), cursor=cursor, mode="draining", key_ordered_nacks=key_ordered
    )
    clients = [_Client(f"c{i}") for i in range(CONSUMERS)]
    for c in clients:
        d.add_consumer(c, PERMITS)
    slot_of_key = np.array([d.slot_of(f"key-{k}".encode()) for k in range(KEYS)], dtype=np.int64)
    keys = np.array([rng.randrange(KEYS) for _ in range(n)], dtype=np.int64)
    nack_draw = [rng.random() < NACK_RATE for _ in range(n)]
    nacked: set[Position] = set()
    last_ack: dict[Position, int] = {}
    handled = 0
    clock = 0
    read = 0
    rounds = 0
    now = time.perf_counter
    core = 0.0
    t0 = now()
    while cursor.mark_delete_position.entry_id < n - 1:
        rounds += 1
        t = now()
        if read < n and d.should_read():
            k = min(READ, n - read)
            entries = np.arange(read, read + k, dtype=np.int64)
            d.add_read_columns(np.ones(k, dtype=np.int64), entries, slot_of_key[keys[read : read + k]])
            read += k
        out = d.dispatch()
        core += now() - t
        for c, positions in out:
            pending = c.acks
            c.queue.extend(p for p in positions if p not in pending)
        for c in clients:
            batch, c.queue = c.queue[:HANDLE], c.queue[HANDLE:]
            for p in batch:
                clock += 1
                handled += 1
                if nack_draw[p.entry_id] and p not in nacked:
                    nacked.add(p)
                    c.nacks.append(p)
                else:
                    c.acks[p] = clock
            acks = sorted(c.acks)
            for p in acks:
                last_ack[p] = c.acks[p]
            c.acks.clear()
            t = now()
            if batch:
                d.add_permits(c, len(batch))
            if acks:
                d.ack_many(c, acks)
            if c.nacks and rounds % NACK_EVERY == 0:
                d.nack(c, c.nacks)
                c.nacks = []
            core += now() - t
    seconds = now() - t0
    # A message's accepted ack is the last one sent for it (dropped ones come before it).
    previous: dict[int, int] = {}
    broken: set[int] = set()
    for e in range(n):
        key = int(keys[e])
        moment = last_ack[Position(1, e)]
        if moment < previous.get(key, -1):
            broken.add(key)
        previous[key] = moment
    return Outcome(seconds, core, len(broken), handled)


def test_key_order_cost(benchmark: Any, smoke: bool) -> None:
    """Key order on and off alternately (the pair's order swapped each round); best of each."""
    n = SMOKE_N if smoke else N
    benchmark.group = "key-ordered nacks"
    on: list[Outcome] = []
    off: list[Outcome] = []

    def timed() -> None:
        pair = [(True, on), (False, off)]
        if len(on) % 2:
            pair.reverse()
        for ordered, out in pair:
            out.append(run(n, ordered))

    benchmark.pedantic(timed, rounds=1 if smoke else 5, iterations=1)
    assert all(o.out_of_order == 0 for o in on), [o.out_of_order for o in on]
    assert any(o.out_of_order > 0 for o in off), "Pulsar's nacks kept every key in order: no race was run"
    best_on = min(o.seconds for o in on)
    best_off = min(o.seconds for o in off)
    TABLE.record(THROUGHPUT, ON, n / best_on / 1e3, lower=False)
    TABLE.record(THROUGHPUT, OFF, n / best_off / 1e3, lower=False)
    TABLE.record(OUT_OF_ORDER, ON, on[-1].out_of_order, lower=True)
    TABLE.record(OUT_OF_ORDER, OFF, off[-1].out_of_order, lower=True)
    TABLE.record(EXTRA, ON, on[-1].handlings / n - 1, lower=True)
    TABLE.record(EXTRA, OFF, off[-1].handlings / n - 1, lower=True)
    TABLE.record(RATIO, ON, best_off / best_on, lower=False)
    core_on = min(o.core for o in on) / n * 1e6
    core_off = min(o.core for o in off) / n * 1e6
    TABLE.record(CORE, ON, core_on, lower=True)
    TABLE.record(CORE, OFF, core_off, lower=True)
    TABLE.record(ADDED, ON, core_on - core_off, lower=True)
