"""Workloads, Python peers and the result tables of the delayed-delivery benchmarks (issue 4 §6).

Workloads, positions ``(ledger, entry)`` with a deliver-at time in ms:

* W4, W4c - :mod:`cursorkit.bench.data`'s (the ones ``cursorkit bench`` runs too), starting an hour from now.
* Bucket feed - 10,000,000 messages over 200 ledgers (50,000 per ledger, in ledger order as a
  dispatcher reads them), deliver-at uniform over ten hours from a fixed clock.

The peers are the bare data structures a Python broker would use for Pulsar's classic tracker: a
``heapq`` of ``(deliver_at, ledger, entry)`` tuples and a ``sortedcontainers.SortedList`` of them. They
skip the cutoff check, the clock read and the deduplication the trackers do, so they are a lower bound
on a Python tracker's cost and the ratios are conservative. Drains return each batch of positions
sorted by ``(ledger, entry)``, as Pulsar's ``getScheduledMessages`` does and cursorkit's trackers do.
"""

from __future__ import annotations

import gc
import heapq
import time
import tracemalloc
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt
from sortedcontainers import SortedList

import cursor_workloads as cw
import cursorkit
from cursorkit import _core
from cursorkit.bench.data import HOUR_MS, W4_SEED, deliver_at

I64 = npt.NDArray[np.int64]

SEED = W4_SEED
W4_N = 1_000_000
DRAIN_BATCH = 100
BUCKET_CLOCK_MS = 1_700_000_000_000
"""Fixed start of the bucket feed's clock: the workload and its expected order never depend on the wall."""
MB = 1_000_000

CURSORKIT = "cursorkit"
HEAPQ = "heapq of tuples (Python)"
SORTEDLIST = "SortedList of tuples (Python)"
IN_MEMORY_10M = "cursorkit in-memory tracker, same feed"
INDEPENDENT = "10 independent in-memory trackers"


def system_clock_ms() -> int:
    """The wall clock in ms (what ``clock=None`` reads in Rust)."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A settable clock for the trackers: adds before, drains after moving it past every deliver-at."""

    def __init__(self, now: int) -> None:
        """Start at ``now`` ms."""
        self.now = now

    def __call__(self) -> int:
        """The current time in ms."""
        return self.now


# ------------------------------------------------------------------------------------------ workloads


class Workload:
    """Delayed messages as three int64 columns, with lazily built per-call inputs."""

    def __init__(self, name: str, ledgers: I64, entries: I64, deliver_at: I64) -> None:
        """Wrap the columns of workload ``name``."""
        self.name = name
        self.ledgers = np.ascontiguousarray(ledgers)
        self.entries = np.ascontiguousarray(entries)
        self.deliver_at = np.ascontiguousarray(deliver_at)

    def __len__(self) -> int:
        """Number of messages."""
        return len(self.entries)

    @cached_property
    def lists(self) -> tuple[list[int], list[int], list[int]]:
        """Ledger, entry and deliver-at columns as Python int lists (the per-call inputs)."""
        return self.ledgers.tolist(), self.entries.tolist(), self.deliver_at.tolist()

    @property
    def last_deliver_at(self) -> int:
        """The latest deliver-at: a clock past it makes everything due."""
        return int(self.deliver_at.max())


@cache
def w4(n: int = W4_N, *, clustered: bool = False) -> Workload:
    """W4 (or W4c when ``clustered``) over ``n`` messages: deliver-at within the hour after next."""
    base = system_clock_ms() + HOUR_MS  # far enough ahead that nothing falls due during the benchmark
    ledgers, entries, at = deliver_at(n, base, clustered=clustered)
    return Workload("W4c" if clustered else "W4", ledgers, entries, at)


@cache
def bucket_feed_workload(ledgers: int, per_ledger: int) -> Workload:
    """``ledgers`` x ``per_ledger`` messages in ledger order, deliver-at uniform over ten hours."""
    ids = np.repeat(np.arange(1, ledgers + 1, dtype=np.int64), per_ledger)
    entries = np.tile(np.arange(per_ledger, dtype=np.int64), ledgers)
    rng = np.random.default_rng(SEED + 7)
    ats = BUCKET_CLOCK_MS + 60_000 + rng.integers(0, 10 * HOUR_MS, size=len(ids), dtype=np.int64)
    return Workload("bucket feed", ids, entries, ats)


