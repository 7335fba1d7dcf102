"""Crash safety with real processes: SIGKILL a flushing child at random moments, then recover.

Each round starts support/store_crash_child.py on the store, which recovers it and acks + flushes in a loop
(seeded by the round), printing ``F n`` after flush ``n`` returns. The parent kills it (at a random
flush, inside a compaction, or during startup), recovers in-process and checks the state against a
replay of the same seeded acks: everything acked by the last reported flush is acked, nothing beyond
the flush after it is, and the state is exactly that of one of those two flushes. The next round
continues from the recovered state. ``CURSORKIT_CRASH_KILLS`` sets the number of kills (default 20
in CI, 50 under ``make fuzz``): the rounds' seeds are fixed, so a smaller count runs the first rounds.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from child_lines import Lines
from cursorkit import Position, RangeSet
from cursorkit.ackstate import Cursor, CursorStore
from fuzz_budget import runs
from store_crash_child import ENTRIES, LEDGERS, OPTIONS, SIZES, step

KILLS = int(os.environ.get("CURSORKIT_CRASH_KILLS", runs(20, 50)))
SEED = int(os.environ.get("CURSORKIT_CRASH_SEED", "26266"))
CHILD = Path(__file__).parents[1] / "support" / "store_crash_child.py"

UNIVERSE_LEDGERS = np.repeat(np.array(LEDGERS, dtype=np.int64), ENTRIES)
UNIVERSE_ENTRIES = np.tile(np.arange(ENTRIES, dtype=np.int64), len(LEDGERS))

State = tuple[Position, RangeSet, list[tuple[int, int, int, bytes]], dict[str, int]]


def state(c: Cursor) -> State:
    return c.mark_delete_position, c.individually_deleted, c.batches(), dict(c.properties)


def acked(c: Cursor) -> npt.NDArray[np.bool_]:
    return c.is_acked_many(UNIVERSE_LEDGERS, UNIVERSE_ENTRIES)


def run_child(path: Path, seed: int, plan: random.Random, stderr: Path) -> tuple[list[str], str]:
    """Starts the child, kills it at a planned moment; its stdout lines and how the kill was aimed."""
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), str(seed)], stdout=subprocess.PIPE, stderr=err
        )
    lines = Lines(proc)
    aim = plan.random()
    try:
        if aim < 0.08:
            how = "startup"
            time.sleep(plan.uniform(0.0, 0.4))
        elif aim < 0.5:
            how = "compaction"
            after = plan.randint(0, 12)
            while (line := lines.next()) is not None:
                if line.startswith("C ") and int(line[2:]) > after:
                    break
                if line.startswith("F ") and int(line[2:]) > after + 300:
                    break  # no compaction came: kill anyway
            time.sleep(plan.uniform(0.0, 0.003))
        else:
            how = "flush"
            target = f"F {plan.randint(1, 40)}"
            while (line := lines.next()) is not None and line != target:
                pass
            time.sleep(plan.uniform(0.0, 0.002))
    finally:
        proc.kill()
        proc.wait()
    lines.drain()
    assert proc.stdout is not None
    proc.stdout.close()
    if proc.returncode != -signal.SIGKILL:
        pytest.fail(f"crash child exited with {proc.returncode}:\n{stderr.read_text()}")
    return lines.seen, how


@pytest.mark.fuzz
def test_sigkill_at_random_moments_loses_no_returned_flush(tmp_path: Path) -> None:
    path = tmp_path / "store"
    CursorStore.create(path, name="crash").close()
    plan = random.Random(SEED)
    with CursorStore.open(path) as store:
        model = store.recover(ledger_sizes=SIZES)
    stats = dict.fromkeys(("mid_compaction", "torn_tail", "unused_tail", "one_ahead", "startup"), 0)
    generations: set[int] = set()
    started = time.monotonic()
    for rnd in range(KILLS):
        seed = SEED * 1000 + rnd
        seen, how = run_child(path, seed, plan, tmp_path / "child.err")
        stats["startup"] += how == "startup"
        reported = max((int(s[2:]) for s in seen if s.startswith("F ")), default=0)

        # Replay the child's acks: the states at the last reported flush and at the one after it.
        rng = random.Random(seed)
        expected = {0: state(model)} if reported == 0 else {}
        lower = acked(model)
        for n in range(1, reported + 2):
            step(model, rng, n)
            if n >= reported:
                expected[n] = state(model)
                lower = acked(model) if n == reported else lower
        upper = acked(model)

        files = sorted(p.name for p in path.iterdir())
        stats["mid_compaction"] += sum(f.endswith(".log") for f in files) > 1 or "store.meta.tmp" in files
        with CursorStore.open(path, options=OPTIONS) as store:
            report = store.report
            recovered = store.recover(ledger_sizes=SIZES)
        context = f"round {rnd} (seed {seed}, killed at {how}, reported flush {reported}): {report}"
        assert not report.corrupt_records and not report.fallbacks and report.meta_error is None, context
        stats["torn_tail"] += report.torn_tail_bytes > 0
        stats["unused_tail"] += report.unused_tail_bytes > 0
        generations.add(report.generation)

        got = acked(recovered)
        assert not (lower & ~got).any(), f"acks of a returned flush were lost in {context}"
        assert not (got & ~upper).any(), f"never-acked positions are acked in {context}"
        assert state(recovered) in (expected[reported], expected[reported + 1]), context
        stats["one_ahead"] += state(recovered) == expected[reported + 1] != expected[reported]
        model = recovered  # the next child starts from this same recovered state
    elapsed = time.monotonic() - started
    print(f"\n{KILLS} kills in {elapsed:.1f}s, {len(generations)} generations seen: {stats}")
    assert len(generations) > KILLS // 4  # compactions happened throughout
    if KILLS >= 20:
        assert stats["mid_compaction"] > 0  # some kills landed between a new generation and the switch
