"""Delayed-delivery benchmarks (issue 4 §6): in-memory tracker, bucket tracker, shared index.

``make bench`` measures (release build); under ``make test`` every body runs once, shrunk, as a smoke
test, and asserts what it measured (counts, exact time order, recovery). The closing tables
(``conftest.py``) print cursorkit, the target, PASS/MISS and each peer with its ratio; the issue's
published figures for Pulsar and heapq sit beside them as reference columns (not measured here).
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sortedcontainers import SortedList

import delayed_workloads as dw
import rangeset_workloads as rw
from cursorkit import _core
from cursorkit.bench.data import TICK_MS
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    FileCursorProperties,
    InMemoryDelayedDeliveryTracker,
    SharedDelayedIndex,
)
from delayed_workloads import CURSORKIT, HEAPQ, MB, SORTEDLIST, ManualClock, Workload

SMOKE_N = 50_000
SORTED_MEMORY_N = 200_000
"""SortedList's traced per-call build of 1M takes long under tracemalloc; B/index does not depend on n."""
SUBSCRIPTIONS = 10
SHARED_DRAIN_BATCH = 10_000
ADDS_DURING_WRITE = 2_000
"""Per-call adds timed after each seal while its snapshot is being written (the rest go in bulk)."""


def _w4(smoke: bool, *, clustered: bool = False) -> Workload:
    return dw.w4(SMOKE_N if smoke else dw.W4_N, clustered=clustered)


def _past(wl: Workload) -> int:
    """A clock value at which every message of ``wl`` is due, whatever the tick."""
    return wl.last_deliver_at + 2 * TICK_MS


def _drain(get: Any, batch: int) -> list[Any]:
    """Call ``get(batch)`` until it returns nothing, as a dispatcher does."""
    out: list[Any] = []
    while True:
        rows = get(batch)
        if not len(rows):
            return out
        out.append(rows)


# --------------------------------------------------------------------------- in-memory tracker (W4)


@pytest.mark.parametrize("impl", [CURSORKIT, HEAPQ, SORTEDLIST])
@pytest.mark.parametrize("driver", ["map", "for"])
def test_add_per_call(benchmark: Any, smoke: bool, impl: str, driver: str) -> None:
    """One call per message from Python int lists (cursorkit reads the system clock in each call)."""
    wl = _w4(smoke)
    ls, es, ats = wl.lists

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        if impl == CURSORKIT:
            return (InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS),), {}
        return ([] if impl == HEAPQ else SortedList(),), {}

    if impl == CURSORKIT:
        if driver == "map":

            def run(s: Any) -> Any:
                deque(map(s.add_message, ls, es, ats), 0)
                return s
        else:

            def run(s: Any) -> Any:
                add = s.add_message
                for ledger, entry, at in zip(ls, es, ats, strict=True):
                    add(ledger, entry, at)
                return s
    else:
        peer = {
            (HEAPQ, "map"): dw.heapq_add_map,
            (HEAPQ, "for"): dw.heapq_add_for,
            (SORTEDLIST, "map"): dw.sorted_add_map,
            (SORTEDLIST, "for"): dw.sorted_add_for,
        }[(impl, driver)]

        def run(s: Any) -> Any:
            peer(s, ls, es, ats)
            return s

    timer = rw.BestTimer(run)
    benchmark.group = f"delayed add per call ({driver})"
    s = benchmark.pedantic(timer, setup=setup, rounds=3, warmup_rounds=0)
    if impl == CURSORKIT:
        assert s.number_of_delayed_messages == len(wl)
        assert s.counters()["added"] == len(wl)
    else:
        assert len(s) == len(wl)
    metric = dw.ADD_MAP if driver == "map" else dw.ADD_FOR
    dw.IN_MEMORY.record(metric, impl, len(wl) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, HEAPQ, SORTEDLIST])
