"""Measure every RangeSet workload without pytest and print the markdown table (docs/benchmarks.md's figures).

    python benches/report_rangeset.py            # full sizes, best of 3-5 runs (perf_counter)
    python benches/report_rangeset.py --smoke    # the shrunken sizes of the pytest smoke run

Each figure is the best of up to 5 runs (fewer once a case has spent ~6 s), each run on a fresh structure;
cursorkit and pyroaring repeat the whole timing pass ``--passes`` times (best kept) to ride out load.
A second table splits cursorkit's own costs (input conversion, sorting, call overhead, encodings) to show
which call dominates. Build the extension with ``maturin develop --release`` first: a debug build is
an order of magnitude slower.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import deque
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
# numpy's OpenBLAS worker threads spin on the second core of a 2-core machine; no benchmark uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import rangeset_workloads as rw  # noqa: E402
from cursorkit.bench.data import W1_LEDGER  # noqa: E402
from rangeset_workloads import CURSORKIT, FULL, KB, PYROARING  # noqa: E402

WORKLOADS = ("W1", "W2", "W3")


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def add_reps(impl: str, driver: str, name: str) -> int:
    if impl in (CURSORKIT, PYROARING):
        return 5
    if impl == rw.SORTED:
        return 2 if name == "W3" else 3
    return 3 if driver == "bulk" or name == "W1" else 1


def run_adds(sizes: rw.Sizes, impls: set[str]) -> None:
    for impl, driver in rw.add_cases():
        if impl not in impls:
            continue
        peer = rw.IMPLS[impl]
        for name in WORKLOADS:
            wl = rw.workload(name, sizes.add(impl, name, driver))
            inp = peer.add_input(wl, driver)
            last: list[Any] = []

            def setup(peer: rw.Impl = peer, last: list[Any] = last) -> tuple[Any, ...]:
                last[:] = [peer.new()]
                return (last[0],)

            def fn(s: Any, peer: rw.Impl = peer, inp: Any = inp, driver: str = driver) -> None:
                peer.add(s, inp, driver)

            best = rw.best_of(fn, setup, reps=add_reps(impl, driver, name))
            assert peer.n_ranges(last[0]) == rw.expected_ranges(name, wl.n), (impl, driver, name)
            rw.record_rate(f"{name} add {driver}", impl, len(wl), best, n=wl.n)
            progress(f"{name} add {impl} {driver}: {len(wl) / best / 1e6:.3g} M/s")


def run_contains(sizes: rw.Sizes, impls: set[str]) -> None:
    for impl, driver in rw.contains_cases():
        if impl not in impls:
            continue
        peer = rw.IMPLS[impl]
        n, count = sizes.contains(impl, driver)
        s = rw.built(impl, "W2", n)
        queries = rw.w2_queries(n, count)
        inp = peer.contains_input(queries, driver)
        reps = 5 if impl in (CURSORKIT, PYROARING, rw.SORTED) else 2
        best = rw.best_of(
            lambda peer=peer, s=s, inp=inp, driver=driver: peer.contains(s, inp, driver), tuple, reps
        )
        rw.record_rate(f"W2 contains {driver}", impl, count, best, n=n)
        progress(f"W2 contains {impl} {driver}: {count / best / 1e6:.3g} M/s")


def run_listing_and_encoding(sizes: rw.Sizes, impls: set[str]) -> None:
    for impl in rw.IMPLS:
        if impl not in impls:
            continue
        peer = rw.IMPLS[impl]
        n = sizes.structure(impl)
        runs = rw.expected_ranges("W2", n)
        s = rw.built(impl, "W2", n)
        listings: dict[str, Callable[[], Any]] = {"W2 ranges": lambda peer=peer, s=s: peer.ranges(s)}
        if impl == CURSORKIT:
            listings["W2 ranges_array"] = s.ranges_array
        elif impl == PYROARING:
            listings["W2 ranges_array"] = lambda s=s: rw.pyroaring_runs(s)
        for metric, fn in listings.items():
            assert len(fn()) == runs
            best = rw.best_of(fn, tuple, reps=5 if impl in (CURSORKIT, PYROARING) else 3)
            rw.record_time(metric, impl, best, n=n, items=runs)
        data = peer.encode(s)
        best = rw.best_of(lambda peer=peer, s=s: peer.encode(s), tuple, reps=5)
        how = {CURSORKIT: "", PYROARING: " (serialize)"}.get(impl, " (pickle)")
        rw.record("enc W2", impl, len(data) / KB, n=n, items=runs, note=how)
        rw.record_time("enc W2 time", impl, best, n=n, items=runs)
        if impl == CURSORKIT:
            assert rw.cursorkit.RangeSet.from_bytes(data) == s
            rw.measure_wire_sizes()
        progress(f"W2 listing and encoding {impl}")


def run_len() -> None:
    calls = 200_000
    for metric, name in (("len", "W2"), ("len W1", "W1")):
        s = rw.built(CURSORKIT, name, FULL)
        best = rw.best_of(lambda s=s: deque(map(len, repeat(s, calls)), 0), tuple, reps=5)
        rw.record(metric, CURSORKIT, best / calls * 1e9)


def run_memory(sizes: rw.Sizes, impls: set[str]) -> None:
    for impl in rw.IMPLS:
        if impl in impls:
            rw.measure_memory(impl, sizes)
            rw.measure_w3_peak(impl, sizes)
            progress(f"memory {impl}")


# ------------------------------------------------------------------------------------ cursorkit splits


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds / 1e6:.1f} M/s ({seconds * 1e3:.2f} ms)"


def cursorkit_splits() -> list[tuple[str, str]]:
    """Where cursorkit's time goes: one figure per variant of the same call."""
    ck = rw.cursorkit
    out: list[tuple[str, str]] = []

    def add_many(ledgers: Any, entries: Any, into: Callable[[], Any] = ck.RangeSet) -> float:
        return rw.best_of(lambda s: s.add_many(ledgers, entries), lambda: (into(),), reps=5)

    w1, w2, w3 = rw.workload("W1"), rw.workload("W2"), rw.workload("W3")
    out.append(("add_many W1, int64 numpy columns", _rate(len(w1), add_many(w1.ledgers, w1.entries))))
    out.append(
        (
            "add_many W1, int32 numpy columns (converted)",
            _rate(len(w1), add_many(w1.ledgers.astype(np.int32), w1.entries.astype(np.int32))),
        )
    )
    out.append(("add_many W1, Python lists", _rate(len(w1), add_many(w1.ledger_list, w1.entry_list))))
    out.append(("add_many W2, int64 numpy columns", _rate(len(w2), add_many(w2.ledgers, w2.entries))))
    out.append(("add_many W3, permuted (as benchmarked)", _rate(len(w3), add_many(w3.ledgers, w3.entries))))
    order = np.lexsort((w3.entries, w3.ledgers))
    sorted_l, sorted_e = w3.ledgers[order].copy(), w3.entries[order].copy()
    out.append(("add_many W3, same positions pre-sorted", _rate(len(w3), add_many(sorted_l, sorted_e))))
    t0 = time.perf_counter()
    np.lexsort((w3.entries, w3.ledgers))
    out.append(("numpy lexsort of W3 (for scale)", f"{(time.perf_counter() - t0) * 1e3:.2f} ms"))
    for name, wl in (("W1", w1), ("W2", w2)):
        full = rw.built(CURSORKIT, name, FULL)
        dup = rw.best_of(
            lambda s, wl=wl: s.add_many(wl.ledgers, wl.entries), lambda full=full: (full.copy(),)
        )
        out.append((f"add_many {name} again into a full copy (all duplicates)", _rate(len(wl), dup)))
    q = rw.w2_queries()
    s2 = rw.built(CURSORKIT, "W2", FULL)
    out.append(
        (
            "contains_many W2, random probes",
            _rate(len(q), rw.best_of(s2.contains_many, lambda: (q.ledgers, q.entries))),
        )
    )
    qs = np.sort(q.entries)
    out.append(
        (
            "contains_many W2, sorted probes",
            _rate(len(q), rw.best_of(s2.contains_many, lambda: (q.ledgers, qs))),
        )
    )
    s1 = rw.built(CURSORKIT, "W1", FULL)
    out.append(
        (
            "contains_many W1 (one run container), random probes",
            _rate(len(q), rw.best_of(s1.contains_many, lambda: (np.full(len(q), W1_LEDGER), q.entries))),
        )
    )
    probe: dict[int, int] = {}
    ls, es = w1.ledger_list, w1.entry_list
    floor = rw.best_of(lambda: deque(map(probe.get, ls, es), 0), tuple)
    out.append(("floor: deque(map({}.get, ls, es), 0)", _rate(len(ls), floor)))
    out.append(
        (
            "add W1 per call, deque(map), all duplicates",
            _rate(len(ls), rw.best_of(lambda s: deque(map(s.add, ls, es), 0), lambda: (s1.copy(),))),
        )
    )
    out.append(
        (
            "add W1 per call, deque(map), new entries",
            _rate(len(ls), rw.best_of(lambda s: deque(map(s.add, ls, es), 0), lambda: (ck.RangeSet(),))),
        )
    )
    out.append(
        (
            "contains W1 per call, deque(map)",
            _rate(len(ls), rw.best_of(lambda: deque(map(s1.contains, ls, es), 0), tuple)),
        )
    )
    out.append(
        (
            "Position(l, e) per call, deque(map) (object-creation scale)",
            _rate(len(ls), rw.best_of(lambda: deque(map(rw.cursorkit.Position, ls, es), 0), tuple)),
        )
    )
    for label, fn in (
        ("ranges_array() W2", s2.ranges_array),
        ("ranges() W2", s2.ranges),
        ("to_bytes() W2", s2.to_bytes),
        ("from_bytes() W2", lambda: ck.RangeSet.from_bytes(s2.to_bytes())),
        ("to_long_list_map() W2", s2.to_long_list_map),
        ("message_range_wire_size() W2", s2.message_range_wire_size),
        ("memory_usage() W2", s2.memory_usage),
        ("copy() W2", s2.copy),
        ("str() W2", lambda: str(s2)),
    ):
        out.append((label, f"{rw.best_of(fn, tuple) * 1e3:.3f} ms"))
    return out


