"""RangeSet benchmarks: cursorkit beside pyroaring, sortedcontainers, portion and python-ranges (issue 2).

``make bench`` (``pytest benches --benchmark-enable --benchmark-only -s``) measures; with
``--benchmark-disable`` (``make test``) every body runs once as a smoke test with the slow peers shrunk.
The closing table (``conftest.py``) puts cursorkit beside each peer with ratios and PASS/MISS against the
issue's targets. Workloads and peers live in ``rangeset_workloads.py``; ``report_rangeset.py`` prints the
same table without pytest.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any

import numpy as np
import pytest

import rangeset_workloads as rw
from rangeset_workloads import CURSORKIT, FULL, KB, PYROARING, SORTED

WORKLOADS = ("W1", "W2", "W3")
ADD_CASES = rw.add_cases()
CONTAINS_CASES = rw.contains_cases()
LIST_CASES = [
    (CURSORKIT, "array"),
    (CURSORKIT, "tuples"),
    (PYROARING, "array"),
    (PYROARING, "tuples"),
    (SORTED, "tuples"),
    (rw.PORTION, "tuples"),
    (rw.PYRANGES, "tuples"),
]


def _case_ids(cases: list[tuple[str, str]]) -> list[str]:
    return [f"{impl}-{driver}" for impl, driver in cases]


def _needs(impl: str) -> None:
    if impl == CURSORKIT and not rw.cursorkit_available():
        pytest.fail("cursorkit._core is not built: `make test` builds it first")


def _rounds(impl: str, driver: str, name: str = "W2") -> tuple[int, int]:
    """(rounds, warmup rounds) so that every benchmark stays within a few seconds."""
    if impl in (CURSORKIT, PYROARING):
        return (15, 2) if driver == "bulk" else (5, 1)
    if impl == SORTED:
        return (1, 0) if name == "W3" else (3, 0)
    return (5, 1) if driver == "bulk" or name == "W1" else (1, 0)


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize(("impl", "driver"), ADD_CASES, ids=_case_ids(ADD_CASES))
def test_add(benchmark: Any, sizes: rw.Sizes, name: str, impl: str, driver: str) -> None:
    """Add a whole workload to a fresh structure each round."""
    _needs(impl)
    peer = rw.IMPLS[impl]
    wl = rw.workload(name, sizes.add(impl, name, driver))
    inp = peer.add_input(wl, driver)

    def target(s: Any) -> Any:
        peer.add(s, inp, driver)
        return s

    timer = rw.BestTimer(target)
    benchmark.group = f"{name} add"
    benchmark.extra_info.update(positions=len(wl), size=wl.n, driver=rw.DRIVER_TEXT[driver])
    rounds, warmup = _rounds(impl, driver, name)
    s = benchmark.pedantic(timer, setup=lambda: ((peer.new(),), {}), rounds=rounds, warmup_rounds=warmup)
    assert peer.n_ranges(s) == rw.expected_ranges(name, wl.n)
    rw.record_rate(f"{name} add {driver}", impl, len(wl), timer.best, n=wl.n)


@pytest.mark.parametrize(("impl", "driver"), CONTAINS_CASES, ids=_case_ids(CONTAINS_CASES))
def test_w2_contains(benchmark: Any, sizes: rw.Sizes, impl: str, driver: str) -> None:
    """Probe W2 with seeded uniform random positions (half of them hit)."""
    _needs(impl)
    peer = rw.IMPLS[impl]
    n, count = sizes.contains(impl, driver)
    s = rw.built(impl, "W2", n)
    queries = rw.w2_queries(n, count)
    inp = peer.contains_input(queries, driver)
    timer = rw.BestTimer(peer.contains)
    benchmark.group = "W2 contains"
    benchmark.extra_info.update(probes=count, size=n, driver=rw.DRIVER_TEXT[driver])
    rounds, warmup = _rounds(impl, driver)
    result = benchmark.pedantic(timer, args=(s, inp, driver), rounds=rounds, warmup_rounds=warmup)
    if driver == "bulk":
        hits = int(np.count_nonzero(result))
    elif driver == "for":
        hits = result
    else:  # the deque(map) driver discards its results; count them once, untimed
        hits = peer.contains(s, peer.contains_input(queries, "for"), "for")
    assert hits == rw.expected_hits(queries)
    rw.record_rate(f"W2 contains {driver}", impl, count, timer.best, n=n)


@pytest.mark.parametrize(("impl", "form"), LIST_CASES, ids=_case_ids(LIST_CASES))
def test_w2_list_ranges(benchmark: Any, sizes: rw.Sizes, impl: str, form: str) -> None:
    """List every W2 range: as an (n, 4) / (n, 3) int array, or as one Python object per range."""
    _needs(impl)
    peer = rw.IMPLS[impl]
    n = sizes.structure(impl)
    s = rw.built(impl, "W2", n)
    if impl == CURSORKIT:
        fn = s.ranges_array if form == "array" else s.ranges
    elif form == "array":
        fn = lambda: rw.pyroaring_runs(s)  # noqa: E731
    else:
        fn = lambda: peer.ranges(s)  # noqa: E731
    timer = rw.BestTimer(fn)
    benchmark.group = "W2 list ranges"
    rounds = 15 if impl in (CURSORKIT, PYROARING) else 3
    listed = benchmark.pedantic(timer, rounds=rounds, warmup_rounds=1)
    runs = rw.expected_ranges("W2", n)
    assert len(listed) == runs
    metric = "W2 ranges_array" if form == "array" else "W2 ranges"
    rw.record(metric, impl, timer.best * 1e3, n=n, items=runs)


@pytest.mark.parametrize("impl", list(rw.IMPLS))
def test_w2_encode(benchmark: Any, sizes: rw.Sizes, impl: str) -> None:
    """Persist W2: cursorkit ``to_bytes``, pyroaring ``serialize``, pickle for the Python peers."""
    _needs(impl)
    peer = rw.IMPLS[impl]
    n = sizes.structure(impl)
    s = rw.built(impl, "W2", n)
    timer = rw.BestTimer(peer.encode)
    benchmark.group = "W2 encode"
    rounds = 15 if impl in (CURSORKIT, PYROARING) else 3
    data = benchmark.pedantic(timer, args=(s,), rounds=rounds, warmup_rounds=1)
    runs = rw.expected_ranges("W2", n)
    how = {CURSORKIT: "", PYROARING: " (serialize)"}.get(impl, " (pickle)")
    rw.record("enc W2", impl, len(data) / KB, n=n, items=runs, note=how)
    rw.record("enc W2 time", impl, timer.best * 1e3, n=n, items=runs)
    if impl == CURSORKIT:
        assert rw.cursorkit.RangeSet.from_bytes(data) == s
        rw.measure_wire_sizes()


def test_len_is_constant_time(benchmark: Any) -> None:
    """``len()`` on 500,000 ranges costs what it costs on one range."""
    _needs(CURSORKIT)
    calls = 100_000
    big, small = rw.built(CURSORKIT, "W2", FULL), rw.built(CURSORKIT, "W1", FULL)
    small_time = rw.best_of(lambda: deque(map(len, repeat(small, calls)), 0), tuple)
    timer = rw.BestTimer(lambda: deque(map(len, repeat(big, calls)), 0))
    benchmark.group = "len"
    benchmark.pedantic(timer, rounds=10, warmup_rounds=1)
    assert len(big) == rw.expected_ranges("W2", FULL)
    rw.record("len", CURSORKIT, timer.best / calls * 1e9)
    rw.record("len W1", CURSORKIT, small_time / calls * 1e9)


def test_call_floor(benchmark: Any) -> None:
    """This machine's CPython floor for a 2-argument C call, the ceiling of any per-call API."""
    wl = rw.workload("W2")
    probe: dict[int, int] = {}
    timer = rw.BestTimer(lambda: deque(map(probe.get, wl.ledger_list, wl.entry_list), 0))
    benchmark.group = "floor"
    benchmark.pedantic(timer, rounds=5, warmup_rounds=1)
    rw.NOTES.append(
        f"CPython 2-arg C call floor measured here: {len(wl) / timer.best / 1e6:.1f} M calls/s "
        "(`deque(map({}.get, ls, es), 0)`)."
    )


# The memory tests take the benchmark fixture so that ``--benchmark-only`` (``make bench``) keeps them; the
# benchmarked call is one accounted build (rounds=1), its time is not a rate and is not reported.


@pytest.mark.parametrize("impl", list(rw.IMPLS))
def test_memory(benchmark: Any, sizes: rw.Sizes, impl: str) -> None:
    """Resident bytes of W1 and W2 (cursorkit: Rust heap delta; pyroaring: serialized-size proxy)."""
    _needs(impl)
    benchmark.group = "memory (one accounted build; time is not a rate)"
    benchmark.pedantic(rw.measure_memory, args=(impl, sizes), rounds=1)


@pytest.mark.parametrize("impl", list(rw.IMPLS))
def test_w3_peak_memory(benchmark: Any, sizes: rw.Sizes, impl: str) -> None:
    """Resident bytes while W3 is added in chunks, at the peak range count."""
    _needs(impl)
    benchmark.group = "memory (one accounted build; time is not a rate)"
    peak_ranges, peak_bytes = benchmark.pedantic(rw.measure_w3_peak, args=(impl, sizes), rounds=1)
    assert peak_bytes > 0
    if impl == CURSORKIT:
        assert peak_ranges > rw.W3_LEDGERS
