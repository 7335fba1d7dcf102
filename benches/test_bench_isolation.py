"""Stuck-consumer isolation (issue 31, beyond Pulsar) on PIP-474's shape: one consumer of 20 hangs.

The scenario: 20 consumers with 1,000 permits each, 10,000 keys drawn uniformly, reads of up to
5,000 entries a round, Pulsar's look-ahead limits (2,000 per consumer, 20,000 per subscription),
draining mode. A round is one tick of the broker: the policy, a re-read if one is due, a read if
the dispatcher allows it, a dispatch; then each consumer handles up to 100 messages (acks them
and asks for as many permits). Consumer 0 hangs from 30% to 90% of the run's rounds (no acks, no
flows), then recovers. Time is counted in rounds, so the figures do not depend on the machine.

Measured, in one run: the messages the other 19 consumers handle per round during the hang, with
isolation on (``stuck_after`` = 10 rounds) and off (as in Pulsar), against the same consumers in
the run without a hang; the most entries the replay queue held; the entries spilled; and that the
hung consumer's keys resume in order when it recovers (first deliveries per key in position
order, asserted). Targets (the issue's): the 19 keep at least 90% of their throughput, and the
replay queue stays within its bound (the look-ahead limit, 20,000) while the hung consumer's
backlog comes back. In Pulsar the hung consumer's keys fill the replay queue to the look-ahead
limit and reads stop for everyone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import Entry, KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector

N = 1_000_000
SMOKE_N = 20_000
CONSUMERS = 20
KEYS = 10_000
PERMITS = 1_000
READ = 5_000
HANDLE = 100
STUCK_AFTER = 10.0
"""Rounds without progress that make a consumer stuck."""
HANG = (0.3, 0.9)
"""The hang, as fractions of the rounds the run without a hang takes."""

ON = cw.CURSORKIT
OFF = "Pulsar (no isolation)"
KEPT = "the other 19 consumers' throughput during the hang, vs no hang"
RATE = "the other 19 consumers during the hang"
REPLAY = "replay queue, most entries held"
SPILLED = "entries spilled and read again"
REREAD = "log entries read again per entry spilled"
PART = 100
"""Log entries one re-read reads (the broker's ``read_batch``); the rest of the span at the next."""
REREAD_PER_ROUND = 5_000
"""Log entries a round reads again at most (the broker's ``REREAD_PER_DISPATCH``)."""

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(KEPT, "×", True, 0.9),
        cw.Row(RATE, "msgs/round", True, None),
        cw.Row(REPLAY, "entries", False, 20_000.0),
        cw.Row(SPILLED, "entries", False, None),
        cw.Row(REREAD, "×", False, None),
    ],
    peers=(OFF,),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "one run"
    return TABLE.render(f"Stuck-consumer isolation - {mode}", judge=not smoke)


@dataclass(eq=False)
class _Client:
    name: str
    queue: list[Position]


@dataclass
class Run:
    """One run: rounds taken, what the others handled per round, the replay's peak, spills."""

    rounds: int
    others_by_round: list[int]
    replay_peak: int
    spilled: int
    reread: int
    """Log entries read again for spilled ones."""


def reread(d: KeySharedDispatcher, slots: npt.NDArray[np.int64]) -> int:
    """The broker's re-read: the spans named, ``PART`` entries at a time, while there is room."""
    read = 0
    while read < REREAD_PER_ROUND and (span := d.take_reread()) is not None:
        lo, hi = span[0].entry_id, span[1].entry_id
        top = min(hi, lo + PART - 1)
        read += top - lo + 1
        part = (Entry(Position(1, e), int(slots[e])) for e in range(lo, top + 1))
        d.add_reread(part, None if top == hi else Position(1, top))
    return read


def run(n: int, *, isolate: bool, hang: tuple[int, int] | None) -> Run:
    """The scenario of the module docs over ``n`` messages (``hang``: its first and last round)."""
    rng = random.Random(11)
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(
        selector=ConsistentHashingSelector(),
        cursor=cursor,
        mode="draining",
        stuck_after=STUCK_AFTER if isolate else None,
    )
    clients = [_Client(f"c{i}", []) for i in range(CONSUMERS)]
    for c in clients:
        d.add_consumer(c, PERMITS)
    slot_of_key = np.array([d.slot_of(f"key-{k}".encode()) for k in range(KEYS)], dtype=np.int64)
    slots = slot_of_key[np.array([rng.randrange(KEYS) for _ in range(n)], dtype=np.int64)]
    first_sent: dict[int, int] = {}
    sent = np.zeros(n, dtype=bool)
    others: list[int] = []
    read = 0
    rounds = 0
    peak = 0
    reread_total = 0
    while cursor.mark_delete_position.entry_id < n - 1:
        rounds += 1
        hung = hang is not None and hang[0] <= rounds < hang[1]
        d.isolate_stuck(float(rounds))
        reread_total += reread(d, slots)
        if read < n and d.should_read():
            k = min(d.max_entries_to_read(), READ, n - read)
            d.add_read_columns(np.ones(k, dtype=np.int64), np.arange(read, read + k), slots[read : read + k])
            read += k
        for c, positions in d.dispatch():
            c.queue.extend(positions)
            for p in positions:
                e = p.entry_id
                if not sent[e]:  # a first delivery: after every earlier one of its key
                    sent[e] = True
                    slot = int(slots[e])
                    assert e > first_sent.get(slot, -1), f"key slot {slot}: {e} after {first_sent[slot]}"
                    first_sent[slot] = e
        peak = max(peak, len(d.replay_queue))
        handled = 0
        for i, c in enumerate(clients):
            if i == 0 and hung:
                continue
            batch, c.queue = c.queue[:HANDLE], c.queue[HANDLE:]
            if batch:
                d.ack_many(c, batch)
                d.add_permits(c, len(batch))
                if i:
                    handled += len(batch)
        others.append(handled)
        if rounds > 100 * n // (CONSUMERS * HANDLE) + 1000:
            raise AssertionError(f"no end after {rounds} rounds: {cursor.mark_delete_position}")
    stats = d.stats().isolation
    return Run(rounds, others, peak, stats.spilled if stats is not None else 0, reread_total)


def test_a_hung_consumer_does_not_stall_the_others(benchmark: Any, smoke: bool) -> None:
    """The run without a hang, then with one, isolation on and off."""
    n = SMOKE_N if smoke else N
    benchmark.group = "stuck-consumer isolation"
    base = run(n, isolate=True, hang=None)
    window = (int(base.rounds * HANG[0]), int(base.rounds * HANG[1]))
    runs: dict[str, Run] = {}

    def timed() -> None:
        runs[ON] = run(n, isolate=True, hang=window)
        runs[OFF] = run(n, isolate=False, hang=window)

    benchmark.pedantic(timed, rounds=1, iterations=1)
    a, b = window
    baseline = sum(base.others_by_round[a:b]) / (b - a)
    for name, r in runs.items():
        during = sum(r.others_by_round[a:b]) / (b - a)
        TABLE.record(KEPT, name, during / baseline, lower=False)
        TABLE.record(RATE, name, during, lower=False)
        TABLE.record(REPLAY, name, r.replay_peak, lower=True)
        TABLE.record(SPILLED, name, r.spilled, lower=True)
        if r.spilled:
            TABLE.record(REREAD, name, r.reread / r.spilled, lower=True)
