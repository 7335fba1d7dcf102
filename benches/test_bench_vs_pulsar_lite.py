"""cursorkit's broker beside pulsar-lite (AscentStream's embedded Pulsar-compatible broker) (issue 46).

Both brokers run as processes of their own on 127.0.0.1 (pulsar-lite's Prometheus listener too,
see ``pulsar_lite_process.py``), each test with a fresh pair; the same official client
(``broker_client.py``: the producer in one process, the consumers in another) drives them in turn,
cursorkit first in even rounds and pulsar-lite first in odd ones, and each figure is the median
over the rounds. Messages are 100 bytes. Measured:

1-3. produce + consume rate: Shared batched, Shared unbatched, Key_Shared (10 consumers, 1,000 keys,
   unbatched); a run in which no message comes for a while is reported as stalled;
4. the CPU per message of the broker (``/proc/<pid>/stat`` over the run) and of the client processes;
5. end-to-end latency at 1,000 messages a second (unbatched; the producer stamps each payload with
   its send time, the consumer subtracts it on receipt), quiet and beside a process spinning on a CPU,
   with a third broker in the rounds, cursorkit without fsync (``--sync never``): the fsync's share;
6. the seconds from starting the broker process until it accepts a TCP connection;
7. the broker's RSS once started (idle) and once holding 100,000 unacknowledged messages.

cursorkit runs with its defaults: every receipt waits for its fsync (``--sync always``). pulsar-lite
writes to RocksDB and does not fsync before its receipts. The smoke run (``--benchmark-disable``)
is one round at small sizes; without pulsar-lite installed the module is skipped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pulsar")
pytest.importorskip("pulsar_lite", reason="pulsar-lite is not installed (pip install pulsar-lite==0.2.0)")

import broker_workloads as bw  # noqa: E402
import cursor_workloads as cw  # noqa: E402
import delayed_workloads as dw  # noqa: E402
import pulsar_lite_process as plp  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402

CURSORKIT = "cursorkit"
LITE = f"pulsar-lite {plp.version()}"
NO_SYNC = "cursorkit --sync never"
"""A third broker in the latency runs only: how much of cursorkit's latency its fsync is."""
TARGETS = (CURSORKIT, LITE)


@dataclass(frozen=True, slots=True)
class Sizes:
    """Messages per run and rounds, per mode."""

    batched: int
    unbatched: int
    key_shared: int
    latency: int
    retained: int
    rounds: int
    starts: int
    idle: float
    """A run in which no message came for this many seconds is stalled."""
    settle: float
    """Seconds between runs (one broker's after-work not in the next run) and after a start."""


FULL = Sizes(100_000, 50_000, 50_000, 5_000, 100_000, rounds=3, starts=5, idle=10.0, settle=1.0)
SMOKE = Sizes(5_000, 2_000, 2_000, 300, 5_000, rounds=1, starts=1, idle=2.0, settle=0.2)
RATE = 1_000.0
KEY_SHARED_CONSUMERS = 10
KEYS = 1_000

BATCHED = "Shared, batched"
UNBATCHED = "Shared, unbatched"
KEY_SHARED = "Key_Shared, 10 consumers, 1,000 keys, unbatched"
RATE_TARGET = {BATCHED: 1.0, UNBATCHED: 1.5}
CPU_TARGET = {BATCHED: 0.5, UNBATCHED: 2.5, KEY_SHARED: 3.0}
QUIET = "quiet"
LOADED = "beside a CPU burner"
LATENCY_RATIO_TARGET = 1.2
START = "process start → accepting a connection"
RSS_IDLE = "RSS, idle after start"


def _rate(run: str) -> str:
    return f"{run}: produce + consume"


def _ratio(run: str) -> str:
    return f"{run}: rate, cursorkit ÷ pulsar-lite"


def _cpu(run: str, process: str) -> str:
    return f"{run}: {process} CPU per message"


def _latency(load: str, q: str) -> str:
    return f"latency at 1,000 msg/s, unbatched, {load}: {q}"


def _latency_ratio(load: str, q: str) -> str:
    return f"latency {load}: {q}, cursorkit ÷ pulsar-lite"


def _rss_retained(smoke: bool) -> str:
    return f"RSS, {(SMOKE if smoke else FULL).retained:,} messages retained"


