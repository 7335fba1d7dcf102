"""Crash safety with real processes: SIGKILL an appending child at random moments, then reopen the log.

Each round starts support/message_log_crash_child.py on the same directory; it appends seeded
groups with sync on and prints each group's position once ``append`` returned. The parent kills it
(during start-up, or at a random append), reopens the log in-process and checks that every printed
entry is readable with its bytes (unless a printed trim intent covers its ledger), that every
served entry is one the child wrote, in order, and that the only unprinted ones are the group in
flight at the kill. ``CURSORKIT_LOG_CRASH_KILLS`` (default 8) sets the number of kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from child_lines import Lines
from cursorkit import Position
from cursorkit.broker.log import Entry, MessageLog
from cursorkit.errors import UnknownLedger
from message_log_crash_child import MAX_GROUP, ROUND_TIMES, SEGMENT_BYTES, entry

KILLS = int(os.environ.get("CURSORKIT_LOG_CRASH_KILLS", "8"))
SEED = int(os.environ.get("CURSORKIT_LOG_CRASH_SEED", "26311"))
CHILD = Path(__file__).parents[1] / "support" / "message_log_crash_child.py"


def run_child(path: Path, rnd: int, plan: random.Random, stderr: Path) -> list[str]:
    """Starts the child, kills it at a planned moment; its stdout lines."""
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), str(rnd)], stdout=subprocess.PIPE, stderr=err
        )
    lines = Lines(proc)
    try:
        if plan.random() < 0.1:
            time.sleep(plan.uniform(0.0, 0.4))
        else:
            target = plan.randint(1, 60)
            appends = 0
            while appends < target and (line := lines.next()) is not None:
                appends += line.startswith("A ")
            time.sleep(plan.uniform(0.0, 0.002))
    finally:
        proc.kill()
        proc.wait()
    lines.drain()
    assert proc.stdout is not None
    proc.stdout.close()
    if proc.returncode != -signal.SIGKILL:
        pytest.fail(f"crash child exited with {proc.returncode}:\n{stderr.read_text()}")
    return lines.seen


def origin(e: Entry) -> tuple[int, int]:
    """(round, n) of a served entry, checked against what the child wrote."""
    rnd, n = divmod(e.publish_time_ms, ROUND_TIMES)
    assert (e.data, e.publish_time_ms, e.num_messages) == entry(rnd, n), (
        f"{e.position} holds bytes never written"
    )
    return rnd, n


def test_sigkill_at_random_moments_loses_no_returned_append(tmp_path: Path) -> None:
    path = tmp_path / "log"
    plan = random.Random(SEED)
    printed: dict[Position, tuple[int, int]] = {}
    trim_floor = 0  # ledgers below this may be gone: a printed trim intent covers them
    stats = {"torn_tail": 0, "in_flight_served": 0, "ledgers": 0, "indexed": 0}
    started = time.monotonic()
    for rnd in range(1, KILLS + 1):
        seen = run_child(path, rnd, plan, tmp_path / "child.err")
        last_n = -1
        for line in seen:
            kind, *fields = line.split()
            if kind == "A":
                ledger, first, count, n = map(int, fields)
                printed.update({Position(ledger, first + k): (rnd, n + k) for k in range(count)})
                last_n = n + count - 1
            elif kind == "T":
                trim_floor = max(trim_floor, int(fields[0]))
        with MessageLog.open(path, segment_bytes=SEGMENT_BYTES) as log:
            report = log.report
            context = f"round {rnd}: {report}"
            assert not report.damaged and not report.unused_tail_bytes, context
            assert not report.damaged_indexes, context  # an index is whole or absent, never stale
            stats["torn_tail"] += report.torn_tail_bytes > 0
            stats["indexed"] += report.indexed_ledgers
            for pos, (r, n) in printed.items():
                try:
                    got = log.read(pos)
                except UnknownLedger:
                    assert pos.ledger_id < trim_floor, f"{pos} was returned, then lost; {context}"
                    continue
                assert origin(got) == (r, n), context
            served = log.read_from(Position(0, -1), 1 << 30, 1 << 40)
            stats["ledgers"] = max(stats["ledgers"], len(log.ledger_sizes()))
        origins = [origin(e) for e in served]
        assert origins == sorted(origins) and len(set(origins)) == len(origins), context
        unprinted = [
            (e.position, o) for e, o in zip(served, origins, strict=True) if e.position not in printed
        ]
        assert len(unprinted) <= MAX_GROUP, context
        assert [o for _, o in unprinted] == [(rnd, last_n + 1 + k) for k in range(len(unprinted))], context
        stats["in_flight_served"] += bool(unprinted)
        printed.update(unprinted)  # durable now: later rounds must keep them too
        printed = {p: o for p, o in printed.items() if p.ledger_id >= trim_floor}
    elapsed = time.monotonic() - started
    print(f"\n{KILLS} kills in {elapsed:.1f}s: {stats}")
    assert stats["ledgers"] > 2  # rollovers happened
    assert stats["indexed"] > 0  # sealed ledgers were loaded from their index files