def test_add_bulk(benchmark: Any, smoke: bool, impl: str) -> None:
    """W4 from int64 numpy columns: ``add_many`` (GIL released), or the peers' bulk builds."""
    wl = _w4(smoke)
    if impl == CURSORKIT:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS),), {}

        def run(s: Any) -> Any:
            return s, s.add_many(wl.ledgers, wl.entries, wl.deliver_at)
    else:
        build = dw.heapq_bulk if impl == HEAPQ else dw.sorted_bulk

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (None,), {}

        def run(s: Any) -> Any:  # s: None, the same signature as cursorkit's run
            return build(wl.ledgers, wl.entries, wl.deliver_at), None

    timer = rw.BestTimer(run)
    benchmark.group = "delayed add bulk"
    s, mask = benchmark.pedantic(timer, setup=setup, rounds=5 if impl == CURSORKIT else 3, warmup_rounds=0)
    if impl == CURSORKIT:
        assert mask.dtype == np.bool_ and mask.all()
        assert s.number_of_delayed_messages == len(wl)
    else:
        assert len(s) == len(wl)
    dw.IN_MEMORY.record(dw.ADD_BULK, impl, len(wl) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, HEAPQ, SORTEDLIST])
def test_drain(benchmark: Any, smoke: bool, impl: str) -> None:
    """Everything due (clock past the last deliver-at): ``get_scheduled_messages(100)`` until empty."""
    wl = _w4(smoke)
    if impl == CURSORKIT:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            clock = ManualClock(dw.system_clock_ms())
            t = InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS, clock=clock)
            assert t.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
            clock.now = _past(wl)
            return (t,), {}

        def run(s: Any) -> Any:
            return s, _drain(s.get_scheduled_messages, dw.DRAIN_BATCH)
    else:
        build, drain = (dw.heapq_bulk, dw.heapq_drain) if impl == HEAPQ else (dw.sorted_bulk, dw.sorted_drain)

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (build(wl.ledgers, wl.entries, wl.deliver_at),), {}

        def run(s: Any) -> Any:
            return s, drain(s, dw.DRAIN_BATCH)

    timer = rw.BestTimer(run)
    benchmark.group = "delayed drain"
    s, batches = benchmark.pedantic(timer, setup=setup, rounds=3, warmup_rounds=0)
    assert len(batches) == math.ceil(len(wl) / dw.DRAIN_BATCH)
    if impl == CURSORKIT:
        assert s.number_of_delayed_messages == 0 and s.counters()["delivered"] == len(wl)
        dw.check_drain(batches, wl, precision_ms=s.precision_ms)
    else:
        assert not s
        dw.check_peer_drain(batches, wl)
    dw.IN_MEMORY.record(dw.DRAIN, impl, len(wl) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, HEAPQ, SORTEDLIST])
@pytest.mark.parametrize("clustered", [False, True], ids=["W4", "W4c"])
def test_memory(benchmark: Any, smoke: bool, impl: str, clustered: bool) -> None:
    """Bytes per index: ``buffer_memory_usage`` (checked against the Rust heap); peers by tracemalloc."""
    wl = _w4(smoke, clustered=clustered)
    metric = dw.MEM_W4C if clustered else dw.MEM_W4
    benchmark.group = "delayed memory"
    if impl == CURSORKIT:

        def build() -> tuple[Any, int]:
            with dw.RustHeap() as heap:
                t = InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS)
                assert t.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
            return t, heap.delta

        t, heap = benchmark.pedantic(build, rounds=1, warmup_rounds=0)
        usage = t.buffer_memory_usage
        assert t.number_of_delayed_messages == len(wl)
        # the tracker's own accounting must agree with what the Rust heap holds for it
        assert abs(heap - usage) <= 0.25 * usage + 65_536, (usage, heap)
        note = f"(heap Δ {heap / len(wl):.3g} B)"
        dw.IN_MEMORY.record(metric, impl, usage / len(wl), note)
        return
    if impl == SORTEDLIST and not smoke:
        wl = dw.Workload(wl.name, *(c[:SORTED_MEMORY_N] for c in (wl.ledgers, wl.entries, wl.deliver_at)))
    used = benchmark.pedantic(dw.peer_memory, args=(impl, wl), rounds=1, warmup_rounds=0)
    note = "(tracemalloc" + (f", at {len(wl):,})" if len(wl) != dw.W4_N and not smoke else ")")
    dw.IN_MEMORY.record(metric, impl, used / len(wl), note)


