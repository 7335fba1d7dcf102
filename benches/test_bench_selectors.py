"""Key_Shared selector benchmarks (issue 5 §6): ``select_many`` throughput and consistent-hashing balance.

``make bench`` measures (release build); under ``make test`` every body runs once, shrunk, as a smoke
test, and checks its selections against the peer. Each selector holds 100 consumers (auto-split:
100 joins; consistent hashing: 100 names x 100 points; exclusive: 100 contiguous ranges covering
the space). The peers are what a Python dispatcher would write: ``bisect`` over the sorted range
upper bounds per slot (fewer slots: its rate does not depend on the count), and numpy's vectorised
``searchsorted`` over the same bounds. Balance: 1M keys ``key-<i>`` hashed with ``hash_many``,
slotted as each selector's hashing does, selected, and counted per consumer (max/min).
The closing table is printed by ``conftest.py`` from this module's ``TABLE``.
"""

from __future__ import annotations

import bisect
from collections import deque
from functools import cache, partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import cursor_workloads as cw
import delayed_workloads as dw
import rangeset_workloads as rw
from cursorkit.keyshared.hashing import hash_many, slots
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector, ExclusiveRangeSelector

N = 10_000_000
SMOKE_N = 100_000
PEER_N = 1_000_000
SMOKE_PEER_N = 20_000
CONSUMERS = 100
BALANCE_KEYS = 1_000_000
SMOKE_BALANCE_KEYS = 100_000
BALANCE_CONSUMERS = 10
SEED = 20_250_534

CURSORKIT = "cursorkit"
BISECT = "bisect per slot (Python)"
SEARCHSORTED = "numpy searchsorted"

KINDS = ("auto-split", "consistent hashing", "exclusive")


def select_row(kind: str) -> str:
    return f"select_many, 100 consumers, {kind}"


PER_CALL = "select per call, deque(map(...)), consistent hashing"
MEMBERSHIP = "add + remove one consumer at 100, consistent hashing"
CH_BALANCE = "balance max/min, 10 consumers, 1M keys, consistent hashing"
CH_SPREAD = "same over 50 random consumer-name sets: median (p90, worst), 100 points"
CH_SPREAD_200 = "same over 50 random consumer-name sets: median (p90, worst), 200 points"
NAME_SETS = 50
SMOKE_NAME_SETS = 3
AS_BALANCE = "balance max/min, 10 consumers, 1M keys, auto-split"

