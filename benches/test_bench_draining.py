"""PIP-379 state benchmarks (issue 5 §3, §6): draining-hash memory, gate and reference counting.

``make bench`` measures (release build); under ``make test`` every body runs once, shrunk, as a smoke
test, and checks its results against the peer. Workloads:

* Draining: 10,000 distinct random hashes (and all 65,535) registered over 100 consumers with 1–3
  references each, as a join registers a moved consumer's pending acks. The gate is probed with
  1,000,000 ``(target, hash)`` pairs, hashes uniform over 1..65535 (about 15% draining) and targets
  uniform over the 100 consumers.

The peer is what a Python dispatcher would write: a ``dict`` of ``hash -> [owner, refs, blocked]``
with the same rules. Memory: cursorkit's ``memory_usage()`` (asserted equal to the Rust heap it
holds), the peer's by tracemalloc. The closing table is printed by ``conftest.py``
from this module's ``TABLE``.
"""

from __future__ import annotations

from collections import deque
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import cursor_workloads as cw
import delayed_workloads as dw
import rangeset_workloads as rw
from cursorkit._core import DrainingHashes

I64 = npt.NDArray[np.int64]

SEED = 20_250_379
CONSUMERS = 100
DRAINING_N = 10_000
ALL_HASHES = 65_535
PROBES = 1_000_000
SMOKE_PROBES = 50_000

CURSORKIT = "cursorkit"
DICT = "dict-based (Python)"

MEM_10K = "memory per draining hash, 10,000 hashes"
MEM_ALL = "memory per draining hash, all 65,535"
GATE_BULK = "should_block_many, 1M probes (10k draining, 100 consumers)"
GATE_CALL = "should_block per call, deque(map(...))"
REGISTER = "add_entries + reduce_refs (join, then every ack), refs"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(MEM_10K, "B", False, 16.0),
        cw.Row(MEM_ALL, "B", False, 16.0),
        cw.Row(GATE_BULK, "M/s", True, None),
        cw.Row(GATE_CALL, "M/s", True, None),
        cw.Row(REGISTER, "M/s", True, None),
    ],
    peers=(DICT,),
    refs={"ref: Pulsar 4 (research §1b)": {MEM_10K: (80.0, "(≈)"), MEM_ALL: (80.0, "(≈)")}},
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Key_Shared PIP-379 state: draining hashes - {mode}", judge=not smoke)


# ------------------------------------------------------------------------------------------ workloads


@cache
def draining_rows(n: int) -> tuple[I64, I64]:
    """``(owners, hashes)`` registering ``n`` distinct hashes over the consumers, 1–3 refs each."""
    rng = np.random.default_rng(SEED)
    hashes = rng.permutation(np.arange(1, ALL_HASHES + 1, dtype=np.int64))[:n]
    refs = rng.integers(1, 4, n)
    owners = rng.integers(0, CONSUMERS, n)
    return np.repeat(owners, refs), np.repeat(hashes, refs)


@cache
def probes(n: int) -> tuple[I64, I64]:
    """``n`` gate probes: ``(targets, hashes)``."""
    rng = np.random.default_rng(SEED + 1)
    return rng.integers(0, CONSUMERS, n), rng.integers(1, ALL_HASHES + 1, n)


def build_draining(owners: I64, hashes: I64) -> DrainingHashes:
    """A tracker holding the rows, one ``add_entries`` per consumer."""
    d = DrainingHashes()
    order = np.argsort(owners, kind="stable")
    owners, hashes = owners[order], hashes[order]
    cuts = np.flatnonzero(np.diff(owners)) + 1
    for chunk_o, chunk_h in zip(np.split(owners, cuts), np.split(hashes, cuts), strict=True):
        d.add_entries(int(chunk_o[0]), chunk_h)
    return d


class DictDraining:
    """The peer: ``hash -> [owner, refs, blocked]`` with PIP-379's rules."""

    def __init__(self) -> None:
        """Empty."""
        self.entries: dict[int, list[int]] = {}

    def add_entry(self, consumer: int, h: int) -> None:
        """Create or add a reference; another owner is an error."""
        e = self.entries.get(h)
        if e is None:
            self.entries[h] = [consumer, 1, 0]
        elif e[0] != consumer:
            raise ValueError(f"hash {h} drains on {e[0]}")
        else:
            e[1] += 1

    def reduce_ref(self, consumer: int, h: int) -> bool:
        """Drop a reference; True when the entry went and had blocked."""
        e = self.entries.get(h)
        if e is None or e[0] != consumer:
            return False
        e[1] -= 1
        if e[1]:
            return False
        del self.entries[h]
        return e[2] > 0

    def should_block(self, target: int, h: int) -> bool:
        """The gate."""
        e = self.entries.get(h)
        if e is None:
            return False
        if e[0] == target:
            del self.entries[h]
            return False
        e[2] += 1
        return True


def build_dict_draining(owners: list[int], hashes: list[int]) -> DictDraining:
    """The peer holding the rows (Python ints)."""
    d = DictDraining()
    for c, h in zip(owners, hashes, strict=True):
        d.add_entry(c, h)
    return d


# ----------------------------------------------------------------------------------------- draining


