"""The standard workloads of ``cursorkit bench``, one function per group, each beside its peers.

Groups: ``rangeset`` (W1 in-order acks, W2 alternating holes, W3 permuted over 10 ledgers, membership),
``cursor`` (acks per call and in bulk, persistence), ``delayed`` (W4: a million deliver-at times over an
hour, added and drained in order), ``hashing`` (Pulsar's sticky-key hash), ``selectors`` (consistent
hashing at 100 consumers), ``dispatcher`` (the Key_Shared simulation with consumer churn),
``broker-loop`` (a broker's per-event calls in its loop), ``per-call`` (each per-event call's cost) and
``pipeline`` (a small rebuild on local Spark, when PySpark and Java are here). A peer missing from
this machine is skipped and named in the row's note.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from cursorkit import Cursor, Position, RangeSet
from cursorkit.bench.data import W2_LEDGER, deliver_at, positions
from cursorkit.bench.measure import Plan, Row, best
from cursorkit.bench.peers import NaiveDispatcher, PyroaringCursor, murmur3_py, optional

__all__ = ["GROUPS", "WORKLOADS", "simulate"]

SEED = 20_261_126
CURSORKIT = "cursorkit"
PYROARING = "pyroaring"
SORTED = "sortedcontainers"
HEAPQ = "heapq of tuples"
MMH3 = "mmh3"
PURE_MURMUR = "Murmur3 in Python"
BISECT = "bisect per slot (Python)"
NAIVE = "naive Python dispatcher"
CALL_FLOOR = "CPython call floor"
BOUND = "no dispatcher work (bound)"
PULSAR_REWRITE = "Pulsar's full rewrite (MessageRange)"
REFERENCE = "single process (pyarrow + Cursor)"
SIM_CONSUMERS = 100
"""Consumers of the Key_Shared simulation (each with 1,000 permits, acking at once)."""
SIM_KEYS = 100_000
"""Distinct keys the simulation draws from."""
SIM_READ_BATCH = 5_000
"""Entries the simulated broker reads a round."""


def _rate(n: int, seconds: float) -> float:
    return n / seconds / 1e6


def _add_many(ledgers: np.ndarray, entries: np.ndarray) -> None:
    RangeSet().add_many(ledgers, entries)


def rangeset(plan: Plan) -> list[Row]:
    """W1–W3 bulk adds, random membership and per-call adds, beside pyroaring and sortedcontainers."""
    n = plan.size(1_000_000)
    pyroaring, sortedcontainers = optional("pyroaring"), optional("sortedcontainers")
    rows = []
    for name, workload in (
        ("W1 add_many, in-order acks", "W1"),
        ("W2 add_many, alternating holes", "W2"),
        ("W3 add_many, permuted over 10 ledgers", "W3"),
    ):
        ls, es = positions(workload, n)
        row = Row("rangeset", f"{name} ({ls.size:,})", "M/s", True)
        row.values[CURSORKIT] = _rate(ls.size, best(_add_many, partial(tuple, (ls, es)), plan.rounds))
        packed = (ls << 32) | es
        if pyroaring is not None:
            row.values[PYROARING] = _rate(
                ls.size, best(lambda p=packed: pyroaring.BitMap64(p.astype(np.uint64)), tuple, plan.rounds)
            )
        if sortedcontainers is not None:
            items = packed.tolist()
            row.values[SORTED] = _rate(
                ls.size, best(lambda i=items: sortedcontainers.SortedSet(i), tuple, plan.rounds)
            )
        rows.append(row)
    ls, es = positions("W2", 2 * n)  # n holes
    rs = RangeSet()
    rs.add_many(ls, es)
    packed = (ls << 32) | es
    packed_l = packed.tolist()
    probe = np.random.default_rng(SEED).integers(0, 2 * n, n, dtype=np.int64)  # half of them hit
    zeros = np.full_like(probe, W2_LEDGER)
    row = Row("rangeset", f"W2 contains_many, random ({n:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(n, best(lambda: rs.contains_many(zeros, probe), tuple, plan.rounds))
    bm = pyroaring.BitMap64(packed.astype(np.uint64)) if pyroaring is not None else None
    if bm is not None:
        keys = ((W2_LEDGER << 32) | probe).tolist()
        row.values[PYROARING] = _rate(
            n, best(lambda: deque(map(bm.__contains__, keys), 0), tuple, plan.rounds)
        )
        row.note = "pyroaring: one call per probe"
    rows.append(row)
    row = Row("rangeset", f"W2 add per call, deque(map) ({n:,})", "M/s", True)
    lsl, esl = ls.tolist(), es.tolist()
    row.values[CURSORKIT] = _rate(
        n, best(lambda r: deque(map(r.add, lsl, esl), 0), lambda: (RangeSet(),), plan.rounds)
    )
    if pyroaring is not None:
        row.values[PYROARING] = _rate(
            n, best(lambda b: deque(map(b.add, packed_l), 0), lambda: (pyroaring.BitMap64(),), plan.rounds)
        )
    if sortedcontainers is not None:
        row.values[SORTED] = _rate(
            n,
            best(
                lambda s: deque(map(s.add, packed_l), 0), lambda: (sortedcontainers.SortedSet(),), plan.rounds
            ),
        )
    rows.append(row)
    mem = Row("rangeset", f"W2 memory ({n:,} holes)", "KB", False)
    mem.values[CURSORKIT] = rs.memory_usage() / 1024
    if bm is not None:
        mem.values[PYROARING] = len(bm.serialize()) / 1024
        mem.note = "pyroaring: serialized size"
    rows.append(mem)
    return rows


def _holes(n: int, ledgers: int) -> tuple[np.ndarray, np.ndarray]:
    per = n // ledgers
    ls = np.repeat(np.arange(1, ledgers + 1, dtype=np.int64), per)
    es = np.tile(np.arange(0, 2 * per, 2, dtype=np.int64), ledgers)
    order = np.random.default_rng(SEED).permutation(ls.size)
    return ls[order], es[order]


def cursor(plan: Plan) -> list[Row]:
    """Acks per call and in bulk (1M holes over 20 ledgers), and a flush against Pulsar's rewrite."""
    from cursorkit.ackstate import persist
    from cursorkit.ackstate.limits import UNLIMITED
    from cursorkit.ackstate.store import FileCursorStore
    from cursorkit.fsio import atomic_write

    n = plan.size(1_000_000)
    ls, es = _holes(n, 20)
    lsl, esl = ls.tolist(), es.tolist()
    pyroaring = optional("pyroaring")
    rows = []
    row = Row("cursor", f"ack per call, holes over 20 ledgers ({ls.size:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(
        ls.size,
        best(lambda c: deque(map(c.ack, lsl, esl), 0), lambda: (Cursor(Position(1, -1)),), plan.rounds),
    )
    if pyroaring is not None:
        row.values[PYROARING] = _rate(
            ls.size,
            best(lambda c: deque(map(c.ack, lsl, esl), 0), lambda: (PyroaringCursor((1, -1)),), plan.rounds),
        )
    rows.append(row)
    row = Row("cursor", f"ack_many, shuffled holes over 20 ledgers ({ls.size:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(
        ls.size, best(lambda c: c.ack_many(ls, es), lambda: (Cursor(Position(1, -1)),), plan.rounds)
    )
    if pyroaring is not None:
        row.values[PYROARING] = _rate(
            ls.size, best(lambda c: c.ack_many(ls, es), lambda: (PyroaringCursor((1, -1)),), plan.rounds)
        )
    rows.append(row)
    full = Cursor(Position(1, -1))
    full.ack_many(ls, es)
    root = Path(tempfile.mkdtemp(prefix="cursorkit-bench-"))
    try:
        store = FileCursorStore.create(root / "store", name="bench")
        store.flush(full, full=True)
        extra = iter(range(2 * n + 1, 4 * n, 2))

        def one_dirty() -> None:
            full.ack(Position(7, next(extra)))
            store.flush(full)

        def rewrite() -> None:
            data = persist.encode(full, "message_range", UNLIMITED).data
            atomic_write(root / "pulsar-position-info", data, sync=True)

        row = Row("cursor", f"flush after one more ack ({ls.size:,} holes, fsync)", "ms", False)
        row.values[CURSORKIT] = best(one_dirty, tuple, plan.rounds) * 1e3
        row.values[PULSAR_REWRITE] = best(rewrite, tuple, plan.rounds) * 1e3
        row.note = "Pulsar rewrites the whole PositionInfo every flush: every range encoded, written, fsynced"
        rows.append(row)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def delayed(plan: Plan) -> list[Row]:
    """W4: deliver-at uniform over an hour, 10 ledgers, shuffled; added in bulk, drained in time order."""
    from cursorkit.delayed import InMemoryDelayedDeliveryTracker

    n = plan.size(1_000_000)
    now = 1_000_000_000
    ls, es, at = deliver_at(n, now + 60_000)  # W4, due from a minute on
    clock = [now]
    sortedcontainers = optional("sortedcontainers")

    def tracker() -> InMemoryDelayedDeliveryTracker:
        return InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=lambda: clock[0])

    rows = []
    row = Row("delayed", f"W4 add ({n:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(
        n, best(lambda t: t.add_many(ls, es, at), lambda: (tracker(),), plan.rounds)
    )
    triples = list(zip(at.tolist(), ls.tolist(), es.tolist(), strict=True))

    def heap_add(h: list[tuple[int, int, int]]) -> None:
        push = heapq.heappush
        for item in triples:
            push(h, item)

    row.values[HEAPQ] = _rate(n, best(heap_add, lambda: ([],), plan.rounds))
    if sortedcontainers is not None:
        row.values[SORTED] = _rate(n, best(lambda: sortedcontainers.SortedList(triples), tuple, plan.rounds))
    rows.append(row)

    def filled() -> tuple[InMemoryDelayedDeliveryTracker]:
        clock[0] = now  # not yet due while they are added
        t = tracker()
        t.add_many(ls, es, at)
        clock[0] = now + 4_000_000
        return (t,)

    def drain(t: InMemoryDelayedDeliveryTracker) -> None:
        while t.has_message_available():
            t.get_scheduled_messages(1000)

    def heap_drain(h: list[tuple[int, int, int]]) -> None:
        pop = heapq.heappop
        while h:
            for _ in range(min(1000, len(h))):
                pop(h)

    row = Row("delayed", f"W4 drain in time order, batches of 1,000 ({n:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(n, best(drain, filled, plan.rounds))
    row.values[HEAPQ] = _rate(n, best(heap_drain, lambda: (heapq.nsmallest(n, triples),), plan.rounds))
    clock[0] = now
    rows.append(row)
    mem = Row("delayed", f"W4 memory per index ({n:,})", "B", False)
    (t,) = filled()
    mem.values[CURSORKIT] = t.buffer_memory_usage / n
    mem.values[HEAPQ] = 168.0
    mem.note = "heapq: a 3-tuple of ints and its list slot, 168 B on CPython 3.11 (not measured)"
    rows.append(mem)
    return rows


def hashing(plan: Plan) -> list[Row]:
    """Pulsar's sticky-key hash of 16-byte keys: one bulk call, beside mmh3 and Murmur3 in Python."""
    from cursorkit.keyshared.hashing import hash_many

    n = plan.size(1_000_000)
    rng = np.random.default_rng(SEED)
    keys = [bytes(k) for k in rng.integers(0, 256, (n, 16), dtype=np.uint8)]
    pa = optional("pyarrow")
    column: Any = pa.array(keys, type=pa.binary()) if pa is not None else keys
    row = Row("hashing", f"sticky-key hash, 16-byte keys ({n:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(n, best(lambda: hash_many(column), tuple, plan.rounds))
    few = keys[: max(1, n // 20)]
    row.values[PURE_MURMUR] = _rate(len(few), best(lambda: list(map(murmur3_py, few)), tuple, plan.rounds))
    mmh3 = optional("mmh3")
    if mmh3 is not None:
        h = mmh3.hash
        row.values[MMH3] = _rate(
            n, best(lambda: [h(k, 0, False) & 0x7FFFFFFF for k in keys], tuple, plan.rounds)
        )
    row.note = (
        "pyarrow binary column" if pa is not None else "Python list"
    ) + "; the Python peer on 1/20 of the keys"
    return [row]


def selectors(plan: Plan) -> list[Row]:
    """Which consumer owns each slot: consistent hashing at 100 consumers, beside bisect over the ring."""
    from cursorkit.keyshared.selectors import ConsistentHashingSelector

    n = plan.size(10_000_000, 200_000)
    sel: ConsistentHashingSelector[Any] = ConsistentHashingSelector()
    for i in range(100):
        sel.add_consumer(_Consumer(f"consumer-{i}"))
    slots = np.random.default_rng(SEED).integers(1, 65536, n, dtype=np.int64)
    row = Row("selectors", f"select_many, consistent hashing, 100 consumers ({n:,})", "M/s", True)
    row.values[CURSORKIT] = _rate(n, best(lambda: sel.select_many(slots), tuple, plan.rounds))
    table = sel.select_many(np.arange(65536, dtype=np.int64)).tolist()
    bounds = [s for s in range(1, 65536) if table[s] != table[s - 1]] or [0]
    owners = [table[b] for b in bounds]
    few = slots[: max(1, n // 10)].tolist()

    def per_slot() -> list[int]:
        return [owners[bisect.bisect_right(bounds, s) - 1] for s in few]

    row.values[BISECT] = _rate(len(few), best(per_slot, tuple, plan.rounds))
    row.note = "the Python peer on 1/10 of the slots"
    return [row]


class _Consumer:
    """A consumer as a selector sees it: a name."""

    def __init__(self, name: str) -> None:
        self.name = name


def simulate(
    n: int,
    churn_every: int,
    *,
    naive: bool = False,
    check: bool = False,
    distribution: str = "zipf",
    max_unacked_per_key: int = 0,
) -> tuple[float, Any]:
    """The Key_Shared broker loop with churn; returns (seconds, the ``Simulation``).

    Publishes ``n`` messages in churn-sized chunks, one consumer leaving and one joining after
    each, and drains them. 100 consumers with 1,000 permits that ack at once, 100,000 keys,
    consistent hashing, reads of 5,000 entries; cursorkit's dispatcher in draining mode, or the
    naive peer (``max_unacked_per_key``: cursorkit's per-key cap). The producers' random draws
    happen before the clock starts, and set-up objects are frozen out of the cyclic GC's way, as a
    long-running broker's are after start-up.
    """
    from cursorkit.keyshared.dispatcher import KeySharedDispatcher
    from cursorkit.keyshared.selectors import ConsistentHashingSelector
    from cursorkit.keyshared.sim import Simulation

    selector: ConsistentHashingSelector[Any] = ConsistentHashingSelector()
    cursor = Cursor(Position(1, -1))
    d: Any = (
        NaiveDispatcher(selector=selector, cursor=cursor)
        if naive
        else KeySharedDispatcher(
            selector=selector, cursor=cursor, mode="draining", max_unacked_per_key=max_unacked_per_key
        )
    )
    sim = Simulation(
        d,
        seed=5,
        keys=SIM_KEYS,
        distribution=distribution,
        ledger_size=1_000_000,
        read_batch=SIM_READ_BATCH,
        check=check,
    )
    for i in range(SIM_CONSUMERS):
        sim.join(f"c{i}", 1000)
    joined = SIM_CONSUMERS
    keys = sim.draw_keys(n)
    sim.reserve(n)
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    for chunk in range(n // churn_every):
        sim.publish_keys(keys[chunk * churn_every : (chunk + 1) * churn_every])
        target = (chunk + 1) * churn_every
        while sim.read_upto < target or any(c.inbox for c in sim.consumers.values()):
            sim.step()
        sim.leave(sorted(sim.consumers)[chunk % len(sim.consumers)])
        sim.join(f"c{joined}", 1000)
        joined += 1
    sim.drain()
    seconds = time.perf_counter() - t0
    gc.unfreeze()
    return seconds, sim


def dispatcher(plan: Plan) -> list[Row]:
    """The Key_Shared broker loop: 100 consumers, Zipf keys, a consumer leaving and joining every 10k."""
    n, churn = (20_000, 2_000) if plan.quick else (400_000, 10_000)
    row = Row("dispatcher", f"Key_Shared simulation, draining, churn ({n:,} messages)", "M/s", True)
    for name, naive in ((CURSORKIT, False), (NAIVE, True)):
        best_s = min(simulate(n, churn, naive=naive)[0] for _ in range(1 if plan.quick else 3))
        row.values[name] = _rate(n, best_s)
    row.note = "the naive peer keeps no ordering guarantee at all"
    return [row]


def broker_loop(plan: Plan) -> list[Row]:
    """A broker's event loop: per-consumer acks of a few positions, flows, reads, churn (100 consumers)."""
    from cursorkit.bench.broker_loop import LoopSpec, prepare, run_ceiling, run_fresh

    spec = LoopSpec(messages=20_000, churn_every=2_000) if plan.quick else LoopSpec()
    inputs = prepare(spec)
    rows = []
    for form in ("objects", "columns"):
        row = Row("broker-loop", f"{form} API, {spec.messages:,} messages", "M/s", True)
        fastest = {CURSORKIT: float("inf"), NAIVE: float("inf")}
        for _ in range(1 if plan.quick else 3):  # interleaved rounds: noise hits both
            for name in fastest:
                seconds = run_fresh(spec, inputs, form, naive=name == NAIVE)
                fastest[name] = min(fastest[name], seconds)
        fastest[BOUND] = run_ceiling(spec, inputs, form, rounds=1 if plan.quick else 3)
        row.values = {name: _rate(spec.messages, s) for name, s in fastest.items()}
        row.note = "targets: objects ≥ 3×, columns ≥ 5× naive; bound: no dispatcher work"
        rows.append(row)
    return rows


def per_call(plan: Plan) -> list[Row]:
    """Each per-event call of KeySharedDispatcher and Cursor, beside the CPython call floor (ns)."""
    from cursorkit.bench.per_call import measure_calls

    floor, figures = measure_calls(4_800 if plan.quick else 96_000, plan.rounds)
    rows = []
    for f in figures:
        row = Row("per-call", f.call, "ns", False)
        row.values = {CURSORKIT: f.fixed_ns, CALL_FLOOR: floor}
        if f.per_position_ns is not None:
            row.note = f"+{max(f.per_position_ns, 0):.0f} ns per further position"
        rows.append(row)
    return rows


def pipeline(plan: Plan) -> list[Row]:
    """A small rebuild on local Spark (start-up not counted) beside the single-process computation."""
    if optional("pyspark") is None or shutil.which("java") is None:
        return [
            Row(
                "pipeline",
                "rebuild on local Spark",
                "s",
                False,
                note="skipped: PySpark or Java not installed",
            )
        ]
    from cursorkit.pipeline.generate import generate
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
    from cursorkit.pipeline.reference import rebuild_reference
    from cursorkit.pipeline.session import spark_session

    n = plan.size(1_000_000, 50_000)
    root = Path(tempfile.mkdtemp(prefix="cursorkit-bench-"))
    try:
        logs = generate(
            root / "logs", messages=n, ledgers=20, keys=1000, delayed_fraction=0.3, subscriptions=3, seed=1
        )
        spark = spark_session(None, [("spark.ui.enabled", "false")], app_name="cursorkit-bench")
        cfg = RebuildConfig(report=False)
        rebuild(spark, logs.messages_path, logs.acks_path, root / "warm", cfg)  # JIT and caches, not timed
        runs = iter(range(100))
        row = Row("pipeline", f"rebuild on local Spark ({n:,} messages, 3 subscriptions)", "s", False)
        row.values[CURSORKIT] = best(
            lambda: rebuild(spark, logs.messages_path, logs.acks_path, root / f"out{next(runs)}", cfg),
            tuple,
            1 if plan.quick else 2,
        )
        row.values[REFERENCE] = best(lambda: rebuild_reference(logs.messages_path, logs.acks_path), tuple, 1)
        row.note = "SparkSession start-up not counted"
        return [row]
    finally:
        shutil.rmtree(root, ignore_errors=True)


GROUPS: dict[str, Callable[[Plan], list[Row]]] = {
    "rangeset": rangeset,
    "cursor": cursor,
    "delayed": delayed,
    "hashing": hashing,
    "selectors": selectors,
    "dispatcher": dispatcher,
    "broker-loop": broker_loop,
    "per-call": per_call,
    "pipeline": pipeline,
}
"""Every group, in the order they run."""

WORKLOADS: dict[str, str] = {name: (fn.__doc__ or "").strip().splitlines()[0] for name, fn in GROUPS.items()}
"""A line about each group, for ``cursorkit bench --list``."""