TABLE = dw.DelayedTable(
    rows=[
        *(cw.Row(select_row(k), "M/s", True, 50.0) for k in KINDS),
        cw.Row(PER_CALL, "M/s", True, None),
        cw.Row(MEMBERSHIP, "µs", False, None),
        cw.Row(CH_BALANCE, "×", False, 1.4),
        cw.Row(CH_SPREAD, "×", False, None),
        cw.Row(CH_SPREAD_200, "×", False, None),
        cw.Row(AS_BALANCE, "×", False, None),
    ],
    peers=(BISECT, SEARCHSORTED),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Key_Shared selectors - {mode}", judge=not smoke)


# ------------------------------------------------------------------------------------------ workloads


class Named:
    """A consumer: hashable by identity, with a name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def selector(kind: str, consumers: int = CONSUMERS) -> Any:
    """A selector of ``kind`` holding ``consumers`` consumers."""
    members = [Named(f"consumer-{i}") for i in range(consumers)]
    if kind == "auto-split":
        sel: Any = AutoSplitSelector()
        for c in members:
            sel.add_consumer(c)
    elif kind == "consistent hashing":
        sel = ConsistentHashingSelector()
        for c in members:
            sel.add_consumer(c)
    else:
        sel = ExclusiveRangeSelector()
        width = -(-65536 // consumers)
        for i, c in enumerate(members):
            sel.add_consumer(c, [(i * width, min(65535, (i + 1) * width - 1))])
    return sel


@cache
def slot_column(n: int, kind: str) -> npt.NDArray[np.int64]:
    """``n`` uniform slots of the selector kind's key hash range (CH: 1..65535, else 0..65535)."""
    lo = 1 if kind == "consistent hashing" else 0
    return np.random.default_rng(SEED).integers(lo, 65536, size=n, dtype=np.int64)


class BisectPeer:
    """The Python dispatcher's selector: sorted range upper bounds and their owners' indices."""

    def __init__(self, sel: Any) -> None:
        rows = sel.assignments()
        self.bounds = [e for _, e, _ in rows]
        self.owners = [sel.index_of(c) for _, _, c in rows] + [-1]  # -1: beyond the last bound
        self.bounds_array = np.asarray(self.bounds, dtype=np.int64)
        self.owners_array = np.asarray(self.owners, dtype=np.int64)

    def select_many(self, slot_list: list[int]) -> list[int]:
        """One ``bisect_left`` per slot (ceiling bound), mapped to its owner."""
        return list(map(self.owners.__getitem__, map(partial(bisect.bisect_left, self.bounds), slot_list)))

    def searchsorted(self, slot_array: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The same look-up vectorised by numpy."""
        return self.owners_array[np.searchsorted(self.bounds_array, slot_array)]


# ----------------------------------------------------------------------------------------- benchmarks


@pytest.mark.parametrize("kind", KINDS)
def test_select_many(benchmark: Any, smoke: bool, kind: str) -> None:
    """``select_many`` of uniform int64 slots, 100 consumers (one table read per slot, GIL released)."""
    sel = selector(kind)
    column = slot_column(SMOKE_N if smoke else N, kind)
    timer = rw.BestTimer(sel.select_many)
    benchmark.group = "keyshared select_many"
    got = benchmark.pedantic(timer, args=(column,), rounds=7, warmup_rounds=1)
    peer = BisectPeer(sel)
    assert np.array_equal(got, peer.searchsorted(column))
    assert (got >= 0).all()
    TABLE.record(select_row(kind), CURSORKIT, len(column) / timer.best / 1e6, lower=False)


@pytest.mark.parametrize("kind", KINDS)
def test_select_peers(benchmark: Any, smoke: bool, kind: str) -> None:
    """The bisect peer per slot (fewer slots) and numpy ``searchsorted`` (all of them)."""
    sel = selector(kind)
    peer = BisectPeer(sel)
    column = slot_column(SMOKE_N if smoke else N, kind)
    few = column[: SMOKE_PEER_N if smoke else PEER_N].tolist()
    timer = rw.BestTimer(peer.select_many)
    benchmark.group = "keyshared select_many"
    got = benchmark.pedantic(timer, args=(few,), rounds=3, warmup_rounds=0)
    assert got == sel.select_many(np.asarray(few, dtype=np.int64)).tolist()
    TABLE.record(select_row(kind), BISECT, len(few) / timer.best / 1e6, lower=False)
    vectorised = rw.BestTimer(peer.searchsorted)
    for _ in range(1 if smoke else 5):
        vectorised(column)
    TABLE.record(select_row(kind), SEARCHSORTED, len(column) / vectorised.best / 1e6, lower=False)


def test_select_per_call(benchmark: Any, smoke: bool) -> None:
    """One ``select`` call per slot from a Python int list (consumer objects back)."""
    sel = selector("consistent hashing")
    few = slot_column(SMOKE_PEER_N if smoke else PEER_N, "consistent hashing").tolist()

    def run() -> None:
        deque(map(sel.select, few), 0)

    timer = rw.BestTimer(run)
    benchmark.group = "keyshared select per call"
    benchmark.pedantic(timer, rounds=5, warmup_rounds=0)
    peer = BisectPeer(sel)
    probe = few[:1000]
    by_index = sel.consumers_by_index
    assert [sel.select(s) for s in probe] == [by_index[i] for i in peer.select_many(probe)]
    TABLE.record(PER_CALL, CURSORKIT, len(few) / timer.best / 1e6, lower=False)


def test_membership_change(benchmark: Any, smoke: bool) -> None:
    """Adding and removing one consumer at 100: 100 ring points, table rebuild and impact diff twice."""
    sel = selector("consistent hashing")
    extra = Named("joiner")
    rounds = 5 if smoke else 200

    def run() -> None:
        sel.add_consumer(extra)
        sel.remove_consumer(extra)

    timer = rw.BestTimer(run)
    benchmark.group = "keyshared membership"
    benchmark.pedantic(timer, rounds=rounds, warmup_rounds=1)
    assert extra not in sel and len(sel) == CONSUMERS
    TABLE.record(MEMBERSHIP, CURSORKIT, timer.best * 1e6)


@cache
def balance_hashes(n: int) -> npt.NDArray[np.uint32]:
    """Sticky-key hashes of ``key-0`` .. ``key-<n-1>``."""
    return hash_many([f"key-{i}" for i in range(n)])


@pytest.mark.parametrize("kind", ["consistent hashing", "auto-split"])
def test_balance(smoke: bool, kind: str) -> None:
    """Max/min keys per consumer for 10 consumers and 1M uniform keys (auto-split for comparison)."""
    hashes = balance_hashes(SMOKE_BALANCE_KEYS if smoke else BALANCE_KEYS)
    sel = selector(kind, BALANCE_CONSUMERS)
    slotted = slots(hashes, "consistent" if kind == "consistent hashing" else "range")
    owners = sel.select_many(slotted)
    assert (owners >= 0).all()
    load = np.bincount(owners, minlength=BALANCE_CONSUMERS)
    ratio = float(load.max() / load.min())
    if kind == "auto-split":
        # 10 joins halve the widest range each time: four consumers hold 1/16, six hold 1/8.
        assert sorted(np.round(load / load.sum() * 16).astype(int).tolist()) == [1] * 4 + [2] * 6
    TABLE.record(CH_BALANCE if kind == "consistent hashing" else AS_BALANCE, CURSORKIT, ratio)


@pytest.mark.parametrize("points", [100, 200])
def test_balance_over_name_sets(smoke: bool, points: int) -> None:
    """The ring depends on consumer names (Pulsar's point naming), so balance does too: its spread."""
    hashes = slots(balance_hashes(SMOKE_BALANCE_KEYS if smoke else BALANCE_KEYS), "consistent")
    ratios = []
    for t in range(SMOKE_NAME_SETS if smoke else NAME_SETS):
        sel = ConsistentHashingSelector(points_per_consumer=points)
        for i in range(BALANCE_CONSUMERS):
            sel.add_consumer(Named(f"set{t}-consumer-{i}"))
        load = np.bincount(sel.select_many(hashes), minlength=BALANCE_CONSUMERS)
        assert load.min() > 0
        ratios.append(float(load.max() / load.min()))
    r = np.array(ratios)
    share = 100 * (r <= 1.4).mean()
    note = f"p90 {np.percentile(r, 90):.2f}, worst {r.max():.2f}; <= 1.4 in {share:.0f}% of sets"
    TABLE.record(CH_SPREAD if points == 100 else CH_SPREAD_200, CURSORKIT, float(np.median(r)), note)