TABLE = dw.DelayedTable(
    rows=[
        *(
            row
            for run in (BATCHED, UNBATCHED, KEY_SHARED)
            for row in (
                cw.Row(_rate(run), "k msgs/s", True, None),
                cw.Row(_ratio(run), "×", True, RATE_TARGET.get(run)),
                cw.Row(_cpu(run, "broker"), "µs", False, CPU_TARGET[run]),
                cw.Row(_cpu(run, "producer"), "µs", False, None),
                cw.Row(_cpu(run, "consumer"), "µs", False, None),
            )
        ),
        *(
            row
            for load in (QUIET, LOADED)
            for q in ("p50", "p99")
            for row in (
                cw.Row(_latency(load, q), "ms", False, None),
                cw.Row(_latency_ratio(load, q), "×", False, LATENCY_RATIO_TARGET),
            )
        ),
        cw.Row(START, "s", False, 0.25),
        cw.Row(RSS_IDLE, "MiB", False, None),
        *(cw.Row(_rss_retained(smoke), "MiB", False, None) for smoke in (False, True)),
    ],
    peers=(LITE, NO_SYNC),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    sizes = SMOKE if smoke else FULL
    mode = (
        "SMOKE RUN (--benchmark-disable): one round at small sizes, not a measurement"
        if smoke
        else f"median of {sizes.rounds} interleaved rounds ({sizes.starts} for the start)"
    )
    table = TABLE.render(f"cursorkit broker vs {LITE}, same pulsar-client - {mode}", judge=not smoke)
    notes = (
        f"Messages per run: batched {sizes.batched:,}, unbatched {sizes.unbatched:,}, Key_Shared "
        f"{sizes.key_shared:,}, latency {sizes.latency:,} (the first 5% left out); 100-byte payloads. "
        "cursorkit: its defaults, every receipt after its fsync (--sync always); pulsar-lite: RocksDB, "
        "no fsync before its receipts. The loaded latency runs beside a process spinning on CPU 0. "
        f"'{NO_SYNC}' (latency only): cursorkit without fsync, to show what the fsync costs. "
        "RSS: cursorkit's includes its Python interpreter. 'stalled': no message for "
        f"{sizes.idle:g} s before the last one."
    )
    return f"{table}\n{notes}"


def _sizes(smoke: bool) -> Sizes:
    return SMOKE if smoke else FULL


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[dict[str, bw.Target]]:
    """A fresh cursorkit broker and a fresh pulsar-lite, both running, for one test."""
    targets: dict[str, bw.Target] = {
        CURSORKIT: BrokerProcess(tmp_path / "cursorkit"),
        LITE: plp.PulsarLiteProcess(tmp_path / "pulsar-lite"),
    }
    with bw.running(targets[CURSORKIT]), bw.running(targets[LITE]):
        yield targets


def _interleaved(rounds: int, names: tuple[str, ...] = TARGETS) -> Iterator[tuple[int, str]]:
    """(round, broker): each round starts one broker further along (cursorkit first in round 0)."""
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            yield r, name


def _runs(
    brokers: dict[str, bw.Target], sizes: Sizes, run: Callable[[bw.Target, str], bw.Flow]
) -> tuple[dict[str, list[bw.Flow]], dict[str, list[bw.Stalled]]]:
    """``run(broker, topic)`` on each broker, interleaved; the flows and stalls of each broker."""
    done: dict[str, list[bw.Flow]] = {name: [] for name in brokers}
    stalls: dict[str, list[bw.Stalled]] = {name: [] for name in brokers}
    for r, name in _interleaved(sizes.rounds, tuple(brokers)):
        try:
            done[name].append(run(brokers[name], f"run-{r}"))
        except bw.Stalled as e:
            stalls[name].append(e)
        time.sleep(sizes.settle)
    return done, stalls


def _median(flows: list[bw.Flow], field: str) -> float:
    return float(statistics.median(getattr(f, field) for f in flows))


def _record_flows(run: str, done: dict[str, list[bw.Flow]], stalls: dict[str, list[bw.Stalled]]) -> None:
    """Each broker's median rate and CPU per message; stalled rounds named in the rate's cell."""
    for name in TARGETS:
        flows, stalled = done[name], stalls[name]
        notes = []
        if stalled:
            notes.append(f"stalled in {len(stalled)} of {len(flows) + len(stalled)} rounds ({stalled[0]})")
        duplicates = sum(f.duplicates for f in flows)
        if duplicates:
            notes.append(f"{duplicates:,} duplicates")
        note = "; ".join(notes)
        if not flows:
            TABLE.record(_rate(run), name, 0.0, note, lower=False)
            continue
        TABLE.record(_rate(run), name, statistics.median(f.rate for f in flows) / 1e3, note, lower=False)
        for process in ("broker", "producer", "consumer"):
            TABLE.record(_cpu(run, process), name, _median(flows, f"{process}_us"))
    if done[CURSORKIT] and done[LITE]:
        ours, theirs = (statistics.median(f.rate for f in done[n]) for n in TARGETS)
        TABLE.record(_ratio(run), CURSORKIT, ours / theirs, lower=False)


RUNS: dict[str, dict[str, Any]] = {
    BATCHED: {"batching": True},
    UNBATCHED: {"batching": False},
    KEY_SHARED: {
        "batching": False,
        "sub_type": "Key_Shared",
        "consumers": KEY_SHARED_CONSUMERS,
        "keys": KEYS,
        "unique": True,
    },
}


@pytest.mark.parametrize("run", list(RUNS), ids=["batched", "unbatched", "key-shared"])
def test_rate_and_cpu(benchmark: Any, smoke: bool, brokers: dict[str, bw.Target], run: str) -> None:
    """One run's rate and each process's CPU per message, both brokers, interleaved rounds."""
    benchmark.group = "vs-pulsar-lite"
    sizes = _sizes(smoke)
    n = {BATCHED: sizes.batched, UNBATCHED: sizes.unbatched, KEY_SHARED: sizes.key_shared}[run]

    def timed() -> None:
        done, stalls = _runs(
            brokers, sizes, lambda b, topic: bw.flow(b, topic, n, idle=sizes.idle, **RUNS[run])
        )
        _record_flows(run, done, stalls)
        assert not stalls[CURSORKIT], f"cursorkit stalled: {stalls[CURSORKIT]}"

    benchmark.pedantic(timed, rounds=1, iterations=1)


@pytest.mark.parametrize("load", [QUIET, LOADED], ids=["quiet", "loaded"])
def test_latency(
    benchmark: Any, smoke: bool, brokers: dict[str, bw.Target], tmp_path: Path, load: str
) -> None:
    """End-to-end p50 and p99 at a fixed 1,000 msg/s, unbatched, Shared, one consumer."""
    benchmark.group = "vs-pulsar-lite"
    sizes = _sizes(smoke)
    no_sync = BrokerProcess(tmp_path / "no-sync", "--sync", "never")

    def paced(broker: bw.Target, topic: str) -> bw.Flow:
        if load == QUIET:
            return bw.flow(broker, topic, sizes.latency, batching=False, idle=sizes.idle, rate=RATE)
        with bw.cpu_burner():
            return bw.flow(broker, topic, sizes.latency, batching=False, idle=sizes.idle, rate=RATE)

    def timed() -> None:
        with bw.running(no_sync):
            done, stalls = _runs({**brokers, NO_SYNC: no_sync}, sizes, paced)
        assert not any(stalls.values()), stalls
        for q in ("p50", "p99"):
            medians = {name: _median(flows, f"{q}_ms") for name, flows in done.items()}
            for name, value in medians.items():
                TABLE.record(_latency(load, q), name, value)
            TABLE.record(_latency_ratio(load, q), CURSORKIT, medians[CURSORKIT] / medians[LITE])

    benchmark.pedantic(timed, rounds=1, iterations=1)


def test_start_and_memory(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Fresh brokers: start to accepting a connection and idle RSS (interleaved), then RSS holding N."""
    benchmark.group = "vs-pulsar-lite"
    sizes = _sizes(smoke)

    def fresh(name: str, data: Path) -> bw.Target:
        return BrokerProcess(data) if name == CURSORKIT else plp.PulsarLiteProcess(data)

    def timed() -> None:
        starts: dict[str, list[float]] = {name: [] for name in TARGETS}
        idle: dict[str, list[float]] = {name: [] for name in TARGETS}
        for r, name in _interleaved(sizes.starts):
            target = fresh(name, tmp_path / f"{name}-start-{r}")
            try:
                starts[name].append(bw.start_to_accepting(target))
                time.sleep(sizes.settle)
                assert target.proc is not None
                idle[name].append(bw.rss_mib(target.proc.pid))
            finally:
                target.stop()
        for name in TARGETS:
            TABLE.record(START, name, statistics.median(starts[name]))
            TABLE.record(RSS_IDLE, name, statistics.median(idle[name]))
        for name in TARGETS:
            with bw.running(fresh(name, tmp_path / f"{name}-retained")) as target:
                bw.retain(target, "retained", sizes.retained)
                time.sleep(sizes.settle)
                assert target.proc is not None
                TABLE.record(_rss_retained(smoke), name, bw.rss_mib(target.proc.pid))

    benchmark.pedantic(timed, rounds=1, iterations=1)
