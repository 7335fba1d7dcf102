"""What a broker pays per event: the fixed cost of each per-event call, and its cost per position.

Each call is driven from C (``deque(map(call, args...), 0)`` over prebuilt arguments), so what is
timed is the call itself; the CPython call floor is measured the same way beside it. Acks are of
positions really pending on the acking consumer (sent by a dispatch), one consumer of 100 holding
them, as a broker's acks are. The fixed cost is the time of a call with one position; the cost per
position is ``(t(16) - t(1)) / 15``.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat, starmap
from typing import Any

import numpy as np

from cursorkit import Cursor, Position
from cursorkit.bench.measure import call_floor

__all__ = ["CallFigure", "measure_calls"]

CONSUMERS = 100
"""Consumers of the measured dispatcher (one of them holds the acked positions)."""


@dataclass(frozen=True, slots=True)
class CallFigure:
    """One per-event call: its cost with one position (or none) and per further position (ns)."""

    call: str
    fixed_ns: float
    per_position_ns: float | None = None


class _Consumer:
    """A consumer as a selector sees it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _timed(make: Callable[[], Iterable[Any]], count: int, rounds: int) -> float:
    """Best nanoseconds per item of draining ``make()`` (set-up not timed, the cyclic GC paused)."""
    best = float("inf")
    for _ in range(rounds):
        work = make()
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            deque(work, 0)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best / count * 1e9


def _dispatcher(n: int) -> tuple[Any, _Consumer, list[Position]]:
    """A Key_Shared dispatcher of 100 consumers whose first consumer holds ``n`` messages."""
    from cursorkit.keyshared.dispatcher import KeySharedDispatcher
    from cursorkit.keyshared.selectors import ConsistentHashingSelector

    selector: ConsistentHashingSelector[Any] = ConsistentHashingSelector()
    cursor = Cursor(Position(1, -1))
    d = KeySharedDispatcher(selector=selector, cursor=cursor)
    consumers = [_Consumer(f"c{i}") for i in range(CONSUMERS)]
    for c in consumers:
        d.add_consumer(c, 2**40)
    first = consumers[0]
    slot = next(s for s in range(1, 65536) if selector.select(s) is first)
    d.add_read_columns(np.ones(n, dtype=np.int64), np.arange(n, dtype=np.int64), np.full(n, slot))
    sent = d.dispatch()
    if len(sent) != 1 or sent[0][0] is not first or len(sent[0][1]) != n:
        raise AssertionError("the measured consumer did not receive every message")
    return d, first, sent[0][1]


def measure_calls(n: int = 96_000, rounds: int = 5) -> tuple[float, list[CallFigure]]:
    """The call floor (ns) and the per-event calls' figures (``n``: acks timed per figure)."""
    floor = 1e3 / call_floor(n)
    figures: list[CallFigure] = []

    def acks(kind: str, k: int) -> float:
        def make() -> Iterable[Any]:
            d, c, held = _dispatcher(n)
            if kind == "ack":
                return map(d.ack, repeat(c, n), held)
            groups = [held[i : i + k] for i in range(0, n, k)]
            if kind == "ack_many":
                return map(d.ack_many, repeat(c, len(groups)), groups)
            if kind == "nack":
                return map(d.nack, repeat(c, len(groups)), groups)
            ls = [np.fromiter((p.ledger_id for p in g), np.int64, len(g)) for g in groups]
            es = [np.fromiter((p.entry_id for p in g), np.int64, len(g)) for g in groups]
            return map(d.ack_columns, repeat(c, len(groups)), ls, es)

        return _timed(make, n // k, rounds)

    figures.append(CallFigure("KeySharedDispatcher.ack(consumer, Position)", acks("ack", 1)))
    for kind, label in (
        ("ack_many", "ack_many(consumer, [Position, ...])"),
        ("ack_columns", "ack_columns(consumer, ledgers, entries) (int64 arrays)"),
        ("nack", "nack(consumer, [Position, ...])"),
    ):
        one, sixteen = acks(kind, 1), acks(kind, 16)
        figures.append(CallFigure(f"KeySharedDispatcher.{label}", one, (sixteen - one) / 15))

    def idle(method: str, *args: Any) -> float:
        def make() -> Iterable[Any]:
            d, c, _ = _dispatcher(16)
            call = getattr(d, method)
            params = [repeat(c if a is _Consumer else a, n) for a in args]
            return map(call, *params) if params else starmap(call, repeat((), n))

        return _timed(make, n, rounds)

    figures.append(
        CallFigure("KeySharedDispatcher.add_permits(consumer, 1)", idle("add_permits", _Consumer, 1))
    )
    figures.append(CallFigure("KeySharedDispatcher.should_read()", idle("should_read")))
    figures.append(CallFigure("KeySharedDispatcher.dispatch() (nothing due)", idle("dispatch")))
    figures.append(
        CallFigure("KeySharedDispatcher.dispatch_columns() (nothing due)", idle("dispatch_columns"))
    )
    figures.append(
        CallFigure("KeySharedDispatcher.redelivery_count(Position)", idle("redelivery_count", Position(1, 3)))
    )

    def cursor_ack() -> Iterable[Any]:
        c = Cursor(Position(1, -1))
        return map(c.ack, repeat(1, n), list(range(1, 2 * n, 2)))

    figures.append(CallFigure("Cursor.ack(ledger_id, entry_id) (a hole each)", _timed(cursor_ack, n, rounds)))
    return floor, figures