# ------------------------------------------------------------------------------ bucket tracker (PIP-195)


@dataclass(frozen=True, slots=True)
class BucketSizes:
    """The feed's shape and the tracker's seal threshold."""

    ledgers: int
    per_ledger: int
    min_index_count: int


def _bucket_sizes(smoke: bool) -> BucketSizes:
    return BucketSizes(20, 10_000, 10_000) if smoke else BucketSizes(200, 50_000, 50_000)


@dataclass(frozen=True, slots=True)
class Fed:
    """A finished feed on disk: where, what, and how many indexes its sealed buckets hold."""

    root: Path
    sizes: BucketSizes
    wl: Workload
    sealed: int


FED: dict[bool, Fed] = {}
"""The feed of this session per mode; the recovery benchmark reuses it (or feeds its own)."""


def _open(fed: Fed, clock: ManualClock) -> BucketDelayedDeliveryTracker:
    """A tracker on the feed's storage and cursor properties (a broker restart)."""
    storage = FileBucketSnapshotStorage(fed.root / "snapshots")
    props = FileCursorProperties(fed.root / "cursor.properties")
    return BucketDelayedDeliveryTracker(
        storage, props, clock=clock, min_index_count_per_bucket=fed.sizes.min_index_count
    )


def _close(tracker: BucketDelayedDeliveryTracker) -> None:
    tracker.close()
    tracker.storage.close()


def _python_bytes(peak: bool = False) -> int:
    """Bytes tracemalloc traces now (or at its peak); 0 when it is not tracing."""
    return tracemalloc.get_traced_memory()[peak] if tracemalloc.is_tracing() else 0


@dataclass(frozen=True, slots=True)
class Memory:
    """Bytes a tracker added since the feed began: Rust heap (counting allocator) and Python (tracemalloc)."""

    rust: int
    python: int

    @staticmethod
    def since(rust_base: int, py_base: int, *, peak: bool = False) -> Memory:
        """The current (or peak) figures above the bases."""
        if not peak:
            gc.collect()
        rust = (_core.heap_peak() if peak else _core.heap_allocated()) - rust_base
        return Memory(rust, _python_bytes(peak) - py_base)


@dataclass(frozen=True, slots=True)
class FeedFigures:
    """What one feed measured (memory is Rust-only unless the feed was traced)."""

    fed: Fed
    seconds: float
    seals_ms: list[float]
    slowest_add_ms: float
    overlapped: int
    queued: int
    resident: Memory
    resident_idle: Memory
    flush_s: float
    peak: Memory
    buffer: int


