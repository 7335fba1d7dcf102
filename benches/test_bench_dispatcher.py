"""KeySharedDispatcher throughput (issue 5 §6): the simulated broker loop with consumer churn.

100 consumers with 1,000 permits each that ack at once, 100,000 uniform keys, consistent hashing,
draining mode; every 10,000 messages one consumer leaves and a new one joins. The figure is messages
published / wall time until every one is acked (read, dispatch, ack, permits: the whole loop, with
the ordering checker off). Objects made before the clock starts (the 100k keys, the consumers) are
moved out of the cyclic GC's way with ``gc.freeze()``, as a long-running broker would after start-up;
the messages' own objects are collected as usual. A second run with the checker on verifies the same
workload, so the smoke run is a real test. The table lives here (``conftest.py`` prints it).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Cursor, Position
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector
from cursorkit.keyshared.sim import Simulation

N = 200_000
SMOKE_N = 4_000
CONSUMERS = 100
KEYS = 100_000
CHURN_EVERY = 10_000
SMOKE_CHURN_EVERY = 1_000

CURSORKIT = "cursorkit"
THROUGHPUT = "dispatcher simulation, draining, 100 consumers, 100k keys, churn / 10k msgs"
CHECKED = "same, ordering checker on (msgs/s)"

TABLE = dw.DelayedTable(
    rows=[cw.Row(THROUGHPUT, "k msgs/s", True, 500.0), cw.Row(CHECKED, "k msgs/s", True, None)],
    peers=(),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Key_Shared dispatcher - {mode}", judge=not smoke)


def run(n: int, churn_every: int, *, check: bool) -> tuple[float, Simulation]:
    """Publishes ``n`` messages in churn-sized chunks and drains them; returns (seconds, simulation)."""
    d = KeySharedDispatcher(
        selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)), mode="draining"
    )
    sim = Simulation(d, seed=5, keys=KEYS, ledger_size=1_000_000, read_batch=500, check=check)
    for i in range(CONSUMERS):
        sim.join(f"c{i}", 1000)
    joined = CONSUMERS
    gc.collect()
    gc.freeze()  # set-up objects are long-lived, as a broker's are after start-up
    t0 = time.perf_counter()
    for chunk in range(n // churn_every):
        sim.publish(churn_every)
        target = (chunk + 1) * churn_every
        while sim.read_upto < target or any(c.inbox for c in sim.consumers.values()):
            sim.step()
        sim.leave(sorted(sim.consumers)[chunk % len(sim.consumers)])
        sim.join(f"c{joined}", 1000)
        joined += 1
    sim.drain()
    seconds = time.perf_counter() - t0
    gc.unfreeze()
    return seconds, sim


def test_dispatcher_throughput(benchmark: Any, smoke: bool) -> None:
    """Messages per second through the whole broker loop (checker off), then once with the checker."""
    n, churn = (SMOKE_N, SMOKE_CHURN_EVERY) if smoke else (N, CHURN_EVERY)
    benchmark.group = "keyshared dispatcher"
    times: list[float] = []

    def timed() -> Simulation:
        seconds, sim = run(n, churn, check=False)
        times.append(seconds)
        return sim

    sim = benchmark.pedantic(timed, rounds=1 if smoke else 5, iterations=1)
    assert sim.acked_count == n
    TABLE.record(THROUGHPUT, CURSORKIT, n / min(times) / 1e3, lower=False)
    seconds, sim = run(n, churn, check=True)
    assert not sim.checker.violations, sim.checker.violations[:3]
    assert sim.checker.acked == {p for p, _ in sim.log}
    TABLE.record(CHECKED, CURSORKIT, n / seconds / 1e3, lower=False)
