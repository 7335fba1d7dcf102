"""SIGKILL a child raising and flushing redelivery counts at random moments, then reopen.

The counts found are exactly those after the last flush the child reported, or after the one it
was in when killed (its append or compaction may have landed), and never reported as damaged.
``CURSORKIT_CRASH_KILLS`` (default 12) sets the number of kills.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from child_lines import Lines
from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.store.redelivery_journal import RedeliveryJournal
from redelivery_crash_child import step

KILLS = int(os.environ.get("CURSORKIT_CRASH_KILLS", "12"))
CHILD = Path(__file__).parents[1] / "support" / "redelivery_crash_child.py"


def test_a_killed_flush_leaves_the_last_state_or_the_next(tmp_path: Path) -> None:
    path = tmp_path / "redeliveries"
    plan = random.Random(311)
    seed = 7
    model = RedeliveryCounts()  # the state after the last flush found durable
    done = 0  # flushes applied to the model
    for kill in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), str(seed), str(done)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        lines = Lines(proc)
        reported = done - 1
        wanted = plan.randint(0, 30)
        while reported < done + wanted:
            line = lines.next()
            assert line is not None, "the child died on its own"
            reported = int(line.split()[1])
        time.sleep(plan.uniform(0, 0.01))
        proc.kill()
        proc.wait()
        lines.drain()
        for line in lines.seen:
            reported = max(reported, int(line.split()[1]))
        for n in range(done, reported + 1):
            step(model, seed, n)
        after_next = RedeliveryCounts.decode(model.encode())
        step(after_next, seed, reported + 1)
        j = RedeliveryJournal.open(path, sync=False)
        assert not j.report.damaged, (kill, j.report)
        got = j.counts.encode()
        j.close()
        assert got in (model.encode(), after_next.encode()), (
            f"kill {kill}: neither flush {reported} nor the next"
        )
        if got == after_next.encode():
            model, reported = after_next, reported + 1
        done = reported + 1
