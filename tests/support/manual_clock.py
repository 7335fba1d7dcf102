"""A clock tests set by hand: trackers call it for "now" (ms)."""

from __future__ import annotations


class Clock:
    """Returns ``now``, which the test moves."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
