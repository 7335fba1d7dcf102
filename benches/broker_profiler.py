"""Runs a module under cProfile on CPU time, profiling only between SIGUSR1 and SIGUSR2 (then dumping).

Run by path: ``python broker_profiler.py OUT -m cursorkit.cli broker ...``. The window leaves out
the interpreter's start-up and the idle waits of the event loop, so the profile is the broker's CPU
during one bench run.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from types import FrameType


def main() -> None:
    """Installs the two signal handlers, then runs the module as ``__main__``."""
    out, _, module, *args = sys.argv[1:]
    profile = cProfile.Profile(time.process_time)

    def start(_: int, __: FrameType | None) -> None:
        profile.enable()

    def stop(_: int, __: FrameType | None) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
