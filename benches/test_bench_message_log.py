"""The broker's message log: synced appends of 1 KiB entries; reopening 1M records, indexed or scanned.

cursorkit's ``MessageLog.append`` (records framed and checksummed, one write and one ``fdatasync``
per group: the group commit) beside the naive peer a Python broker would start from: a loop doing
``f.write(entry)`` and ``os.fsync`` per entry, no framing, no checksum. Both write to a temp
directory on the same disk, alternately in the same run; the ratio is entries per second over the
peer's. Reopening times ``MessageLog.open`` of the same closed log with its index files (written at
rollover and close) and without them (every record read and checked), alternately; the ratio is
the scan's time over the indexed one's. ``make test`` runs each body once, shrunk; ``make bench``
measures.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit.broker.log import MessageLog

CURSORKIT = "cursorkit"
NAIVE = "naive Python (write + fsync per entry)"
GROUPS = (1, 16, 256)
ENTRY = 1024


def _row(group: int) -> str:
    return f"append 1 KiB entries, groups of {group}, synced"


def _ratio_row(group: int) -> str:
    return f"append, groups of {group}: ÷ naive"


TABLE = dw.DelayedTable(
    rows=[
        row
        for g in GROUPS
        for row in (cw.Row(_row(g), "k entries/s", True, None), cw.Row(_ratio_row(g), "×", True, None))
    ],
    peers=(NAIVE,),
)


FULL_SCAN = "full scan (no index files)"
REOPEN = "reopen, 100-byte records (1M; smoke: 20k)"
REOPEN_RATIO = "reopen: full scan ÷ with index files"
REOPEN_TABLE = dw.DelayedTable(
    rows=[cw.Row(REOPEN, "ms", False, 2000.0), cw.Row(REOPEN_RATIO, "×", True, None)], peers=(FULL_SCAN,)
)


def render(smoke: bool) -> str:
    """The tables, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return "\n\n".join(
        table.render(f"{title} - {mode}", judge=not smoke)
        for title, table in (("Message log appends", TABLE), ("Message log reopen", REOPEN_TABLE))
        if table.cells
    )


def _ours(path: Path, entries: list[tuple[bytes, int, int]], group: int) -> float:
    """Seconds to append ``entries`` in groups of ``group`` to a fresh log."""
    with MessageLog.open(path) as log:
        started = time.perf_counter()
        for i in range(0, len(entries), group):
            log.append(entries[i : i + group])
        elapsed = time.perf_counter() - started
        assert log.entries == len(entries)
    return elapsed


def _naive(path: Path, entries: list[tuple[bytes, int, int]]) -> float:
    """Seconds to write and fsync each entry's bytes, one by one."""
    path.mkdir()
    with open(path / "log", "wb", buffering=0) as f:
        started = time.perf_counter()
        for data, _, _ in entries:
            f.write(data)
            os.fsync(f.fileno())
        return time.perf_counter() - started


def test_append_throughput(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Entries per second, cursorkit and the naive peer alternately, per group size."""
    benchmark.group = "message log"
    rounds = 1 if smoke else 3
    count = 256 if smoke else 4096
    entries = [(bytes([i % 251]) * ENTRY, 1_700_000_000_000 + i, 1) for i in range(count)]
    runs = [0]

    def run(kind: str, group: int) -> float:
        runs[0] += 1
        where = tmp_path / f"{kind}-{runs[0]}"
        return _naive(where, entries) if kind == NAIVE else _ours(where, entries, group)

    def timed() -> None:
        for group in GROUPS:
            best = {CURSORKIT: float("inf"), NAIVE: float("inf")}
            for _ in range(rounds):  # interleaved, so a noisy moment hits both
                for kind in best:
                    best[kind] = min(best[kind], run(kind, group))
            for kind, seconds in best.items():
                TABLE.record(_row(group), kind, count / seconds / 1e3, lower=False)
            TABLE.record(_ratio_row(group), CURSORKIT, best[NAIVE] / best[CURSORKIT], lower=False)

    benchmark.pedantic(timed, rounds=1, iterations=1)


def _reopen(path: Path) -> float:
    """Seconds for ``MessageLog.open`` of the log at ``path`` (closing it after is not counted)."""
    started = time.perf_counter()
    log = MessageLog.open(path, sync=False)
    elapsed = time.perf_counter() - started
    log.close()
    return elapsed


def test_reopen_with_index_files_vs_full_scan(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """Restart of a log of N records: loaded from its index files, and scanned record by record."""
    benchmark.group = "message log"
    count = 20_000 if smoke else 1_000_000
    rounds = 1 if smoke else 3
    path = tmp_path / "log"
    with MessageLog.open(path, sync=False) as log:
        for i in range(0, count, 1000):
            log.append(
                [(bytes([n % 251]) * 100, 1_700_000_000_000 + n, 1) for n in range(i, min(count, i + 1000))]
            )

    def timed() -> None:
        best = {CURSORKIT: float("inf"), FULL_SCAN: float("inf")}
        for _ in range(rounds):
            best[CURSORKIT] = min(best[CURSORKIT], _reopen(path))
            for index in path.glob("*.idx"):
                index.unlink()
            best[FULL_SCAN] = min(best[FULL_SCAN], _reopen(path))  # its close writes them again
        for kind, seconds in best.items():
            REOPEN_TABLE.record(REOPEN, kind, seconds * 1e3, lower=True)
        REOPEN_TABLE.record(REOPEN_RATIO, CURSORKIT, best[FULL_SCAN] / best[CURSORKIT], lower=False)
        print(
            f"\nreopen {count} records: with index files {best[CURSORKIT] * 1e3:.0f} ms, "
            f"full scan {best[FULL_SCAN] * 1e3:.0f} ms, ratio {best[FULL_SCAN] / best[CURSORKIT]:.1f}x"
        )

    benchmark.pedantic(timed, rounds=1, iterations=1)
