"""Sticky-key hashing benchmarks (issue 5 §6): ``hash_many`` over 1M 16-byte keys and its peers.

``make bench`` measures (release build); under ``make test`` every body runs once, shrunk, as a smoke
test, and checks what it hashed against a pure-Python Murmur3. The peer is what a Python broker would
write without cursorkit: Murmur3 x86_32 in plain Python, one key at a time (its rate does not depend on
the key count, so it hashes fewer keys); ``mmh3`` joins it when installed (it is not a dependency).
The closing table is printed by ``conftest.py`` from this module's ``TABLE``.
"""

from __future__ import annotations

from collections import deque
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

import cursor_workloads as cw
import delayed_workloads as dw
import rangeset_workloads as rw
from cursorkit.bench.peers import murmur3_py, optional
from cursorkit.keyshared.hashing import hash_many, slots, sticky_key_hash

N = 1_000_000
SMOKE_N = 20_000
PEER_N = 100_000
SMOKE_PEER_N = 2_000
KEY_BYTES = 16
SEED = 20_250_505

CURSORKIT = "cursorkit"
PURE_PYTHON = "pure-Python murmur3"
MMH3 = "mmh3"

ARROW = "hash_many, 1M 16-byte keys, pyarrow binary array"
ARROW_LARGE = "hash_many, 1M 16-byte keys, pyarrow large_string, 4 chunks"
LIST = "hash_many, 1M 16-byte keys, Python list of bytes"
PER_CALL = "sticky_key_hash per call, deque(map(...))"
SLOTS = "slots (auto-split range), 1M hashes"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(ARROW, "M/s", True, 20.0),
        cw.Row(ARROW_LARGE, "M/s", True, None),
        cw.Row(LIST, "M/s", True, 20.0),
        cw.Row(PER_CALL, "M/s", True, None),
        cw.Row(SLOTS, "M/s", True, None),
    ],
    peers=(PURE_PYTHON, MMH3),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "best round"
    return TABLE.render(f"Sticky-key hashing - {mode}", judge=not smoke)


# ------------------------------------------------------------------------------------------ workloads


@cache
def keys(n: int) -> list[bytes]:
    """``n`` random 16-byte keys (fixed seed)."""
    raw = np.random.default_rng(SEED).integers(0, 256, size=(n, KEY_BYTES), dtype=np.uint8)
    return [row.tobytes() for row in raw]


@cache
def arrow_keys(n: int) -> pa.Array:
    """The keys of ``keys(n)`` as a pyarrow ``binary`` array built straight from its buffers."""
    values = b"".join(keys(n))
    offsets = np.arange(0, (n + 1) * KEY_BYTES, KEY_BYTES, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])


@cache
def chunked_large_keys(n: int) -> pa.ChunkedArray:
    """The keys as a ``large_string`` chunked array of 4 chunks (hex text of the first 8 bytes)."""
    text = pa.array([k[:8].hex() for k in keys(n)], type=pa.large_string())
    step = -(-n // 4)
    return pa.chunked_array([text.slice(i, step) for i in range(0, n, step)])


# ------------------------------------------------------------------------------------------- the peer


def _check(hashes: npt.NDArray[np.uint32], ks: list[bytes]) -> None:
    """The first and last keys against the pure-Python peer."""
    assert hashes.dtype == np.uint32 and len(hashes) == len(ks)
    probe = [*range(min(200, len(ks))), len(ks) - 1]
    assert [int(hashes[i]) for i in probe] == [murmur3_py(ks[i]) for i in probe]


# ----------------------------------------------------------------------------------------- benchmarks


@pytest.mark.parametrize("form", ["arrow", "list"])
def test_hash_many(benchmark: Any, smoke: bool, form: str) -> None:
    """``hash_many`` of 1M 16-byte keys, from a pyarrow binary array (zero-copy) or a list of bytes."""
    n = SMOKE_N if smoke else N
    ks = keys(n)
    column: Any = arrow_keys(n) if form == "arrow" else ks
    timer = rw.BestTimer(hash_many)
    benchmark.group = "keyshared hash_many"
    hashes = benchmark.pedantic(timer, args=(column,), rounds=7, warmup_rounds=1)
    _check(hashes, ks)
    TABLE.record(ARROW if form == "arrow" else LIST, CURSORKIT, n / timer.best / 1e6, lower=False)


def test_hash_many_chunked_large_string(benchmark: Any, smoke: bool) -> None:
    """``hash_many`` of a 4-chunk ``large_string`` ChunkedArray (the Arrow C stream path)."""
    n = SMOKE_N if smoke else N
    column = chunked_large_keys(n)
    timer = rw.BestTimer(hash_many)
    benchmark.group = "keyshared hash_many"
    hashes = benchmark.pedantic(timer, args=(column,), rounds=7, warmup_rounds=1)
    text = [k[:8].hex().encode() for k in keys(n)]
    _check(hashes, text)
    TABLE.record(ARROW_LARGE, CURSORKIT, n / timer.best / 1e6, lower=False)


def test_sticky_key_hash_per_call(benchmark: Any, smoke: bool) -> None:
    """One ``sticky_key_hash`` call per key, driven by ``deque(map(...))``."""
    n = SMOKE_N if smoke else N
    ks = keys(n)

    def run() -> None:
        deque(map(sticky_key_hash, ks), 0)

    timer = rw.BestTimer(run)
    benchmark.group = "keyshared sticky_key_hash per call"
    benchmark.pedantic(timer, rounds=5, warmup_rounds=0)
    assert sticky_key_hash(ks[0]) == murmur3_py(ks[0])
    TABLE.record(PER_CALL, CURSORKIT, n / timer.best / 1e6, lower=False)


def test_slots(benchmark: Any, smoke: bool) -> None:
    """``slots`` (auto-split / exclusive range function) of 1M uint32 hashes (zero-copy input)."""
    n = SMOKE_N if smoke else N
    hashes = hash_many(arrow_keys(n))
    timer = rw.BestTimer(slots)
    benchmark.group = "keyshared slots"
    out = benchmark.pedantic(timer, args=(hashes, "range"), rounds=7, warmup_rounds=1)
    expected = hashes % np.uint32(65536)
    expected[expected == 0] = 1
    assert np.array_equal(out, expected)
    TABLE.record(SLOTS, CURSORKIT, n / timer.best / 1e6, lower=False)


def test_peers(benchmark: Any, smoke: bool) -> None:
    """The pure-Python Murmur3 over a list of bytes (and ``mmh3`` when installed), on fewer keys."""
    ks = keys(SMOKE_PEER_N if smoke else PEER_N)

    def run() -> list[int]:
        return list(map(murmur3_py, ks))

    timer = rw.BestTimer(run)
    benchmark.group = "keyshared hash_many"
    out = benchmark.pedantic(timer, rounds=2, warmup_rounds=0)
    assert out == hash_many(ks).tolist()
    rate = len(ks) / timer.best / 1e6
    note = f"({len(ks) // 1000}k keys)"
    for metric in (ARROW, LIST, PER_CALL):
        TABLE.record(metric, PURE_PYTHON, rate, note, lower=False)
    mmh3 = optional("mmh3")
    if mmh3 is not None:
        hash32 = mmh3.hash

        def run_mmh3() -> list[int]:
            return [hash32(k, 0, False) & 0x7FFFFFFF for k in ks]

        best = rw.best_of(run_mmh3, tuple, reps=3)
        assert run_mmh3() == out
        for metric in (ARROW, LIST, PER_CALL):
            TABLE.record(metric, MMH3, len(ks) / best / 1e6, note, lower=False)
