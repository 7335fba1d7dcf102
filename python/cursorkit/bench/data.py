"""The standard workloads' data, defined once for ``cursorkit bench`` and the repository's ``benches/``.

Positions are ``(ledger, entry)`` columns of int64:

* W1 - entries ``0..n`` of one ledger, in order (one range at the end).
* W2 - every odd entry of ``0..n`` of one ledger (``n / 2`` single-entry ranges).
* W3 - a seeded permutation of ``n`` entries over 10 ledgers (``n / 10`` each).
* W4 - ``n`` messages over 10 ledgers (dense entries per ledger), deliver-at uniform over one hour
  from ``start_ms``, shuffled; W4c the same with 3,600 distinct deliver-at values (one per second).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cursorkit.errors import InvalidArgument

__all__ = [
    "HOUR_MS",
    "POSITION_WORKLOADS",
    "SEED",
    "TICK_MS",
    "W1_LEDGER",
    "W2_LEDGER",
    "W3_FIRST_LEDGER",
    "W3_LEDGERS",
    "W4C_DISTINCT",
    "W4_FIRST_LEDGER",
    "W4_LEDGERS",
    "W4_SEED",
    "deliver_at",
    "positions",
]

I64 = npt.NDArray[np.int64]

SEED = 20_240_602
W1_LEDGER = 1_001
W2_LEDGER = 1_002
W3_FIRST_LEDGER = 2_000
W3_LEDGERS = 10
POSITION_WORKLOADS = ("W1", "W2", "W3")

W4_SEED = 20_240_604
W4_LEDGERS = 10
W4_FIRST_LEDGER = 3_000
W4C_DISTINCT = 3_600
HOUR_MS = 3_600_000
TICK_MS = 1_000


def positions(name: str, n: int) -> tuple[I64, I64]:
    """The ledger and entry columns of workload ``name`` (``W1``, ``W2``, ``W3``) over ``n`` entries."""
    if name == "W1":
        entries = np.arange(n, dtype=np.int64)
        ledgers = np.full(n, W1_LEDGER, dtype=np.int64)
    elif name == "W2":
        entries = np.arange(1, n, 2, dtype=np.int64)
        ledgers = np.full(len(entries), W2_LEDGER, dtype=np.int64)
    elif name == "W3":
        per = n // W3_LEDGERS
        first = W3_FIRST_LEDGER
        ledgers = np.repeat(np.arange(first, first + W3_LEDGERS, dtype=np.int64), per)
        entries = np.tile(np.arange(per, dtype=np.int64), W3_LEDGERS)
        order = np.random.default_rng(SEED).permutation(len(entries))
        ledgers, entries = ledgers[order], entries[order]
    else:
        raise InvalidArgument(f"unknown position workload {name!r}; expected one of {POSITION_WORKLOADS}")
    return np.ascontiguousarray(ledgers), np.ascontiguousarray(entries)


def deliver_at(n: int, start_ms: int, *, clustered: bool = False) -> tuple[I64, I64, I64]:
    """W4 (W4c when ``clustered``) over ``n`` messages: ledgers, entries and deliver-at times, shuffled."""
    per = n // W4_LEDGERS
    ledgers = np.repeat(np.arange(W4_FIRST_LEDGER, W4_FIRST_LEDGER + W4_LEDGERS, dtype=np.int64), per)
    entries = np.tile(np.arange(per, dtype=np.int64), W4_LEDGERS)
    rng = np.random.default_rng(W4_SEED + clustered)
    if clustered:
        offsets = rng.integers(0, W4C_DISTINCT, size=len(entries), dtype=np.int64) * TICK_MS
    else:
        offsets = rng.integers(0, HOUR_MS, size=len(entries), dtype=np.int64)
    order = rng.permutation(len(entries))
    return ledgers[order], entries[order], (start_ms + offsets)[order]