def check_drain(batches: list[I64], wl: Workload, *, precision_ms: int = 1, keep: Any = None) -> None:
    """Assert the batches are ``wl`` (rows ``keep`` of it) drained in exact time order.

    Each batch holds (ledger, entry) rows sorted by position; batch ``k`` must be exactly the next
    ``len(batch)`` messages in (deliver-at rounded down to ``precision_ms``, ledger, entry) order.
    """
    ls, es, ats = wl.ledgers, wl.entries, wl.deliver_at
    if keep is not None:
        ls, es, ats = ls[keep], es[keep], ats[keep]
    got = np.concatenate(batches) if batches else np.empty((0, 2), dtype=np.int64)
    assert got.shape == (len(ls), 2), f"drained {len(got)} of {len(ls)} messages"
    rounded = ats & np.int64(-precision_ms)
    order = np.lexsort((es, ls, rounded))
    chunk = np.repeat(np.arange(len(batches)), [len(b) for b in batches])
    tl, te = ls[order], es[order]
    within = np.lexsort((te, tl, chunk))
    assert np.array_equal(got[:, 0], tl[within]), "ledger ids out of time order"
    assert np.array_equal(got[:, 1], te[within]), "entry ids out of time order"


# ----------------------------------------------------------------------------------------- the peers


def heapq_add_map(heap: list[tuple[int, int, int]], ls: list[int], es: list[int], ats: list[int]) -> None:
    """Push per call, driven like cursorkit's ``deque(map(...))`` loop (zip builds each tuple)."""
    deque(map(heapq.heappush, repeat(heap), zip(ats, ls, es, strict=True)), 0)


def heapq_add_for(heap: list[tuple[int, int, int]], ls: list[int], es: list[int], ats: list[int]) -> None:
    """Push per call from a ``for`` loop."""
    push = heapq.heappush
    for ledger, entry, at in zip(ls, es, ats, strict=True):
        push(heap, (at, ledger, entry))


def heapq_bulk(ls: I64, es: I64, ats: I64) -> list[tuple[int, int, int]]:
    """The bulk path from numpy columns: tuples, then ``heapify``."""
    heap = list(zip(ats.tolist(), ls.tolist(), es.tolist(), strict=True))
    heapq.heapify(heap)
    return heap


def heapq_drain(heap: list[tuple[int, int, int]], batch: int) -> list[list[tuple[int, int, int]]]:
    """Pop ``batch`` at a time; each batch's positions sorted like ``getScheduledMessages``."""
    pop = heapq.heappop
    out = []
    while heap:
        items = [pop(heap) for _ in range(min(batch, len(heap)))]
        items.sort(key=lambda t: (t[1], t[2]))
        out.append(items)
    return out


def sorted_add_map(sl: SortedList, ls: list[int], es: list[int], ats: list[int]) -> None:
    """``SortedList.add`` per call, ``deque(map(...))`` loop."""
    deque(map(sl.add, zip(ats, ls, es, strict=True)), 0)


def sorted_add_for(sl: SortedList, ls: list[int], es: list[int], ats: list[int]) -> None:
    """``SortedList.add`` per call from a ``for`` loop."""
    add = sl.add
    for ledger, entry, at in zip(ls, es, ats, strict=True):
        add((at, ledger, entry))


def sorted_bulk(ls: I64, es: I64, ats: I64) -> SortedList:
    """The bulk path from numpy columns: one ``SortedList`` built from the tuples."""
    return SortedList(zip(ats.tolist(), ls.tolist(), es.tolist(), strict=True))


def sorted_drain(sl: SortedList, batch: int) -> list[list[tuple[int, int, int]]]:
    """Take and delete the first ``batch`` items at a time; each batch sorted by position."""
    out = []
    while sl:
        items = list(sl.islice(0, batch))
        del sl[:batch]
        items.sort(key=lambda t: (t[1], t[2]))
        out.append(items)
    return out


def check_peer_drain(batches: list[list[tuple[int, int, int]]], wl: Workload) -> None:
    """Assert a peer drained every message of ``wl`` in exact time order (as ``check_drain``)."""
    rows = [np.array([(ledger, entry) for _, ledger, entry in b], dtype=np.int64) for b in batches]
    check_drain([r.reshape(-1, 2) for r in rows], wl)