def _feed(root: Path, smoke: bool, *, traced: bool) -> FeedFigures:
    """Feeds the bucket tracker ledger by ledger: seal latencies, adds during writes, memory.

    Each ledger's first message goes through ``add_message``: at a ledger boundary past the
    threshold it seals the tail, and its wall time is the seal latency. While that snapshot is being
    encoded and written on the worker, up to ``ADDS_DURING_WRITE`` of the ledger's next messages go
    one ``add_message`` each (the slowest is recorded); the rest of the ledger goes through one
    ``add_many``. ``traced`` adds the Python side of memory (tracemalloc), which slows every Python
    allocation about tenfold, the worker's too: that pass measures memory only and adds in bulk.
    """
    sizes = _bucket_sizes(smoke)
    wl = dw.bucket_feed_workload(sizes.ledgers, sizes.per_ledger)
    clock = ManualClock(dw.BUCKET_CLOCK_MS)
    seals: list[float] = []
    slowest, during = 0.0, 0
    gc.collect()
    if traced:
        tracemalloc.start()
    try:
        py_base = _python_bytes()
        _core.reset_heap_peak()
        rust_base = _core.heap_allocated()
        tracker = _open(Fed(root, sizes, wl, 0), clock)
        add = tracker.add_message
        t_start = time.perf_counter()
        for ledger, run in dw.ledger_runs(wl):
            ls, es, ats = wl.ledgers[run], wl.entries[run], wl.deliver_at[run]
            before = len(tracker.immutable_buckets)
            t0 = time.perf_counter()
            assert add(ledger, int(es[0]), int(ats[0]))
            seal = time.perf_counter() - t0
            i = 1
            buckets = tracker.immutable_buckets
            if len(buckets) > before:
                seals.append(seal)
                bucket = buckets[-1]
                stop = 1 if traced else min(len(es), 1 + ADDS_DURING_WRITE)
                el, al = es[:stop].tolist(), ats[:stop].tolist()
                while i < stop and not bucket.created:
                    t0 = time.perf_counter()
                    add(ledger, el[i], al[i])
                    slowest = max(slowest, time.perf_counter() - t0)
                    i += 1
                during += i - 1
            assert tracker.add_many(ls[i:], es[i:], ats[i:]).all()
        seconds = time.perf_counter() - t_start
        queued = sum(not b.created for b in tracker.immutable_buckets)
        resident = Memory.since(rust_base, py_base)
        buffer = tracker.buffer_memory_usage
        t0 = time.perf_counter()
        tracker.maintenance()
        flush_s = time.perf_counter() - t0
        resident_idle = Memory.since(rust_base, py_base)
        peak = Memory.since(rust_base, py_base, peak=True)
    finally:
        if traced:
            tracemalloc.stop()
    try:
        buckets = tracker.immutable_buckets
        assert tracker.number_of_delayed_messages == len(wl)
        assert len(seals) == sizes.ledgers - 1 == len(buckets) == tracker.counters().seals
        assert all(b.created and b.start_ledger_id == b.end_ledger_id for b in buckets)
        assert all(b.number_bucket_delayed_messages == sizes.per_ledger for b in buckets)
        last = int(wl.ledgers[-1])
        assert tracker.mutable_bucket_range == (last, last)
        assert len(list((root / "snapshots").glob("bucket-*.snap"))) == len(buckets)
        sealed = sum(b.number_bucket_delayed_messages for b in buckets)
    finally:
        _close(tracker)
    fed = Fed(root, sizes, wl, sealed)
    ms = [s * 1e3 for s in seals]
    return FeedFigures(
        fed, seconds, ms, slowest * 1e3, during, queued, resident, resident_idle, flush_s, peak, buffer
    )


