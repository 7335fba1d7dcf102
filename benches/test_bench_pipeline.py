"""The rebuild job at 1M, 4M and 16M messages (+ acks of 3 subscriptions) on ``local[2]``.

Prints wall time per stage for each size, then the issue's targets: 16M end-to-end ≤ 4 minutes and
time(16M)/time(1M) ≤ 20, with the single-process reference rebuild (``pipeline/reference.py``:
pyarrow reads, one ``Cursor`` call per ack, Python sorting) as the peer at 1M. The smoke run
(``--benchmark-disable``, part of ``make test``) uses 20k/40k/80k messages and judges nothing.
The closing table is printed by ``conftest.py`` from this module's ``TABLE``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit.pipeline.generate import GenerateSummary, generate
from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
from cursorkit.pipeline.reference import rebuild_reference
from cursorkit.pipeline.results import RebuildSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

FULL = (1_000_000, 4_000_000, 16_000_000)
SMOKE = (20_000, 40_000, 80_000)
REFERENCE = "single process (reference.py)"
END_TO_END = "rebuild of the largest size, end to end"
SCALING = "time(largest) / time(smallest)"


def size_row(i: int) -> str:
    """The per-size row (0 = smallest) where the single-process peer stands beside the rebuild."""
    return ("rebuild of the smallest size", "rebuild of the middle size", "rebuild of the largest size")[i]


SESSION = "SparkSession start-up (local[2])"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(END_TO_END, "s", False, 240.0),
        cw.Row(SCALING, "×", False, 20.0),
        *(cw.Row(size_row(i), "s", False, None) for i in range(3)),
        cw.Row(SESSION, "s", False, None),
    ],
    peers=(REFERENCE,),
)


@dataclass
class Stages:
    """Stage times per size, in the order the sizes ran."""

    runs: dict[int, tuple[RebuildSummary, float, GenerateSummary, float]] = field(default_factory=dict)


STAGES = Stages()


def render(smoke: bool) -> str:
    """Per-size stage table, then the targets (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): tiny sizes, not a measurement" if smoke else "one run each"
    lines = [f"### Pipeline rebuild on local[2], wall time per stage (s) - {mode}", ""]
    names: list[str] = []
    for summary, _, _, _ in STAGES.runs.values():
        names += [s.name for s in summary.stages if s.name not in names]
    head = ["messages", "acks", "generate", *names, "rebuild total", "M messages/s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, (summary, total, gen, gen_s) in STAGES.runs.items():
        by = {s.name: s.seconds for s in summary.stages}
        cells = [f"{n:,}", f"{gen.acks:,}", f"{gen_s:.1f}", *(f"{by.get(k, 0):.1f}" for k in names)]
        cells += [f"{total:.1f}", f"{n / total / 1e6:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", TABLE.render(f"Pipeline targets - {mode}", judge=not smoke)]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def session() -> SparkSession:
    from cursorkit.pipeline.session import spark_session

    t0 = time.perf_counter()
    s = spark_session("local[2]", [("spark.sql.shuffle.partitions", "4")], app_name="cursorkit-bench")
    s.range(1).count()  # the JVM's first job
    TABLE.record(SESSION, cw.CURSORKIT, time.perf_counter() - t0)
    return s


@pytest.fixture(scope="module")
def scale(smoke: bool) -> tuple[int, ...]:
    return SMOKE if smoke else FULL


def _logs(root: Path, n: int) -> tuple[GenerateSummary, float]:
    t0 = time.perf_counter()
    gen = generate(
        root / f"logs-{n}",
        messages=n,
        ledgers=max(1, n // 50_000),
        keys=100_000,
        delayed_fraction=0.3,
        subscriptions=3,
        seed=1,
    )
    return gen, time.perf_counter() - t0


def test_rebuild_scaling(
    benchmark: Any, session: SparkSession, scale: tuple[int, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("pipeline-bench")
    cfg = RebuildConfig(fsync=True)
    totals: dict[int, float] = {}
    # Warm-up (untimed): the first job of a session starts the Python workers and the JIT.
    warm, _ = _logs(root, 5_000)
    rebuild(session, warm.messages_path, warm.acks_path, root / "warm-up", cfg)

    def run_all() -> None:
        for n in scale:
            gen, gen_s = _logs(root, n)
            t0 = time.perf_counter()
            summary = rebuild(session, gen.messages_path, gen.acks_path, root / f"out-{n}", cfg)
            totals[n] = time.perf_counter() - t0
            STAGES.runs[n] = (summary, totals[n], gen, gen_s)
            assert summary.inputs["messages"] == n

    benchmark.pedantic(run_all, rounds=1, iterations=1)
    small, large = scale[0], scale[-1]
    TABLE.record(END_TO_END, cw.CURSORKIT, totals[large], f"{large:,} messages")
    TABLE.record(SCALING, cw.CURSORKIT, totals[large] / totals[small], f"{large:,} / {small:,}")
    for i, n in enumerate(scale):
        TABLE.record(size_row(i), cw.CURSORKIT, totals[n], f"{n:,} messages")


@pytest.mark.parametrize("i", [0, 1])
def test_reference_peer(
    benchmark: Any, i: int, scale: tuple[int, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The plain single-process rebuild of the two smaller sizes (Spark's start-up excluded).

    Not run at the largest size: its per-row Python objects would need about 10 GB.
    """
    n = scale[i]
    run = STAGES.runs.get(n)
    gen = run[2] if run is not None else _logs(tmp_path_factory.mktemp("pipeline-peer"), n)[0]
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: rebuild_reference(gen.messages_path, gen.acks_path), rounds=1, iterations=1)
    TABLE.record(size_row(i), REFERENCE, time.perf_counter() - t0, f"{n:,} messages")
