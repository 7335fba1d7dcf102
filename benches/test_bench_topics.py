"""The many-topic rebuild (issue 13) on ``local[2]``: a cluster of 1,000 topics at 10M and 40M messages.

Each rebuild runs in a process of its own (``topics_driver.py``: a fresh ``local[2]`` session, one
untimed warm-up job) so its driver's peak memory is the rebuild's alone; the smoke run sends all its
rebuilds to one such process (``topics_driver.py --jobs``) to start Python and the JVM once. Measured:

- 1,000 topics (20 of them partitioned × 16: 1,300 topics in all), 3 subscriptions each, at 10M and
  40M messages: wall time, messages per second, the Python driver's and the JVM's peak RSS;
- the single-topic rebuild of a 16M-message topic, the rate the many-topic job must reach 0.8× of;
- the per-topic overhead: 1,000 named topics holding 200,000 messages (Zipf-sized, most of them
  tiny) against 200,000 messages in one topic, the difference divided by the topic count.

The smoke run (``--benchmark-disable``, part of ``make test``) uses 10 named topics (one of them
partitioned × 16: 25 topics in all) and tiny sizes and judges nothing; its peaks are each job's
high-water marks over what the shared session already held.
The closing table is printed by ``conftest.py`` from this module's ``TABLE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit.pipeline.generate import generate
from cursorkit.pipeline.generate_topics import generate_topics

pytestmark = pytest.mark.spark

HERE = Path(__file__).parent
GB = 1e9

Drive = Callable[[Path, Path, Path, str], dict[str, Any]]
"""Runs one rebuild (messages, acks, out, mode ``topics`` or ``single``) and returns its figures."""


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one mode."""

    topics: int
    sizes: tuple[int, int]
    single: int
    overhead_topics: int
    overhead_messages: int
    partitioned: float
    """The share of named topics that are partitioned (× 16), as ``generate_topics`` takes it."""


FULL = Scale(1_000, (10_000_000, 40_000_000), 16_000_000, 1_000, 200, 0.02)
SMOKE = Scale(10, (5_000, 10_000), 10_000, 10, 200, 0.1)
"""The smoke run's cost is per topic (Spark jobs, files), not per message: few topics, one partitioned."""

END_TO_END = "rebuild of the larger cluster, end to end"
RATE = "messages/s: larger cluster / single topic"
DRIVER = "driver (Python) peak RSS, larger cluster"
FLAT = "driver peak RSS: larger / smaller cluster"
OVERHEAD = "per-topic overhead, amortised"
JVM = "JVM peak RSS (local mode: driver + executors)"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(END_TO_END, "s", False, 600.0),
        cw.Row(RATE, "×", True, 0.8),
        cw.Row(DRIVER, "GB", False, 1.5),
        cw.Row(FLAT, "×", False, 1.2),
        cw.Row(OVERHEAD, "ms", False, 50.0),
        cw.Row(JVM, "GB", False, None),
    ],
)


@dataclass
class Runs:
    """Each rebuild's figures, by label, in the order they ran."""

    runs: dict[str, tuple[int, int, dict[str, Any]]] = field(default_factory=dict)
    """Label -> (messages, topics, figures from topics_driver.py)."""


RUNS = Runs()


def render(smoke: bool) -> str:
    """Per-run stage table, then the targets (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): tiny sizes, not a measurement" if smoke else "one run each"
    lines = [f"### Many-topic rebuild on local[2], wall time per stage (s) - {mode}", ""]
    names: list[str] = []
    for _, _, fig in RUNS.runs.values():
        names += [n for n, _ in fig["stages"] if n not in names]
    head = ["run", "messages", "topics", *names, "total", "M msgs/s", "driver RSS", "JVM RSS"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, (n, topics, fig) in RUNS.runs.items():
        by = dict((k, v) for k, v in fig["stages"])
        cells = [label, f"{n:,}", f"{topics:,}", *(f"{by.get(k, 0):.1f}" for k in names)]
        cells += [
            f"{fig['seconds']:.1f}",
            f"{n / fig['seconds'] / 1e6:.2f}",
            f"{fig['driver_peak_rss'] / GB:.2f} GB",
            f"{fig['jvm_peak_rss'] / GB:.2f} GB",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", TABLE.render(f"Many-topic targets - {mode}", judge=not smoke)]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def scale(smoke: bool) -> Scale:
    return SMOKE if smoke else FULL


def _figures(line: str) -> dict[str, Any] | None:
    """The figures of a ``FIGURES`` line of topics_driver.py, None for any other line."""
    if not line.startswith("FIGURES "):
        return None
    figures: dict[str, Any] = json.loads(line.removeprefix("FIGURES "))
    return figures


def _driver_env() -> dict[str, str]:
    return dict(os.environ, OPENBLAS_NUM_THREADS="1")


def _drive(messages: Path, acks: Path, out: Path, mode: str) -> dict[str, Any]:
    """One rebuild in a driver process of its own (the measured mode)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "topics_driver.py"), str(messages), str(acks), str(out), mode],
        capture_output=True,
        text=True,
        env=_driver_env(),
        check=False,
    )
    for line in done.stdout.splitlines():
        if (figures := _figures(line)) is not None:
            return figures
    raise AssertionError(f"the rebuild failed ({done.returncode}):\n{done.stderr[-4000:]}")


