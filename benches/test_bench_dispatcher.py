"""KeySharedDispatcher at broker speed (issue 14): the simulated broker loop with consumer churn.

The workload of the issue: draining mode, 100 consumers with 1,000 permits each that ack at once,
100,000 keys drawn from a Zipf distribution (s = 1.2), consistent hashing; every 10,000 messages
one consumer leaves and a new one joins. The figure is messages published / wall time until every
one is acked: publish, read, dispatch, ack, permits, the whole loop, with the ordering checker off
(the keys are drawn before the clock starts).
The broker reads ``SIM_READ_BATCH`` entries a round. The peer is a naive pure-Python dispatcher with no
ordering guarantee (``cursorkit.bench.peers.NaiveDispatcher``) driven by the same loop
(``cursorkit.bench.workloads.simulate``, which ``cursorkit bench`` runs too) in the same run; a
uniform-keys row shows the loop without hot keys. A second run with the checker on verifies the
same workload, so the smoke run is a real test.

Also measured: the latency of dispatching one 1,000-entry read (p99, consumers with permits,
draining mode), and the heap bytes per pending ack with 1M messages unacked over 100 consumers.
Objects made before the clock starts are moved out of the cyclic GC's way with ``gc.freeze()``, as
a long-running broker would after start-up.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Cursor, Position
from cursorkit.bench.workloads import SIM_CONSUMERS as CONSUMERS
from cursorkit.bench.workloads import SIM_KEYS as KEYS
from cursorkit.bench.workloads import simulate
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector
from cursorkit.keyshared.sim import Simulation

N = 400_000
SMOKE_N = 4_000
CHURN_EVERY = 10_000
SMOKE_CHURN_EVERY = 1_000

CURSORKIT = "cursorkit"
NAIVE = "naive Python (no ordering)"
ZIPF = "simulation, draining, 100 consumers, 100k Zipf keys, churn / 10k msgs"
UNIFORM = "same, uniform keys"
RATIO = "simulation (Zipf): cursorkit / naive Python"
CHECKED = "same, ordering checker on"
KEY_CAP = 1_000
CAPPED = f"same, max_unacked_per_key = {KEY_CAP:,} (beyond Pulsar)"
CAP_RATIO = "simulation (Zipf): cap on / cap off"
LATENCY = "dispatch of one 1,000-entry read, p99"
MEMORY = "memory per pending ack (1M unacked, 100 consumers)"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(ZIPF, "k msgs/s", True, 5000.0),
        cw.Row(UNIFORM, "k msgs/s", True, None),
        cw.Row(RATIO, "×", True, 5.0),
        cw.Row(CHECKED, "k msgs/s", True, None),
        cw.Row(CAPPED, "k msgs/s", True, None),
        cw.Row(CAP_RATIO, "×", True, 0.9),
        cw.Row(LATENCY, "ms", False, 1.0),
        cw.Row(MEMORY, "B", False, 16.0),
    ],
    peers=(NAIVE,),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Key_Shared dispatcher - {mode}", judge=not smoke)


def test_dispatcher_throughput(benchmark: Any, smoke: bool) -> None:
    """Messages per second through the whole broker loop, cursorkit and the naive peer alternately."""
    n, churn = (SMOKE_N, SMOKE_CHURN_EVERY) if smoke else (N, CHURN_EVERY)
    benchmark.group = "keyshared dispatcher"
    ours: list[float] = []
    theirs: list[float] = []

    def timed() -> Simulation:
        seconds, sim = simulate(n, churn, check=False)
        ours.append(seconds)
        naive_seconds, naive = simulate(n, churn, check=False, naive=True)
        theirs.append(naive_seconds)
        assert naive.acked_count == n
        return sim

    sim = benchmark.pedantic(timed, rounds=1 if smoke else 3, iterations=1)
    assert sim.acked_count == n
    TABLE.record(ZIPF, CURSORKIT, n / min(ours) / 1e3, lower=False)
    TABLE.record(ZIPF, NAIVE, n / min(theirs) / 1e3, lower=False)
    TABLE.record(RATIO, CURSORKIT, min(theirs) / min(ours), lower=False)
    uniform = min(
        simulate(n, churn, check=False, distribution="uniform")[0] for _ in range(1 if smoke else 3)
    )
    naive_uniform = min(
        simulate(n, churn, check=False, distribution="uniform", naive=True)[0]
        for _ in range(1 if smoke else 2)
    )
    TABLE.record(UNIFORM, CURSORKIT, n / uniform / 1e3, lower=False)
    TABLE.record(UNIFORM, NAIVE, n / naive_uniform / 1e3, lower=False)
    check_n = min(n, 100_000)
    seconds, sim = simulate(check_n, churn, check=True)
    assert not sim.checker.violations, sim.checker.violations[:3]
    assert sim.checker.acked == {p for p, _ in sim.log}
    TABLE.record(CHECKED, CURSORKIT, check_n / seconds / 1e3, lower=False)


def test_per_key_cap_cost(benchmark: Any, smoke: bool) -> None:
    """The same loop with the per-key in-flight cap on, beside it off, alternately: its cost.

    Four rounds, the pair's order swapped each round (a fixed order measured the capped loop 1.3x
    *faster*: the first of a pair runs slower); best of each.
    """
    n, churn = (SMOKE_N, SMOKE_CHURN_EVERY) if smoke else (N, CHURN_EVERY)
    benchmark.group = "keyshared dispatcher"
    off: list[float] = []
    on: list[float] = []

    def capped() -> None:
        seconds, sim = simulate(n, churn, check=False, max_unacked_per_key=KEY_CAP)
        assert sim.acked_count == n
        on.append(seconds)

    def timed() -> None:
        # The order alternates by round: whichever runs first in a pair was measured slower.
        if len(on) % 2:
            capped()
            off.append(simulate(n, churn, check=False)[0])
        else:
            off.append(simulate(n, churn, check=False)[0])
            capped()

    benchmark.pedantic(timed, rounds=1 if smoke else 4, iterations=1)
    TABLE.record(CAPPED, CURSORKIT, n / min(on) / 1e3, lower=False)
    TABLE.record(CAP_RATIO, CURSORKIT, min(off) / min(on), lower=False)


def test_dispatch_latency(benchmark: Any, smoke: bool) -> None:
    """p99 of one ``add_read_columns`` + ``dispatch_columns`` of 1,000 entries (draining, churned)."""
    benchmark.group = "keyshared dispatcher"
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)))
    consumers = [cw_consumer(f"c{i}") for i in range(CONSUMERS)]
    for c in consumers:
        d.add_consumer(c, 100_000)
    rng = np.random.default_rng(3)
    slots = np.asarray([d.slot_of(f"key-{k}".encode()) for k in range(KEYS)], dtype=np.int64)
    reads = 50 if smoke else 2_000
    times: list[float] = []
    entry = 0
    for r in range(reads):
        if r % 100 == 50:  # churn: a consumer leaves and comes back, so hashes drain
            d.remove_consumer(consumers[r % CONSUMERS])
            d.add_consumer(consumers[r % CONSUMERS], 100_000)
        ls = np.ones(1000, dtype=np.int64)
        es = np.arange(entry, entry + 1000, dtype=np.int64)
        entry += 1000
        s = slots[rng.zipf(1.2, 1000) % KEYS]
        t0 = time.perf_counter()
        d.add_read_columns(ls, es, s)
        out = d.dispatch_columns()
        times.append(time.perf_counter() - t0)
        for c, cls, ces in out:  # acks and permits back (not timed)
            d.ack_columns(c, cls, ces)
            d.add_permits(c, len(cls))
    p99 = float(np.percentile(np.asarray(times) * 1e3, 99))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    TABLE.record(LATENCY, CURSORKIT, p99)


def test_pending_ack_memory(benchmark: Any, smoke: bool) -> None:
    """Heap bytes per unacked message in the core's pending acks, beside a dict of Positions."""
    benchmark.group = "keyshared dispatcher"
    n = 20_000 if smoke else 1_000_000
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)))
    for i in range(CONSUMERS):
        d.add_consumer(cw_consumer(f"c{i}"), n)
    slots = np.asarray([d.slot_of(f"key-{k}".encode()) for k in range(KEYS)], dtype=np.int64)
    rng = np.random.default_rng(4)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        d.add_read_columns(
            np.ones(m, dtype=np.int64),
            np.arange(start, start + m, dtype=np.int64),
            slots[rng.integers(0, KEYS, m)],
        )
        d.dispatch_columns()
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert d.stats().replay_size == 0
    TABLE.record(MEMORY, CURSORKIT, d.pending_memory_usage() / n)
    TABLE.record(MEMORY, NAIVE, _dict_bytes_per_entry(min(n, 200_000)))


def _dict_bytes_per_entry(n: int) -> float:
    """Bytes per entry of ``{(ledger, entry): slot}``, the naive peer's pending map (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = {(1, i): i % 65535 + 1 for i in range(n)}
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(held) == n
    return (after - before) / n


class cw_consumer:  # noqa: N801 - a tiny value type named for what the benches call it
    """A named, hashable consumer."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
