"""Cursor and CursorStore benchmarks against issue 3's targets, with peers side by side.

``make bench`` measures (release build); under ``make test`` every body runs once, shrunk, as a smoke
test. The closing table (``conftest.py``) prints cursorkit, the target, PASS/MISS and each peer with
its ratio. Peers: a pyroaring-per-ledger cursor in Python (acks); Pulsar's whole-PositionInfo rewrite
per flush, in its MessageRange and LongListMap forms (persistence).
"""

from __future__ import annotations

import gc
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cursor_workloads as cw
import rangeset_workloads as rw
from cursor_workloads import CURSORKIT, KB, PULSAR_LLM, PULSAR_MR, PYROARING, TABLE, Holes
from cursorkit import Cursor, PersistLimits, Position
from cursorkit.ackstate.store import CursorStore

MILLION_20 = Holes(1_000_000, 20)
MILLION_200 = Holes(1_000_000, 200)
FLUSH_ONE = "flush, 1 dirty of 20 ledgers (1M holes)"
FLUSH_FULL = "flush, full (1M holes / 20 ledgers)"
KEPT = "ranges kept by Pulsar's defaults (of 500k)"
RATIO_ROW = "ack per call from ints, holes: cursorkit / pyroaring, interleaved"


def _scaled(h: Holes, smoke: bool) -> Holes:
    return Holes(h.holes // 20, h.ledgers) if smoke else h


@pytest.mark.parametrize("impl", [CURSORKIT, PYROARING])
@pytest.mark.parametrize("order", ["holes", "in order"])
def test_ack_per_call(benchmark: Any, smoke: bool, impl: str, order: str) -> None:
    """One ack call per position (positions prebuilt; the loop is ``deque(map(...))``)."""
    h = _scaled(MILLION_20, smoke)
    ls, es = h.columns()
    if order == "in order":
        es = np.tile(np.arange(h.per_ledger, dtype=np.int64), h.ledgers)
        ls = np.ones_like(es)
        es = np.arange(ls.size, dtype=np.int64)
    pairs = (ls.tolist(), es.tolist())  # both sides ack from two ints, as a broker's wire decoder gives them
    if impl == CURSORKIT:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (Cursor(Position(1, -1)).ack, pairs), {}
    else:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (cw.PyroaringCursor((1, -1)).ack, pairs), {}

    def run(ack: Any, ps: Any) -> None:
        deque(map(ack, *ps), 0)

    timer = rw.BestTimer(run)
    benchmark.group = f"ack per call ({order})"
    benchmark.pedantic(timer, setup=setup, rounds=3, warmup_rounds=0)
    metric = "ack per call, 1M holes / 20 ledgers" if order == "holes" else "ack per call, in order"
    TABLE.record(metric, impl, ls.size / timer.best / 1e6, lower=False)


def test_ack_per_call_ratio(benchmark: Any, smoke: bool) -> None:
    """``Cursor.ack(l, e)`` against the pyroaring cursor, rounds alternating so noise hits both."""
    h = _scaled(MILLION_20, smoke)
    ls, es = h.columns()
    pairs = (ls.tolist(), es.tolist())
    makers: dict[str, Any] = {
        CURSORKIT: lambda: Cursor(Position(1, -1)).ack,
        PYROARING: lambda: cw.PyroaringCursor((1, -1)).ack,
    }
    timers = {impl: rw.BestTimer(lambda ack: deque(map(ack, *pairs), 0)) for impl in makers}

    def alternate() -> None:
        for _ in range(1 if smoke else 5):
            for impl, timer in timers.items():
                ack = makers[impl]()
                gc.collect()
                timer(ack)

    benchmark.group = "ack per call (holes)"
    benchmark.pedantic(alternate, rounds=1, iterations=1)
    ratio = timers[PYROARING].best / timers[CURSORKIT].best
    TABLE.record(RATIO_ROW, CURSORKIT, ratio, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, PYROARING])
def test_ack_many(benchmark: Any, smoke: bool, impl: str) -> None:
    """Bulk acks of 1M alternating holes over 20 ledgers from int64 columns, shuffled."""
    h = _scaled(MILLION_20, smoke)
    ls, es = h.columns()
    perm = np.random.default_rng(3).permutation(ls.size)
    ls, es = ls[perm], es[perm]
    if impl == CURSORKIT:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (Cursor(Position(1, -1)),), {}

        def run(c: Any) -> Any:
            c.ack_many(ls, es)
            return c
    else:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (cw.PyroaringCursor((1, -1)),), {}

        def run(c: Any) -> Any:
            c.ack_many(ls, es)
            return c

    timer = rw.BestTimer(run)
    benchmark.group = "ack_many bulk"
    c = benchmark.pedantic(timer, setup=setup, rounds=5, warmup_rounds=1)
    if impl == CURSORKIT:
        assert c.non_contiguous_deleted_ranges == h.holes
    TABLE.record("ack_many bulk, 1M holes / 20 ledgers", impl, ls.size / timer.best / 1e6, lower=False)