def traced_bytes(build: Callable[[], Any]) -> tuple[int, Any]:
    """(bytes tracemalloc sees held after ``build()``, its result); build inside the traced region."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = build()
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return used, result


def peer_memory(kind: str, wl: Workload) -> int:
    """Bytes a peer holds for ``wl``: per-call build from fresh ints (tracemalloc charges kept ints)."""

    def build() -> Any:
        ls, es, ats = wl.ledgers.tolist(), wl.entries.tolist(), wl.deliver_at.tolist()
        if kind == HEAPQ:
            s: Any = []
            heapq_add_for(s, ls, es, ats)
        else:
            s = SortedList()
            sorted_add_for(s, ls, es, ats)
        del ls, es, ats
        return s

    used, s = traced_bytes(build)
    assert len(s) == len(wl)
    return used


@dataclass
class RustHeap:
    """``heap_allocated()`` delta over a ``with`` block (the Rust structures a block leaves behind)."""

    base: int = 0
    delta: int = 0

    def __enter__(self) -> RustHeap:
        gc.collect()
        self.base = _core.heap_allocated()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.collect()
        self.delta = _core.heap_allocated() - self.base


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ledger_runs(wl: Workload) -> Iterator[tuple[int, slice]]:
    """``(ledger, slice)`` of each run of one ledger in ``wl`` (input in ledger order)."""
    cuts = np.flatnonzero(np.diff(wl.ledgers)) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(wl)]
    for a, b in zip(starts, ends, strict=True):
        yield int(wl.ledgers[a]), slice(a, b)


# ------------------------------------------------------------------------------------------- tables


@dataclass
class DelayedTable(cw.Table):
    """The cursor benchmarks' table with this table's own rows, peers and fixed reference columns.

    ``refs`` maps a reference column (figures quoted from the issue or the research notes, *not*
    measured here) to ``metric -> (value, note)``.
    """

    rows: list[cw.Row] = field(default_factory=list)
    peers: tuple[str, ...] = ()
    refs: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)

    def render(self, title: str, *, judge: bool) -> str:
        """Markdown: cursorkit, target, status, each peer and reference with its ratio to cursorkit."""
        head = ["Metric", "cursorkit", "target", "status", *self.peers, *self.refs]
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows:
            ours = self.cells.get((row.metric, CURSORKIT))
            others = [self.cells.get((row.metric, p)) for p in self.peers]
            others += [col.get(row.metric) for col in self.refs.values()]
            if ours is None and not any(others):
                continue
            cells = [row.metric, _fmt(ours, row.unit)]
            if row.target is None:
                cells += ["", ""]
            else:
                sign = "≥" if row.higher_is_better else "≤"
                cells.append(f"{sign} {row.target:g} {row.unit}")
                ok = ours is not None and (
                    ours[0] >= row.target if row.higher_is_better else ours[0] <= row.target
                )
                cells.append(("PASS" if ok else "MISS") if judge else "(smoke)")
            for other in others:
                if other is None:
                    cells.append("—")
                    continue
                cell = _fmt(other, row.unit)
                if ours is not None and other[0] and ours[0]:
                    ratio = ours[0] / other[0] if row.higher_is_better else other[0] / ours[0]
                    cell += f" (cursorkit ×{ratio:,.0f})" if ratio >= 10 else f" (cursorkit ×{ratio:.2g})"
                cells.append(cell)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(
            f"cursorkit {cursorkit.__version__}; ratios: how many times better cursorkit is; "
            "'ref' columns quote published figures, they are not measured here."
        )
        return "\n".join(lines)


def _fmt(cell: tuple[float, str] | None, unit: str) -> str:
    """``cw._fmt`` with ratios as ``1.05×`` and no exponent notation for large values."""
    if cell is None or not (unit == "×" or cell[0] >= 1000):
        return cw._fmt(cell, unit)
    value, note = cell
    text = f"{value:.2f}×" if unit == "×" else f"{value:,.0f} {unit}"
    return text + (f" {note}" if note else "")


ADD_MAP = "add per call, deque(map(...)) (W4)"
ADD_FOR = "add per call, for loop (W4)"
ADD_BULK = "add_many bulk, numpy columns (W4)"
DRAIN = "drain, batches of 100, exact time order (W4)"
MEM_W4 = "memory per index (W4, uniform deliver-at)"
MEM_W4C = "memory per index (W4c, 3,600 distinct deliver-at)"

IN_MEMORY = DelayedTable(
    rows=[
        cw.Row(ADD_MAP, "M/s", True, 5.0),
        cw.Row(ADD_FOR, "M/s", True, 5.0),
        cw.Row(ADD_BULK, "M/s", True, 20.0),
        cw.Row(DRAIN, "M/s", True, 12.0),
        cw.Row(MEM_W4, "B", False, 24.0),
        cw.Row(MEM_W4C, "B", False, 6.0),
    ],
    peers=(HEAPQ, SORTEDLIST),
    refs={
        "ref: Pulsar TripleLongPriorityQueue (issue)": {
            ADD_MAP: (16.5, "(pushes, Java)"),
            DRAIN: (0.79, ""),
            MEM_W4: (33.6, ""),
        },
        "ref: Pulsar master bucketed roaring (issue)": {
            ADD_MAP: (2.8, "(Java)"),
            DRAIN: (10.3, ""),
            MEM_W4: (17.2, ""),
        },
        "ref: heapq (issue)": {ADD_MAP: (4.5, ""), DRAIN: (0.31, ""), MEM_W4: (104.0, "")},
    },
)

BUCKET_ADD = "add_many per ledger, whole feed (incl. seals)"
BUCKET_MEM = "resident memory right after the last add"
BUCKET_MEM_IDLE = "resident memory once queued snapshot writes finish"
BUCKET_PEAK = "peak memory during the feed"
BUCKET_BUFFER = "buffer_memory_usage after all adds"
SEAL_P50 = "seal (the add_message that seals), p50"
SEAL_MAX = "seal (the add_message that seals), max"
ADD_DURING_WRITE = "slowest add_message while snapshot writes are pending"
RECOVERY = "recovery (new tracker on the same storage)"
SNAPSHOT_BYTES = "snapshot bytes per index on disk"
BUCKET_DRAIN = "drain after recovery, exact time order"
PULSAR_REF = "ref: Pulsar (research notes)"

BUCKET = DelayedTable(
    rows=[
        cw.Row(BUCKET_ADD, "M/s", True, None),
        cw.Row(BUCKET_MEM, "MB", False, 64.0),
        cw.Row(BUCKET_MEM_IDLE, "MB", False, 64.0),
        cw.Row(BUCKET_PEAK, "MB", False, None),
        cw.Row(BUCKET_BUFFER, "MB", False, None),
        cw.Row(SEAL_P50, "ms", False, 50.0),
        cw.Row(SEAL_MAX, "ms", False, 50.0),
        cw.Row(ADD_DURING_WRITE, "ms", False, None),
        cw.Row(RECOVERY, "s", False, 2.0),
        cw.Row(SNAPSHOT_BYTES, "B", False, None),
        cw.Row(BUCKET_DRAIN, "M/s", True, None),
    ],
    peers=(IN_MEMORY_10M,),
    refs={
        PULSAR_REF: {
            BUCKET_MEM: (240.0, "(in-memory tracker, 24 B/index)"),
            SEAL_P50: (1500.0, "(#24603, under the dispatcher lock)"),
            SEAL_MAX: (1500.0, "(#24603)"),
            SNAPSHOT_BYTES: (16.5, "(15–18)"),
        }
    },
)

SHARED_RATIO = "memory, 10 subscriptions ÷ 1 subscription"
SHARED_MEM = "memory, 10 subscriptions (W4)"
SHARED_ADD = "add_many of W4 through each of 10 subscriptions"
SHARED_DRAIN = "drain, every subscription receives every message"
SHARED_DRAIN_100 = "drain one subscription (of 10), batches of 100"

SHARED = DelayedTable(
    rows=[
        cw.Row(SHARED_RATIO, "×", False, 1.2),
        cw.Row(SHARED_MEM, "MB", False, None),
        cw.Row(SHARED_ADD, "M/s", True, None),
        cw.Row(SHARED_DRAIN, "M/s", True, None),
        cw.Row(SHARED_DRAIN_100, "M/s", True, None),
    ],
    peers=(INDEPENDENT,),
)

TABLES = (
    ("Delayed delivery: in-memory tracker (W4 / W4c)", IN_MEMORY),
    ("Delayed delivery: bucket tracker (PIP-195)", BUCKET),
    ("Delayed delivery: shared index, 10 subscriptions", SHARED),
)


def render_tables(smoke: bool) -> list[str]:
    """Every delayed table holding figures, titled for the mode."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return [table.render(f"{title} - {mode}", judge=not smoke) for title, table in TABLES if table.cells]
