"""A broker's per-event calls (issue 28): the broker loop, the per-call table, the delayed hook.

The broker loop (``cursorkit.bench.broker_loop``): 200,000 messages, Zipf keys, consumers with
1,000 permits each acking what they received 3 steps earlier one consumer at a time, each ack
followed by that consumer's flow, a leave and a join every 10,000 messages; cursorkit's
``KeySharedDispatcher`` and the naive pure-Python peer (no ordering guarantee) driven by the same
loop, alternately, in the same run, through the object API and through the column API, with 100
and with 1,000 consumers. The loop checks every message was acked exactly once. Beside them, the
bound: the same loop driving a stand-in that replays cursorkit's decisions and does no work
(``run_ceiling``): no dispatcher can beat it on this loop, so it shows how much of the remaining
gap is the dispatcher's own work.

The per-call table (``cursorkit.bench.per_call``): each per-event call driven from C, its fixed cost
(one position or none) and its cost per further position, beside the CPython call floor.

The delayed hook: one read of 5,000 entries of which 30% carry a future deliver-at time, against
the same read with none delayed (the tracker gets the delayed ones in one ``add_many``).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Cursor, Position
from cursorkit.bench.broker_loop import Form, LoopSpec, prepare, run_ceiling, run_fresh
from cursorkit.bench.per_call import measure_calls
from cursorkit.delayed import InMemoryDelayedDeliveryTracker
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import ConsistentHashingSelector

CURSORKIT = "cursorkit"
NAIVE = "naive Python (no ordering)"
FLOOR = "CPython call floor"
CEILING = "no dispatcher work (bound)"
FORMS: tuple[Form, ...] = ("objects", "columns")
RATIO_TARGET = {"objects": 3.0, "columns": 5.0}
CONSUMER_COUNTS = (100, 1000)
FIXED_TARGET_NS = 300.0
PER_POSITION_TARGET_NS = 30.0
DELAYED_READ = 5_000
DELAYED_SHARE = 0.3
DELAYED_TARGET = 1.5


def _loop_row(consumers: int, form: str) -> str:
    return f"broker loop, {consumers} consumers, {form} API"


def _ratio_row(consumers: int, form: str) -> str:
    return f"broker loop, {consumers} consumers, {form} API: / naive"


PER_CALL_ROWS = (
    "ack(consumer, Position)",
    "ack_many: fixed",
    "ack_many: per position",
    "ack_columns: fixed",
    "ack_columns: per position",
    "nack: fixed",
    "nack: per position",
    "add_permits(consumer, 1)",
    "should_read()",
    "dispatch(), nothing due",
    "dispatch_columns(), nothing due",
    "redelivery_count(Position)",
    "Cursor.ack(ledger_id, entry_id)",
)
DELAYED_ROW = "read of 5,000 entries, 30% delayed / none delayed"

TABLE = dw.DelayedTable(
    rows=[
        *(
            row
            for n in CONSUMER_COUNTS
            for form in FORMS
            for row in (
                cw.Row(_loop_row(n, form), "k msgs/s", True, None),
                cw.Row(_ratio_row(n, form), "×", True, RATIO_TARGET[form]),
            )
        ),
        *(
            cw.Row(name, "ns", False, PER_POSITION_TARGET_NS if "per position" in name else FIXED_TARGET_NS)
            for name in PER_CALL_ROWS
        ),
        cw.Row(DELAYED_ROW, "×", False, DELAYED_TARGET),
    ],
    peers=(NAIVE, CEILING, FLOOR),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Per-event calls and the broker loop - {mode}", judge=not smoke)


def test_broker_loop(benchmark: Any, smoke: bool) -> None:
    """Messages per second through the broker loop, cursorkit and the naive peer alternately."""
    benchmark.group = "broker loop"
    rounds = 1 if smoke else 3

    def timed() -> None:
        for consumers in CONSUMER_COUNTS:
            spec = (
                LoopSpec(messages=6_000, consumers=consumers, churn_every=1_500)
                if smoke
                else LoopSpec(consumers=consumers)
            )
            inputs = prepare(spec)
            for form in FORMS:
                best = {CURSORKIT: float("inf"), NAIVE: float("inf")}
                for _ in range(rounds):  # interleaved, so a noisy moment hits both
                    for kind in best:
                        best[kind] = min(best[kind], run_fresh(spec, inputs, form, naive=kind == NAIVE))
                best[CEILING] = run_ceiling(spec, inputs, form, rounds=rounds)
                for kind, seconds in best.items():
                    TABLE.record(_loop_row(consumers, form), kind, spec.messages / seconds / 1e3, lower=False)
                for kind in (CURSORKIT, CEILING):
                    TABLE.record(_ratio_row(consumers, form), kind, best[NAIVE] / best[kind], lower=False)

    benchmark.pedantic(timed, rounds=1, iterations=1)


def test_per_call_costs(benchmark: Any, smoke: bool) -> None:
    """Each per-event call's fixed cost and cost per position, beside the call floor."""
    benchmark.group = "broker loop"
    floor, figures = measure_calls(4_800 if smoke else 96_000, 1 if smoke else 5)
    by_call = {f.call.split(".", 1)[1].split(" (")[0]: f for f in figures}

    def figure(prefix: str) -> Any:
        return next(f for call, f in by_call.items() if call.startswith(prefix))

    plain = {
        "ack(consumer, Position)": figure("ack(consumer"),
        "add_permits(consumer, 1)": figure("add_permits"),
        "should_read()": figure("should_read"),
        "dispatch(), nothing due": figure("dispatch()"),
        "dispatch_columns(), nothing due": figure("dispatch_columns"),
        "redelivery_count(Position)": figure("redelivery_count"),
        "Cursor.ack(ledger_id, entry_id)": next(f for f in figures if f.call.startswith("Cursor.ack")),
    }
    for name, f in plain.items():
        TABLE.record(name, CURSORKIT, f.fixed_ns)
        TABLE.record(name, FLOOR, floor)
    for call in ("ack_many", "ack_columns", "nack"):
        f = figure(call)
        TABLE.record(f"{call}: fixed", CURSORKIT, f.fixed_ns)
        TABLE.record(f"{call}: fixed", FLOOR, floor)
        assert f.per_position_ns is not None
        TABLE.record(f"{call}: per position", CURSORKIT, max(f.per_position_ns, 0.0))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def _delayed_read_seconds(delayed_share: float, reads: int) -> float:
    """Best time of one ``add_read_columns`` of 5,000 entries, ``delayed_share`` of them delayed."""
    rng = np.random.default_rng(11)
    now = [0]
    tracker = InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=lambda: now[0])
    d = KeySharedDispatcher(
        selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)), delayed=tracker
    )
    consumer = _Consumer()
    d.add_consumer(consumer, 2**40)
    best = float("inf")
    for r in range(reads):
        es = np.arange(r * DELAYED_READ, (r + 1) * DELAYED_READ, dtype=np.int64)
        ls = np.ones(DELAYED_READ, dtype=np.int64)
        slots = rng.integers(1, 65536, DELAYED_READ)
        at = np.where(rng.random(DELAYED_READ) < delayed_share, 60_000 + es, 0).astype(np.int64)
        gc.disable()
        try:
            t0 = time.perf_counter()
            d.add_read_columns(ls, es, slots, at)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
        for c, cl, ce in d.dispatch_columns():  # what is due goes out and is acked (not timed)
            d.ack_columns(c, cl, ce)
    assert (
        tracker.number_of_delayed_messages == 0
        if delayed_share == 0
        else tracker.number_of_delayed_messages > 0
    )
    return best


class _Consumer:
    """The one consumer of the delayed-hook dispatcher."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = "c"


def test_delayed_hook(benchmark: Any, smoke: bool) -> None:
    """A read with 30% delayed entries against the same read with none delayed."""
    benchmark.group = "broker loop"
    reads = 3 if smoke else 30
    none = min(_delayed_read_seconds(0.0, reads) for _ in range(2))
    some = min(_delayed_read_seconds(DELAYED_SHARE, reads) for _ in range(2))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    TABLE.record(DELAYED_ROW, CURSORKIT, some / none)