def _store(tmp: Path, cursor: Cursor) -> CursorStore:
    store = CursorStore.create(tmp / "store", name=cursor.name)
    store.flush(cursor, full=True)
    return store


@pytest.mark.parametrize("dirty", [1, 10, 100])
def test_flush_grows_with_dirty_ledgers(benchmark: Any, smoke: bool, tmp_path: Path, dirty: int) -> None:
    """Incremental flush of a 1M-hole cursor over 200 ledgers after touching 1, 10 or 100 of them."""
    h = _scaled(MILLION_200, smoke)
    cursor = h.cursor()
    store = _store(tmp_path, cursor)
    step = iter(range(1, 10_000))

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        cw.touch_ledgers(cursor, dirty, next(step))
        return (cursor,), {}

    timer = rw.BestTimer(store.flush)
    benchmark.group = "flush vs dirty ledgers"
    result = benchmark.pedantic(timer, setup=setup, rounds=7, warmup_rounds=1)
    assert result.ledgers_written == dirty
    store.close()
    note = f"({result.bytes_written / KB:,.1f} KB written)"
    TABLE.record(f"flush, {dirty} dirty of 200 ledgers (1M holes)", CURSORKIT, timer.best * 1e3, note)


@pytest.mark.parametrize("mode", ["one dirty", "full", "recovery"])
def test_store_million_holes(benchmark: Any, smoke: bool, tmp_path: Path, mode: str) -> None:
    """1M holes over 20 ledgers: incremental flush (one dirty ledger), full flush, recovery."""
    h = _scaled(MILLION_20, smoke)
    cursor = h.cursor()
    store = _store(tmp_path, cursor)
    step = iter(range(1, 10_000))
    if mode == "recovery":
        store.close()

        def recover() -> Cursor:
            s = CursorStore.open(tmp_path / "store")
            try:
                return s.recover(limits=cw.UNLIMITED)
            finally:
                s.close()

        timer = rw.BestTimer(recover)
        benchmark.group = "store 1M holes"
        got = benchmark.pedantic(timer, rounds=7, warmup_rounds=1)
        assert got.individually_deleted == cursor.individually_deleted
        TABLE.record("recovery (1M holes / 20 ledgers)", CURSORKIT, timer.best * 1e3)
        return

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        cw.touch_ledgers(cursor, 1, next(step))
        return (cursor,), ({"full": True} if mode == "full" else {})

    timer = rw.BestTimer(store.flush)
    benchmark.group = "store 1M holes"
    result = benchmark.pedantic(timer, setup=setup, rounds=7, warmup_rounds=1)
    store.close()
    metric = FLUSH_ONE if mode == "one dirty" else FLUSH_FULL
    TABLE.record(metric, CURSORKIT, timer.best * 1e3, f"({result.bytes_written / KB:,.1f} KB written)")


@pytest.mark.parametrize(("impl", "encoding"), [(PULSAR_MR, "message_range"), (PULSAR_LLM, "long_list_map")])
def test_pulsar_rewrite_flush(benchmark: Any, smoke: bool, tmp_path: Path, impl: str, encoding: str) -> None:
    """Pulsar's flush: the whole PositionInfo, every time (no range limit here: all 1M holes kept)."""
    h = _scaled(MILLION_20, smoke)
    cursor = h.cursor()
    path = tmp_path / "position-info"

    def run() -> int:
        data = cursor.encode(encoding)
        cw.write_fsync(path, data)
        return len(data)

    timer = rw.BestTimer(run)
    benchmark.group = "store 1M holes"
    size = benchmark.pedantic(timer, rounds=3, warmup_rounds=0)
    for metric in (FLUSH_ONE, FLUSH_FULL):
        TABLE.record(metric, impl, timer.best * 1e3, f"({size / KB:,.0f} KB written)")


def test_persisted_sizes(benchmark: Any) -> None:
    """500,000 alternating holes (one ledger of 1M entries): bytes of each form, and Pulsar's cut."""
    h = Holes(500_000, 1)
    cursor = h.cursor()
    compact = benchmark.pedantic(lambda: cursor.encode("compact"), rounds=3)
    assert len(compact) <= 150 * KB
    TABLE.record("persisted bytes, 500k alternating holes", CURSORKIT, len(compact) / KB, "(compact)")
    for impl, encoding in ((PULSAR_MR, "message_range"), (PULSAR_LLM, "long_list_map")):
        full = cursor.persist(encoding)
        TABLE.record("persisted bytes, 500k alternating holes", impl, full.size / KB, "(all ranges)")
        quirks = encoding == "long_list_map"  # Pulsar's toRanges counts entries, keeps the first ledger
        pulsar = Cursor.decode(full.data, encoding, limits=PersistLimits(), pulsar_quirks=quirks)
        kept = pulsar.persist(encoding)
        TABLE.record(
            KEPT,
            impl,
            kept.ranges_written,
            f"({kept.size / KB:,.0f} KB)",
            lower=False,
        )
    TABLE.record(KEPT, CURSORKIT, h.holes, "(compact, all)", lower=False)
