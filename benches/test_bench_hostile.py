"""Hostile clients (issue 44): a well-behaved pair's rate while one attacker works the broker.

The pair is the official client, one producer and one Shared consumer in processes of their own,
100,000 unbatched 100-byte messages (5,000 in the smoke run), every one received. Each attack of
``tests/support/wire_attacks.py`` runs from a process of its own at up to 200 attempts a second
(so that the attacker's own CPU stays small on a 2-core machine) while the pair runs; the pair
alone runs before each attack, interleaved, and the ratio is its rate under the attack to the
median of its rate alone. Target (the issue's): everybody else keeps at least 80% of their rate.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import broker_workloads as bw
import cursor_workloads as cw
import delayed_workloads as dw
import wire_attacks

N = 100_000
SMOKE_N = 5_000
ATTACKS = tuple(os.environ.get("CURSORKIT_BENCH_ATTACKS", ",".join(wire_attacks.ATTACKS)).split(","))
"""The attacks measured (``CURSORKIT_BENCH_ATTACKS=a,b`` picks some)."""
ALONE = "the pair alone"

TABLE = dw.DelayedTable(
    rows=[cw.Row(f"the pair's rate under {name}, vs alone", "×", True, 0.8) for name in ATTACKS]
    + [cw.Row(ALONE, "msg/s", True, None)],
    peers=(),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "one run"
    return TABLE.render(f"Hostile clients: a good pair's rate under attack - {mode}", judge=not smoke)


def _under(broker: Any, name: str, n: int, topic: str) -> float:
    attacker = subprocess.Popen(
        [sys.executable, wire_attacks.__file__, name, broker.url, "600"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert attacker.stdout is not None
        assert attacker.stdout.readline().strip() == "attacking"
        time.sleep(0.5)  # the attack under way before the pair starts
        return bw.flow(broker, topic, n, batching=False).rate
    finally:
        attacker.kill()
        attacker.wait()


def test_a_good_pair_keeps_its_rate_under_attack(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    n = SMOKE_N if smoke else N

    def run() -> None:
        alone: list[float] = []
        under: dict[str, float] = {}
        with bw.broker(tmp_path / "data") as broker:
            bw.flow(broker, "warm", min(n, 2_000), batching=False)
            for i, name in enumerate(ATTACKS):
                alone.append(bw.flow(broker, f"alone-{i}", n, batching=False).rate)
                under[name] = _under(broker, name, n, f"under-{i}")
        base = statistics.median(alone)
        TABLE.record(ALONE, cw.CURSORKIT, base, lower=False)
        for name, rate in under.items():
            TABLE.record(f"the pair's rate under {name}, vs alone", cw.CURSORKIT, rate / base, lower=False)

    benchmark.pedantic(run, rounds=1, iterations=1)