def environment() -> list[str]:
    lines = [
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{_cpu_model()}, load average before the run {os.getloadavg()[0]:.2f}",
    ]
    if rw.cursorkit_available():
        so = Path(rw.ck_core.__file__)
        lines.append(
            f"cursorkit {rw.cursorkit.__version__}: {so.name} {so.stat().st_size / 1e6:.1f} MB, "
            f"built {time.strftime('%Y-%m-%d %H:%M', time.localtime(so.stat().st_mtime))}"
        )
    import portion
    import pyroaring
    import sortedcontainers

    lines.append(
        f"peers: pyroaring {pyroaring.__version__}, sortedcontainers {sortedcontainers.__version__}, "
        f"portion {portion.__version__}, python-ranges 1.2.x"
    )
    return lines


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="the shrunken sizes of the pytest smoke run")
    parser.add_argument(
        "--only", default=",".join(rw.IMPLS), help="comma-separated implementations (default: all)"
    )
    parser.add_argument("--no-splits", action="store_true", help="skip cursorkit's timing splits")
    parser.add_argument(
        "--passes", type=int, default=3, help="passes over cursorkit and pyroaring, best kept (default 3)"
    )
    args = parser.parse_args(argv)
    impls = set(args.only.split(","))
    if not rw.cursorkit_available():
        print("cursorkit._core is not built: cursorkit columns will read n/a", file=sys.stderr)
        impls.discard(CURSORKIT)
    sizes = rw.Sizes(smoke=args.smoke)
    env = environment()
    started = time.perf_counter()
    fast = impls & {CURSORKIT, PYROARING}
    for n_pass in range(args.passes):
        # The fast implementations run every pass (best kept): bursts of load from other processes on a
        # shared machine then spoil one pass, not the figure. The slow peers run once.
        group = impls if n_pass == 0 else fast
        run_adds(sizes, group)
        run_contains(sizes, group)
        run_listing_and_encoding(sizes, group)
    if CURSORKIT in impls:
        run_len()
    run_memory(sizes, impls)
    rw.NOTES.append(
        f"CPython 2-arg C call floor measured here: {rw.call_floor():.1f} M calls/s "
        "(`deque(map({}.get, ls, es), 0)`)."
    )
    splits = cursorkit_splits() if CURSORKIT in impls and not args.no_splits else []
    title = f"RangeSet: best of up to 5 runs x {args.passes} passes (peers: 1 pass)"
    title += " (SMOKE sizes)" if args.smoke else ""
    print("\n".join(f"<!-- {line} -->" for line in env))
    print(
        rw.render_table(
            title,
            [
                *rw.NOTES,
                f"Load average after the run: {os.getloadavg()[0]:.2f}; "
                f"total {time.perf_counter() - started:.0f} s.",
            ],
            judge=not args.smoke,
        )
    )
    if splits:
        print("\n### cursorkit timing splits (best of 5)\n\n| call | time |\n|---|---|")
        for label, value in splits:
            print(f"| {label} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
