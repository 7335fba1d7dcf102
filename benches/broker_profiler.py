"""Runs a module under cProfile on CPU time, profiling only between SIGUSR1 and SIGUSR2 (then dumping).

Run by path: ``python broker_profiler.py OUT -m cursorkit.cli broker ...``. The window leaves out
the interpreter's start-up and the idle waits of the event loop, so the profile is the broker's CPU
during one bench run. Beside the dump, ``OUT.trackers.json``: the summed counters of the broker's
bucket delayed trackers (how many messages they held, how many were due when read).
"""

from __future__ import annotations

import cProfile
import dataclasses
import gc
import json
import runpy
import signal
import sys
import time
from types import FrameType


def tracker_counters() -> dict[str, int]:
    """The counters of every bucket delayed tracker alive in this process, summed."""
    module = sys.modules.get("cursorkit.delayed.bucket_tracker")
    totals: dict[str, int] = {}
    if module is None:
        return totals
    for obj in gc.get_objects():
        if isinstance(obj, module.BucketDelayedDeliveryTracker):
            for name, value in dataclasses.asdict(obj.counters()).items():
                totals[name] = totals.get(name, 0) + value
    return totals


def main() -> None:
    """Installs the two signal handlers, then runs the module as ``__main__``."""
    out, _, module, *args = sys.argv[1:]
    profile = cProfile.Profile(time.process_time)

    def start(_: int, __: FrameType | None) -> None:
        profile.enable()

    def stop(_: int, __: FrameType | None) -> None:
        profile.disable()
        with open(f"{out}.trackers.json", "w") as f:  # before the dump, which the bench waits for
            json.dump(tracker_counters(), f)
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