def test_bucket_feed(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """10M delayed messages over 200 ledgers, PIP-195 defaults, snapshots in files: seals, memory, disk.

    Two feeds: a timed one (seals, adds, disk), then a traced one for the Python side of memory.
    """
    benchmark.group = "bucket tracker"
    timed = benchmark.pedantic(
        _feed, args=(tmp_path / "timed", smoke), kwargs={"traced": False}, rounds=1, warmup_rounds=0
    )
    FED[smoke] = fed = timed.fed
    traced = _feed(tmp_path / "traced", smoke, traced=True)
    snapshots = fed.root / "snapshots"
    on_disk = sum(p.stat().st_size for p in snapshots.glob("bucket-*.snap"))
    t = dw.BUCKET
    n = len(fed.wl)
    t.record(
        dw.BUCKET_ADD,
        CURSORKIT,
        n / timed.seconds / 1e6,
        f"({n:,} msgs, {len(timed.seals_ms)} seals)",
        lower=False,
    )
    # Memory: the Rust heap of the timed feed (tracemalloc slows the snapshot worker about tenfold, so
    # the traced feed queues more writes than a real one) plus the Python heap of the traced feed.
    seals = len(timed.seals_ms)
    last = timed.resident.rust + traced.resident.python
    note = (
        f"(Rust {timed.resident.rust / MB:.3g} MB with {timed.queued} of {seals} snapshot writes queued "
        f"+ Python {traced.resident.python / MB:.2g} MB; traced feed alone: "
        f"{(traced.resident.rust + traced.resident.python) / MB:.3g} MB, {traced.queued} queued)"
    )
    t.record(dw.BUCKET_MEM, CURSORKIT, last / MB, note)
    idle = timed.resident_idle.rust + traced.resident_idle.python
    t.record(dw.BUCKET_MEM_IDLE, CURSORKIT, idle / MB, f"(maintenance() waited {timed.flush_s:.2g} s)")
    peak = timed.peak.rust + traced.peak.python
    t.record(dw.BUCKET_PEAK, CURSORKIT, peak / MB, "(Rust peak + Python peak)")
    t.record(dw.BUCKET_BUFFER, CURSORKIT, timed.buffer / MB, "(queues + position index)")
    size = f"({fed.sizes.per_ledger:,}-index buckets)"
    t.record(dw.SEAL_P50, CURSORKIT, dw.percentile(timed.seals_ms, 0.5), size)
    t.record(dw.SEAL_MAX, CURSORKIT, max(timed.seals_ms))
    t.record(dw.ADD_DURING_WRITE, CURSORKIT, timed.slowest_add_ms, f"({timed.overlapped:,} adds timed)")
    t.record(dw.SNAPSHOT_BYTES, CURSORKIT, on_disk / fed.sealed, f"({on_disk / MB:,.1f} MB, fsync'd files)")


def test_bucket_in_memory_peer(benchmark: Any, smoke: bool) -> None:
    """The same feed in cursorkit's in-memory tracker (one ``add_many``): the memory the buckets save."""
    sizes = _bucket_sizes(smoke)
    wl = dw.bucket_feed_workload(sizes.ledgers, sizes.per_ledger)

    def build() -> tuple[Any, int]:
        with dw.RustHeap() as heap:
            t = InMemoryDelayedDeliveryTracker(clock=ManualClock(dw.BUCKET_CLOCK_MS))
            assert t.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
        return t, heap.delta

    benchmark.group = "bucket tracker"
    t, heap = benchmark.pedantic(build, rounds=1, warmup_rounds=0)
    assert t.number_of_delayed_messages == len(wl)
    dw.BUCKET.record(dw.BUCKET_MEM, dw.IN_MEMORY_10M, heap / MB, "(heap Δ)")


def test_bucket_recovery(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """A new tracker on the fed storage and properties; then everything drains in exact time order."""
    fed = FED.get(smoke) or _feed(tmp_path, smoke, traced=False).fed
    clock = ManualClock(dw.BUCKET_CLOCK_MS)
    opened: list[BucketDelayedDeliveryTracker] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        while opened:
            _close(opened.pop())
        return (), {}

    def recover() -> BucketDelayedDeliveryTracker:
        tracker = _open(fed, clock)
        opened.append(tracker)
        return tracker

    timer = rw.BestTimer(recover)
    benchmark.group = "bucket tracker"
    tracker = benchmark.pedantic(timer, setup=setup, rounds=5, warmup_rounds=0)
    try:
        report = tracker.recovery_report
        assert len(report.recovered) == fed.sizes.ledgers - 1
        assert report.messages_recovered == tracker.number_of_delayed_messages == fed.sealed
        assert not (report.damaged or report.missing or report.expired or report.stale)
        assert not report.orphans_deleted
        dw.BUCKET.record(dw.RECOVERY, CURSORKIT, timer.best, f"({len(report.recovered)} buckets)")
        clock.now = _past(fed.wl)
        t0 = time.perf_counter()
        batches = _drain(tracker.get_scheduled_messages, dw.DRAIN_BATCH)
        drain_s = time.perf_counter() - t0
        assert tracker.number_of_delayed_messages == 0
        # the mutable tail (the last ledger) is not persisted by default: a dispatcher replays it
        dw.check_drain(batches, fed.wl, keep=fed.wl.ledgers != fed.wl.ledgers[-1])
        note = f"(batches of {dw.DRAIN_BATCH}, segments loaded from disk)"
        dw.BUCKET.record(dw.BUCKET_DRAIN, CURSORKIT, fed.sealed / drain_s / 1e6, note, lower=False)
    finally:
        setup()


# -------------------------------------------------------------------------------- shared index (10 subs)


def _subscriptions(impl: str, clock: ManualClock, count: int = SUBSCRIPTIONS) -> tuple[list[Any], Any]:
    """``count`` subscription trackers: views of one shared index, or independent trackers."""
    if impl == CURSORKIT:
        index = SharedDelayedIndex(InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS, clock=clock))
        return [index.subscription(f"sub-{i}") for i in range(count)], index
    return [InMemoryDelayedDeliveryTracker(tick_time_ms=TICK_MS, clock=clock) for _ in range(count)], None


def _memory(subs: list[Any], index: Any) -> int:
    return int(index.memory_usage()) if index is not None else sum(s.buffer_memory_usage for s in subs)


@pytest.mark.parametrize("impl", [CURSORKIT, dw.INDEPENDENT])
def test_shared_index(benchmark: Any, smoke: bool, impl: str) -> None:
    """W4 read by 10 subscriptions (each dispatcher adds every message): memory, adds, and delivery."""
    wl = _w4(smoke)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return _subscriptions(impl, ManualClock(dw.system_clock_ms())), {}

    def run(subs: list[Any], index: Any) -> Any:
        for s in subs:
            assert s.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
        return subs, index

    timer = rw.BestTimer(run)
    benchmark.group = "shared delayed index"
    benchmark.pedantic(timer, setup=setup, rounds=3, warmup_rounds=0)
    dw.SHARED.record(dw.SHARED_ADD, impl, SUBSCRIPTIONS * len(wl) / timer.best / 1e6, lower=False)

    clock = ManualClock(dw.system_clock_ms())
    with dw.RustHeap() as one_heap:
        one, one_index = _subscriptions(impl, clock, 1)
        assert one[0].add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
    with dw.RustHeap() as ten_heap:
        subs, index = _subscriptions(impl, clock)
        for s in subs:
            assert s.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
    single, ten = _memory(one, one_index), _memory(subs, index)
    assert all(s.number_of_delayed_messages == len(wl) for s in subs)
    assert abs(ten_heap.delta - ten) <= 0.25 * ten + 65_536, (ten, ten_heap.delta)
    ratio_note = f"(heap Δ ×{ten_heap.delta / one_heap.delta:.3g})"
    dw.SHARED.record(dw.SHARED_RATIO, impl, ten / single, ratio_note)
    dw.SHARED.record(dw.SHARED_MEM, impl, ten / MB, f"(1 subscription: {single / MB:.3g} MB)")

    clock.now = _past(wl)
    expected = np.sort(wl.ledgers * (2**32) + wl.entries)
    t0 = time.perf_counter()
    got = [np.concatenate(_drain(s.get_scheduled_messages, SHARED_DRAIN_BATCH)) for s in subs]
    drain_s = time.perf_counter() - t0
    for rows in got:  # every subscription receives every message exactly once
        assert np.array_equal(np.sort(rows[:, 0] * (2**32) + rows[:, 1]), expected)
    assert all(s.number_of_delayed_messages == 0 for s in subs)
    note = f"(batches of {SHARED_DRAIN_BATCH:,})"
    dw.SHARED.record(dw.SHARED_DRAIN, impl, SUBSCRIPTIONS * len(wl) / drain_s / 1e6, note, lower=False)

    # a dispatcher's read size: one subscription drains in batches of 100 while the others wait
    del subs, index, got
    subs, index = _subscriptions(impl, clock, SUBSCRIPTIONS if impl == CURSORKIT else 1)
    clock.now = dw.system_clock_ms()
    for s in subs:
        assert s.add_many(wl.ledgers, wl.entries, wl.deliver_at).all()
    clock.now = _past(wl)
    t0 = time.perf_counter()
    batches = _drain(subs[0].get_scheduled_messages, dw.DRAIN_BATCH)
    drain_s = time.perf_counter() - t0
    assert sum(map(len, batches)) == len(wl) and subs[0].number_of_delayed_messages == 0
    dw.SHARED.record(dw.SHARED_DRAIN_100, impl, len(wl) / drain_s / 1e6, lower=False)
