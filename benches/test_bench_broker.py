"""The reference broker (``cursorkit broker``) under the official ``pulsar-client``: rate, CPU, restart.

Each run produces and consumes 100-byte messages through one subscription: the broker in its own
process, the producer in another and the consumers (a thread each) in a third, started together.
Printed per run: messages per second (from the start to the last message received), and the CPU
per message of the broker (``/proc/<pid>/stat`` around the run) and of each client process, so it
shows whether the clients or the broker are the limit (on the 2-core CI machine the three share
the cores). Then: Key_Shared with 10 consumers (keys spread over 1,000) beside Shared with 10; the
broker's CPU profile of one batched run, by part (cursorkit's calls, the message log, the server,
the protocol); and a restart with 1M retained messages and 100k ack holes, from starting the
broker process to a consumer's first message. ``make test`` runs 20,000 messages (2,000 holes),
not a measurement; ``make bench`` the issue's 1M.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import broker_workloads as bw
import cursor_workloads as cw
import delayed_workloads as dw
from broker_process import BrokerProcess

pytest.importorskip("pulsar")

CURSORKIT = "cursorkit"
FULL_MESSAGES = 1_000_000
SMOKE_MESSAGES = 20_000
HOLE_EVERY = 10
KEY_SHARED_CONSUMERS = 10
KEYS = 1_000

BATCHED = "Shared, batched"
UNBATCHED = "Shared, unbatched"
SHARED_10 = "Shared, 10 consumers, unbatched"
KEY_SHARED_10 = "Key_Shared, 10 consumers, 1,000 keys, unbatched"
KEY_SHARED_RATIO = "Key_Shared ÷ Shared, 10 consumers each"
RESTART_READY = "restart, every 10th message acked: broker ready"
RESTART_FIRST = "restart, every 10th message acked: first message"

RATE_TARGET = {BATCHED: 100.0, UNBATCHED: 30.0}
CPU_TARGET = {BATCHED: 3.0, UNBATCHED: 20.0}


def _rate(run: str) -> str:
    return f"{run}: produce + consume"


def _cpu(run: str, process: str) -> str:
    return f"{run}: {process} CPU per message"


def _in_cursorkit(run: str) -> str:
    return f"{run}: broker CPU inside cursorkit calls (profiled)"


TABLE = dw.DelayedTable(
    rows=[
        *(
            row
            for run in (BATCHED, UNBATCHED, SHARED_10, KEY_SHARED_10)
            for row in (
                cw.Row(_rate(run), "k msgs/s", True, RATE_TARGET.get(run)),
                cw.Row(_cpu(run, "broker"), "µs", False, CPU_TARGET.get(run)),
                cw.Row(_cpu(run, "producer"), "µs", False, None),
                cw.Row(_cpu(run, "consumer"), "µs", False, None),
            )
        ),
        cw.Row(KEY_SHARED_RATIO, "×", True, 0.8),
        *(cw.Row(_in_cursorkit(run), "%", True, None) for run in (BATCHED, UNBATCHED)),
        cw.Row(RESTART_READY, "s", False, None),
        cw.Row(RESTART_FIRST, "s", False, 2.0),
    ],
)
PROFILES: dict[str, str] = {}
"""The rendered profile of each profiled run, printed under the table."""


def render(smoke: bool) -> str:
    """The table and the profile, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = (
        f"SMOKE RUN (--benchmark-disable): {SMOKE_MESSAGES:,} messages, not a measurement"
        if smoke
        else f"{FULL_MESSAGES:,} messages"
    )
    table = TABLE.render(f"Reference broker with pulsar-client - {mode}", judge=not smoke)
    return "\n\n".join([table, *PROFILES.values()])


def _messages(smoke: bool) -> int:
    return SMOKE_MESSAGES if smoke else FULL_MESSAGES


def _record(name: str, run: bw.Flow) -> None:
    TABLE.record(_rate(name), CURSORKIT, run.rate / 1e3, lower=False)
    TABLE.record(_cpu(name, "broker"), CURSORKIT, run.broker_us)
    TABLE.record(_cpu(name, "producer"), CURSORKIT, run.producer_us)
    TABLE.record(_cpu(name, "consumer"), CURSORKIT, run.consumer_us)


def test_shared_throughput(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Shared, one consumer, batched and unbatched: rate and each process's CPU per message."""
    benchmark.group = "broker"
    n = _messages(smoke)

    def timed() -> None:
        with bw.broker(tmp_path / "data") as process:
            batched = bw.flow(process, "batched", n, batching=True)
            unbatched = bw.flow(process, "unbatched", n, batching=False)
        _record(BATCHED, batched)
        _record(UNBATCHED, unbatched)

    benchmark.pedantic(timed, rounds=1, iterations=1)


def test_key_shared_beside_shared(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Key_Shared and Shared, 10 consumers each, the same keyed messages, alternately on one broker."""
    benchmark.group = "broker"
    n = _messages(smoke)

    def timed() -> None:
        with bw.broker(tmp_path / "data") as process:
            shared = bw.flow(
                process, "shared-10", n, batching=False, consumers=KEY_SHARED_CONSUMERS, keys=KEYS
            )
            key_shared = bw.flow(
                process,
                "key-shared-10",
                n,
                batching=False,
                sub_type="Key_Shared",
                consumers=KEY_SHARED_CONSUMERS,
                keys=KEYS,
            )
        _record(SHARED_10, shared)
        _record(KEY_SHARED_10, key_shared)
        TABLE.record(KEY_SHARED_RATIO, CURSORKIT, key_shared.rate / shared.rate, lower=False)

    benchmark.pedantic(timed, rounds=1, iterations=1)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_broker_profile(benchmark: Any, smoke: bool, tmp_path: Path, batching: bool) -> None:
    """One Shared run with the broker under cProfile (CPU time): where its CPU goes."""
    benchmark.group = "broker"
    n = _messages(smoke)
    out = tmp_path / "broker.prof"
    run = BATCHED if batching else UNBATCHED

    def timed() -> None:
        with bw.broker(tmp_path / "data", profile=out) as process:
            bw.flow(process, "profiled", n, batching=batching, around=bw.profile_window(process, out))
        profile = bw.read_profile(out)
        TABLE.record(_in_cursorkit(run), CURSORKIT, 100 * profile.inclusive[bw.CURSORKIT], lower=False)
        PROFILES[run] = bw.render_profile(profile, f"{run}, {n:,} messages")

    benchmark.pedantic(timed, rounds=1, iterations=1)


def test_restart_with_holes(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Produce N, ack every 10th (N/10 holes), stop; then broker start to a consumer's first message."""
    benchmark.group = "broker"
    n = _messages(smoke)
    data = tmp_path / "data"

    def timed() -> None:
        process = BrokerProcess(data)
        process.start()
        try:
            acked = bw.build_holes(process, "retained", n, HOLE_EVERY)
        finally:
            process.stop()
        assert acked == n // HOLE_EVERY
        assert bw.cursor_holes(data, "retained") == n // HOLE_EVERY
        try:
            ready, first = bw.restart_to_first_message(process, "retained")
        finally:
            process.stop()
        TABLE.record(RESTART_READY, CURSORKIT, ready)
        TABLE.record(RESTART_FIRST, CURSORKIT, first)

    benchmark.pedantic(timed, rounds=1, iterations=1)
