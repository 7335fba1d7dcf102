"""How ``cursorkit bench`` measures: best-of-rounds timing, the CPython call floor, result rows.

Every figure is the best of a few rounds (the machine's other load only ever slows a round down),
taken with ``perf_counter`` around the call alone; set-up runs before the clock starts. The *call
floor* is the rate of the cheapest C call CPython makes in a loop (``deque(map({}.get, ...))``):
no per-call API can beat it, so per-call figures are printed beside it and read against it.
"""

from __future__ import annotations

import gc
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Plan", "Row", "best", "call_floor"]


@dataclass(frozen=True, slots=True)
class Plan:
    """How big and how often: ``quick`` shrinks every workload and runs one round."""

    quick: bool = False

    @property
    def rounds(self) -> int:
        """Rounds per measurement (the best is kept)."""
        return 1 if self.quick else 5

    def size(self, full: int, quick: int | None = None) -> int:
        """A workload's element count for this plan (``quick`` defaults to a twentieth)."""
        return (quick if quick is not None else max(1, full // 20)) if self.quick else full


@dataclass(slots=True)
class Row:
    """One workload: the figure of cursorkit and of every peer that ran, in one unit."""

    group: str
    workload: str
    unit: str
    higher_is_better: bool
    values: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def ratio(self, peer: str) -> float | None:
        """How many times better cursorkit is than ``peer`` (None when either is missing)."""
        ours, theirs = self.values.get("cursorkit"), self.values.get(peer)
        if not ours or not theirs:
            return None
        return ours / theirs if self.higher_is_better else theirs / ours

    def as_json(self) -> dict[str, Any]:
        """The row as JSON."""
        return {
            "group": self.group,
            "workload": self.workload,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "values": self.values,
            "note": self.note,
        }


def best(fn: Callable[..., Any], setup: Callable[[], tuple[Any, ...]], rounds: int) -> float:
    """Best wall time in seconds of ``fn(*setup())`` over ``rounds`` (set-up not timed)."""
    fastest = math.inf
    for _ in range(rounds):
        args = setup()
        gc.collect()
        t0 = time.perf_counter()
        fn(*args)
        fastest = min(fastest, time.perf_counter() - t0)
    return fastest


def call_floor(n: int = 1_000_000) -> float:
    """Millions of calls a second of the cheapest C call in a ``deque(map(...))`` loop, here, now."""
    keys = list(range(n))
    table: dict[int, int] = {}
    seconds = best(lambda: deque(map(table.get, keys), 0), tuple, 5)
    return n / seconds / 1e6
