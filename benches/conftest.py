"""pytest configuration of the benchmarks: problem sizes per mode and the closing ratio tables."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the shared workload module, whatever the import mode
# numpy's OpenBLAS worker threads spin on the second core of a 2-core machine; no benchmark uses BLAS.
# (Effective only when numpy is not imported yet, e.g. ``pytest benches``.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import cursor_workloads as cw  # noqa: E402
import delayed_workloads as dw  # noqa: E402
import rangeset_workloads as rw  # noqa: E402

TABLE_MODULES = (
    "test_bench_keyshared_hash",
    "test_bench_selectors",
    "test_bench_draining",
    "test_bench_dispatcher",
    "test_bench_broker_loop",
    "test_bench_pipeline",
    "test_bench_topics",
    "test_bench_shared_stores",
    "test_bench_message_log",
    "test_bench_broker",
    "test_bench_redeliveries",
    "test_bench_key_order",
    "test_bench_isolation",
    "test_bench_hostile",
    "test_bench_vs_pulsar_lite",
    "test_bench_broker_events",
)
"""Bench modules that keep a ``TABLE`` and a ``render(smoke)`` of their own."""


def benchmarks_disabled(config: pytest.Config) -> bool:
    """Whether pytest-benchmark runs each body once, untimed (``--benchmark-disable``: the smoke run)."""
    session = getattr(config, "_benchmarksession", None)
    if session is not None:
        return bool(session.disabled)
    disabled = bool(config.getoption("benchmark_disable", False))
    return disabled and not config.getoption("benchmark_enable", False)


@pytest.fixture(scope="session")
def sizes(pytestconfig: pytest.Config) -> rw.Sizes:
    """Problem sizes: the slow peers shrink when benchmarks are disabled."""
    return rw.Sizes(smoke=benchmarks_disabled(pytestconfig))


@pytest.fixture(scope="session")
def smoke(sizes: rw.Sizes) -> bool:
    """True in the disabled (smoke) mode."""
    return sizes.smoke


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Print cursorkit beside each peer, with PASS/MISS against the issue's targets."""
    smoke = benchmarks_disabled(config)
    if cw.TABLE.cells:
        mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement"
        title = f"Cursor / CursorStore benchmarks - {mode if smoke else 'best round'}"
        terminalreporter.write_line("")
        terminalreporter.write_line(cw.TABLE.render(title, judge=not smoke))
    for table in dw.render_tables(smoke):
        terminalreporter.write_line("")
        terminalreporter.write_line(table)
    # The Key_Shared benches keep their tables in their own modules (imported under their basenames).
    for name in TABLE_MODULES:
        module = sys.modules.get(name)
        if module is not None and module.TABLE.cells:
            terminalreporter.write_line("")
            terminalreporter.write_line(module.render(smoke))
    if not rw.RESULTS:
        return
    if smoke:
        title = (
            "RangeSet benchmarks - SMOKE RUN (--benchmark-disable): single runs, slow peers shrunk; "
            "not a measurement, use --benchmark-enable or benches/report_rangeset.py"
        )
    else:
        title = "RangeSet benchmarks - best round of each benchmark (perf_counter around the call)"
    terminalreporter.write_line("")
    terminalreporter.write_line(rw.render_table(title, rw.NOTES, judge=not smoke))
