"""Concurrent use of one RangeSet from many threads ends in exactly the expected state."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cursorkit import RangeSet
from rangeset_model import ModelRangeSet

THREADS = 8


def run_together(work: Callable[[int], int], threads: int = THREADS) -> list[int]:
    """Run work(i) on `threads` threads released at once by a barrier; re-raise any failure."""
    barrier = threading.Barrier(threads)

    def start(i: int) -> int:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(start, range(threads)))


def assert_matches(rs: RangeSet, model: ModelRangeSet) -> None:
    """Same ranges, count and cardinality as the model."""
    assert str(rs) == str(model)
    assert len(rs) == len(model)
    assert rs.total_cardinality() == model.total_cardinality()
    assert rs.ledgers() == model.ledger_ids()


def test_disjoint_ledgers() -> None:
    """Each thread fills its own ledger with add_many chunks and single adds, checking as it goes."""
    rs = RangeSet()

    def work(t: int) -> int:
        rng = np.random.default_rng(t)
        entries = rng.permutation(20_000).astype(np.int64)
        added = 0
        for chunk in np.array_split(entries[:15_000], 30):
            added += rs.add_many(np.full(len(chunk), t, dtype=np.int64), chunk)
            assert rs.contains_many(np.full(len(chunk), t, dtype=np.int64), chunk).all()
        for entry in entries[15_000:].tolist():
            added += rs.add(t, entry)
            assert rs.contains(t, entry)
        return added

    assert run_together(work) == [20_000] * THREADS
    expected = RangeSet()
    for t in range(THREADS):
        expected.add_open_closed(t, -1, t, 19_999)
    assert rs == expected
    assert len(rs) == THREADS
    assert rs.total_cardinality() == 20_000 * THREADS


def test_overlapping_positions_are_counted_once() -> None:
    """Threads adding overlapping positions: every position is reported new by exactly one add."""
    rs = RangeSet()
    per_thread: list[set[tuple[int, int]]] = []
    for t in range(THREADS):
        rng = np.random.default_rng(100 + t)
        ledgers = rng.integers(0, 4, size=6_000)
        entries = rng.integers(0, 3_000, size=6_000)
        per_thread.append(set(zip(ledgers.tolist(), entries.tolist(), strict=True)))

    def work(t: int) -> int:
        pairs = sorted(per_thread[t], key=lambda p: hash((t, p)))
        half = len(pairs) // 2
        ledgers = np.array([p[0] for p in pairs[:half]], dtype=np.int64)
        entries = np.array([p[1] for p in pairs[:half]], dtype=np.int64)
        added = 0
        for i in range(0, half, 500):
            added += rs.add_many(ledgers[i : i + 500], entries[i : i + 500])
        for ledger, entry in pairs[half:]:
            added += rs.add(ledger, entry)
            assert rs.contains(ledger, entry)
        return added

    counts = run_together(work)
    union = set().union(*per_thread)
    assert sum(counts) == len(union)
    assert_matches(rs, ModelRangeSet.from_positions(union))


def test_writers_and_readers() -> None:
    """Readers see a consistent set while writers add; the final state is exact."""
    rs = RangeSet()
    writers = THREADS // 2
    stop = threading.Event()
    done = threading.Barrier(writers, action=stop.set)

    def work(t: int) -> int:
        if t < writers:
            entries = np.arange(t, 40_000, writers, dtype=np.int64)
            for chunk in np.array_split(entries, 40):
                rs.add_many(np.zeros(len(chunk), dtype=np.int64), chunk)
            done.wait()
            return 0
        reads = 0
        while not stop.is_set():
            probe = np.arange(0, 40_000, 97, dtype=np.int64)
            hits = rs.contains_many(np.zeros(len(probe), dtype=np.int64), probe)
            assert hits.dtype == np.bool_
            n = len(rs)
            assert n >= 0
            assert rs.total_cardinality() <= 40_000
            text = str(rs)
            assert text.startswith("[")
            assert text.endswith("]")
            rows = rs.ranges_array()
            assert rows.shape[1] == 4
            if len(rows):
                assert (rows[:, 1] < rows[:, 3]).all()
            reads += 1
        return reads

    run_together(work)
    assert str(rs) == "[(0:-1..0:39999]]"
    assert len(rs) == 1


def test_concurrent_removes_and_adds_on_disjoint_ranges() -> None:
    """Threads add and remove interleaved stripes of one ledger; the result matches the model."""
    rs = RangeSet()
    rs.add_open_closed(0, -1, 0, 79_999)

    def work(t: int) -> int:
        base = t * 10_000
        for e in range(base, base + 10_000, 3):
            rs.remove(0, e)
        rs.add_many(np.full(100, 1, dtype=np.int64), np.arange(t * 100, t * 100 + 100))
        rs.remove_open_closed(0, base + 5_000, 0, base + 5_100)
        return 0

    run_together(work)
    expected = {(0, e) for e in range(80_000)} | {(1, e) for e in range(THREADS * 100)}
    for t in range(THREADS):
        base = t * 10_000
        expected -= {(0, e) for e in range(base, base + 10_000, 3)}
        expected -= {(0, e) for e in range(base + 5_001, base + 5_101)}
    model = ModelRangeSet.from_positions(expected)
    assert_matches(rs, model)
    assert rs.ranges_array().tolist() == [list(r) for r in model.ranges()]