def _tail(file: IO[bytes], start: int) -> str:
    """The last 4,000 characters a process wrote to ``file`` from byte ``start`` on (no seek)."""
    end = os.fstat(file.fileno()).st_size
    return os.pread(file.fileno(), end - start, start).decode(errors="replace")[-4000:]


@contextmanager
def _shared_driver() -> Iterator[Drive]:
    """One ``topics_driver.py --jobs`` process for every rebuild of the module (the smoke mode)."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "topics_driver.py"), "--jobs"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=_driver_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def run(messages: Path, acks: Path, out: Path, mode: str) -> dict[str, Any]:
            start = 0  # a driver that died before this job: all it wrote
            if proc.poll() is None:
                start = os.fstat(stderr.fileno()).st_size
                stdin.write(json.dumps([str(messages), str(acks), str(out), mode]) + "\n")
                stdin.flush()
                for line in iter(stdout.readline, ""):
                    if (figures := _figures(line)) is not None:
                        return figures
                    if line.startswith("FAILED"):
                        break
            raise AssertionError(f"the rebuild failed ({proc.poll()}):\n{_tail(stderr, start)}")

        try:
            yield run
        finally:
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise


@pytest.fixture(scope="module")
def drive(smoke: bool) -> Iterator[Drive]:
    """Runs a rebuild: in a process of its own, or in the module's shared driver in the smoke run."""
    if not smoke:
        yield _drive
        return
    with _shared_driver() as shared:
        yield shared


def _cluster(root: Path, topics: int, n: int, partitioned: float, *, seed: int = 1) -> tuple[Path, Path, int]:
    g = generate_topics(
        root / f"cluster-{topics}-{n}",
        topics=topics,
        messages=n,
        keys=100_000,
        delayed_fraction=0.3,
        subscriptions=3,
        min_subscriptions=3,
        seed=seed,
        partitioned_fraction=partitioned,
    )
    return g.messages_path, g.acks_path, len(g.topics)


def _single(root: Path, n: int) -> tuple[Path, Path]:
    g = generate(
        root / f"single-{n}",
        messages=n,
        ledgers=max(1, n // 50_000),
        keys=100_000,
        delayed_fraction=0.3,
        subscriptions=3,
        seed=1,
    )
    return g.messages_path, g.acks_path


def test_many_topics(
    benchmark: Any, scale: Scale, drive: Drive, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("topics-bench")

    def run_all() -> None:
        for n in scale.sizes:
            m, a, topics = _cluster(root, scale.topics, n, scale.partitioned)
            RUNS.runs[f"cluster at {n:,}"] = (n, topics, drive(m, a, root / f"out-{n}", "topics"))
        m, a = _single(root, scale.single)
        RUNS.runs["single topic"] = (scale.single, 1, drive(m, a, root / "out-single", "single"))

    benchmark.pedantic(run_all, rounds=1, iterations=1)
    small, large = (RUNS.runs[f"cluster at {n:,}"] for n in scale.sizes)
    single = RUNS.runs["single topic"]
    rate = large[0] / large[2]["seconds"]
    TABLE.record(END_TO_END, cw.CURSORKIT, large[2]["seconds"], f"{large[0]:,} messages, {large[1]:,} topics")
    TABLE.record(RATE, cw.CURSORKIT, rate / (single[0] / single[2]["seconds"]), f"single: {single[0]:,}")
    TABLE.record(DRIVER, cw.CURSORKIT, large[2]["driver_peak_rss"] / GB)
    TABLE.record(FLAT, cw.CURSORKIT, large[2]["driver_peak_rss"] / small[2]["driver_peak_rss"])
    TABLE.record(JVM, cw.CURSORKIT, large[2]["jvm_peak_rss"] / GB)


def test_per_topic_overhead(
    benchmark: Any, scale: Scale, drive: Drive, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("topics-overhead")
    n = scale.overhead_topics * scale.overhead_messages
    m, a, topics = _cluster(root, scale.overhead_topics, n, scale.partitioned)

    def run_both() -> None:
        RUNS.runs["many small topics"] = (n, topics, drive(m, a, root / "out-many", "topics"))
        sm, sa = _single(root, n)
        RUNS.runs["the same as one topic"] = (n, 1, drive(sm, sa, root / "out-one", "single"))

    benchmark.pedantic(run_both, rounds=1, iterations=1)
    many = RUNS.runs["many small topics"][2]["seconds"]
    one = RUNS.runs["the same as one topic"][2]["seconds"]
    TABLE.record(OVERHEAD, cw.CURSORKIT, (many - one) / topics * 1000, f"{topics:,} topics")