@pytest.mark.parametrize("impl", [CURSORKIT, DICT])
@pytest.mark.parametrize("n", [DRAINING_N, ALL_HASHES], ids=["10k", "65535"])
def test_draining_memory(benchmark: Any, impl: str, n: int) -> None:
    """Bytes per draining hash: ``memory_usage()``, checked equal to the Rust heap; peer by tracemalloc."""
    owners, hashes = draining_rows(n)
    metric = MEM_10K if n == DRAINING_N else MEM_ALL
    benchmark.group = "draining memory"
    if impl == CURSORKIT:
        # Once, outside the count: the type and error machinery, and what a call of this size
        # initialises once (the bulk path's lazily made state).
        build_draining(owners, hashes)

        def build() -> tuple[DrainingHashes, int]:
            with dw.RustHeap() as heap:
                d = build_draining(owners, hashes)
            return d, heap.delta

        d, heap = benchmark.pedantic(build, rounds=1, warmup_rounds=0)
        assert len(d) == n
        assert heap == d.memory_usage(), (heap, d.memory_usage())
        TABLE.record(metric, impl, d.memory_usage() / n)
        return

    def build_peer() -> int:
        used, d = dw.traced_bytes(lambda: build_dict_draining(owners.tolist(), hashes.tolist()))
        assert len(d.entries) == n
        return used

    used = benchmark.pedantic(build_peer, rounds=1, warmup_rounds=0)
    TABLE.record(metric, impl, used / n, "(tracemalloc)")


@pytest.mark.parametrize("impl", [CURSORKIT, DICT])
def test_should_block_many(benchmark: Any, smoke: bool, impl: str) -> None:
    """The gate over 1M probes; the tracker is rebuilt for each round (probes reclaim hashes)."""
    owners, hashes = draining_rows(DRAINING_N)
    targets, probe = probes(SMOKE_PROBES if smoke else PROBES)
    if impl == CURSORKIT:

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (build_draining(owners, hashes),), {}

        def run(d: Any) -> Any:
            return d, d.should_block_many(targets, probe)
    else:
        ts, ps = targets.tolist(), probe.tolist()
        ol, hl = owners.tolist(), hashes.tolist()

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (build_dict_draining(ol, hl),), {}

        def run(d: Any) -> Any:
            return d, list(map(d.should_block, ts, ps))

    timer = rw.BestTimer(run)
    benchmark.group = "draining gate bulk"
    d, blocked = benchmark.pedantic(timer, setup=setup, rounds=5 if impl == CURSORKIT else 3, warmup_rounds=0)
    expected = build_dict_draining(owners.tolist(), hashes.tolist())
    assert list(blocked) == list(map(expected.should_block, targets.tolist(), probe.tolist()))
    assert 0.05 < float(np.mean(blocked)) < 0.3
    if impl == CURSORKIT:
        assert len(d) == len(expected.entries)
    TABLE.record(GATE_BULK, impl, len(probe) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, DICT])
def test_should_block_per_call(benchmark: Any, smoke: bool, impl: str) -> None:
    """One gate call per probe from Python int lists."""
    owners, hashes = draining_rows(DRAINING_N)
    targets, probe = probes(SMOKE_PROBES if smoke else PROBES)
    ts, ps = targets.tolist(), probe.tolist()
    build = build_draining if impl == CURSORKIT else build_dict_draining
    args = (owners, hashes) if impl == CURSORKIT else (owners.tolist(), hashes.tolist())

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (build(*args),), {}

    def run(d: Any) -> Any:
        deque(map(d.should_block, ts, ps), 0)
        return d

    timer = rw.BestTimer(run)
    benchmark.group = "draining gate per call"
    d = benchmark.pedantic(timer, setup=setup, rounds=3, warmup_rounds=0)
    assert len(d.entries if impl == DICT else d) < DRAINING_N
    TABLE.record(GATE_CALL, impl, len(ps) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("impl", [CURSORKIT, DICT])
def test_register_and_ack(benchmark: Any, impl: str) -> None:
    """A join registers every moved pending ack (``add_entries``), then each ack drops one ref."""
    owners, hashes = draining_rows(DRAINING_N)
    order = np.argsort(owners, kind="stable")
    owners, hashes = owners[order], hashes[order]
    cuts = np.flatnonzero(np.diff(owners)) + 1
    groups = [(int(o[0]), h) for o, h in zip(np.split(owners, cuts), np.split(hashes, cuts), strict=True)]
    if impl == CURSORKIT:

        def run() -> Any:
            d = DrainingHashes()
            for c, hs in groups:
                d.add_entries(c, hs)
            for c, hs in groups:
                d.reduce_refs(c, hs)
            return d
    else:
        lists = [(c, hs.tolist()) for c, hs in groups]

        def run() -> Any:
            d = DictDraining()
            for c, hs in lists:
                for h in hs:
                    d.add_entry(c, h)
            for c, hs in lists:
                for h in hs:
                    d.reduce_ref(c, h)
            return d

    timer = rw.BestTimer(run)
    benchmark.group = "draining register + ack"
    d = benchmark.pedantic(timer, rounds=5, warmup_rounds=0)
    assert len(d.entries if impl == DICT else d) == 0
    TABLE.record(REGISTER, impl, 2 * len(hashes) / timer.best / 1e6, lower=False)
