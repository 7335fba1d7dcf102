"""A bucket tracker's time: its clock in ms, the tick, and the cutoff up to which indexes are due."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from cursorkit.errors import InvalidInputType

I64_MAX = 2**63 - 1
Clock = Callable[[], int]


def system_clock() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class TrackerClock:
    """The clock a tracker reads and its tick: non-strict trackers deliver up to one tick early."""

    def __init__(self, clock: Clock | None, *, tick_ms: int, strict: bool) -> None:
        self._clock: Clock = clock if clock is not None else system_clock
        self.tick_ms = tick_ms
        """The current tick (a topic policy may change it)."""
        self._strict = strict

    def now(self) -> int:
        """The clock's reading (ms), checked to be an int."""
        now = self._clock()
        if isinstance(now, bool) or not isinstance(now, int | np.integer):
            raise InvalidInputType(f"clock must return int milliseconds, got {type(now).__name__}")
        return int(now)

    def cutoff(self, now: int) -> int:
        """The latest deliver-at that is due at ``now``."""
        return now if self._strict else min(now + self.tick_ms, I64_MAX)

    def due_cutoff(self) -> int:
        """The latest deliver-at that is due now."""
        return self.cutoff(self.now())
