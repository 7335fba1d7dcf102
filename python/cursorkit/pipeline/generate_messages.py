"""The synthetic message log's columns, drawn with numpy (one row per entry, in position order).

- Ledgers: ids start at 3 and grow by 1 to 4 (BookKeeper ids are global to the cluster, so one topic
  sees gaps). Every ledger holds at least one entry; the rest are shared in proportion to weights
  uniform in [0.5, 1.5], so sizes vary by about ±50% around ``messages / ledgers``. Entry ids run
  from 0 to size - 1.
- ``publish_time``: the first message at ``start_ms``, then exponential gaps whose mean is drawn per
  ledger, log-uniformly between 0.2 and 5 ms (200 to 5,000 messages a second; the rate jumps at each
  ledger). About 1.5 ms a message on average: 1M messages span some 25 minutes, 16M some 6.5 hours.
  Non-decreasing (whole milliseconds, so ties occur).
- ``key``: a rank from a power law with exponent 1.1 on [1, keys + 1), floored (a Zipf truncated to
  ``keys``), sent through a random affine bijection of 0..keys - 1 so the hottest key is not key 0;
  written ``"key-"`` + the id zero-padded to at least six digits. 1% of the keys are null.
- ``batch_size``: ``batch_fraction`` of the entries are batches of 2 to 16 messages, the others 1.
- ``deliver_at``: ``delayed_fraction`` of the messages carry ``publish_time`` + a delay log-uniform
  between one minute and three days; the others are null. ``now_ms``, the log's end (the last
  ``publish_time``), finds some of them due and most not yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_KEYS",
    "BoolArray",
    "Int32Array",
    "Int64Array",
    "MessageColumns",
    "draw_messages",
    "log_uniform",
]

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

FIRST_LEDGER_ID = 3
ZIPF_EXPONENT = 1.1
NULL_KEY_FRACTION = 0.01
MAX_KEYS = 2**31
"""Upper bound on ``keys``: key ids are mixed with int64 arithmetic (``rank * a`` must not overflow)."""
GAP_MEAN_MS = (0.2, 5.0)
DELAY_MS = (60_000, 3 * 86_400_000)
BATCH_SIZES = (2, 16)


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """The message log as numpy columns (one element per entry, position order)."""

    ledger_id: Int64Array
    entry_id: Int64Array
    publish_time: Int64Array
    due: Int64Array
    """``deliver_at`` where delayed, else ``publish_time``: the earliest a consumer can ack."""
    delayed: BoolArray
    key_id: Int64Array
    key_null: BoolArray
    batch_size: Int32Array


def log_uniform(rng: np.random.Generator, low: float, high: float, size: int) -> Int64Array:
    """``size`` integers spread evenly in log scale over [low, high]."""
    values = np.exp(rng.uniform(math.log(low), math.log(high), size))
    return np.floor(values).astype(np.int64)


def draw_messages(
    rng: np.random.Generator,
    messages: int,
    ledgers: int,
    keys: int,
    delayed_fraction: float,
    batch_fraction: float,
    start_ms: int,
) -> MessageColumns:
    """Draws the message log's columns (see the module docstring)."""
    # Ledger sizes: one entry each, the rest by weight (largest remainders round to the exact total).
    share = rng.uniform(0.5, 1.5, ledgers)
    share *= (messages - ledgers) / share.sum()
    sizes = np.floor(share).astype(np.int64)
    short = messages - ledgers - int(sizes.sum())
    if short > 0:
        sizes[np.argsort(sizes - share, kind="stable")[:short]] += 1
    sizes += 1
    ids = FIRST_LEDGER_ID + np.concatenate(([0], np.cumsum(rng.integers(1, 5, ledgers - 1))))
    first_row = np.cumsum(sizes) - sizes
    ledger_id = np.repeat(ids, sizes).astype(np.int64)
    entry_id = np.arange(messages, dtype=np.int64) - np.repeat(first_row, sizes)

    gap_mean = np.exp(rng.uniform(math.log(GAP_MEAN_MS[0]), math.log(GAP_MEAN_MS[1]), ledgers))
    gaps = rng.standard_exponential(messages)
    gaps *= np.repeat(gap_mean, sizes)
    gaps[0] = 0.0
    publish_time = start_ms + np.floor(np.cumsum(gaps)).astype(np.int64)

    # Continuous power law on [1, keys + 1) by inverse CDF, floored to a rank 0..keys-1.
    u = rng.random(messages)
    tail = (keys + 1.0) ** (1.0 - ZIPF_EXPONENT)
    rank = np.floor((1.0 - u * (1.0 - tail)) ** (1.0 / (1.0 - ZIPF_EXPONENT))).astype(np.int64) - 1
    np.clip(rank, 0, keys - 1, out=rank)
    multiplier = int(rng.integers(1, keys + 1))
    while math.gcd(multiplier, keys) != 1:
        multiplier = multiplier % keys + 1
    offset = int(rng.integers(0, keys))
    key_id = (rank * multiplier + offset) % keys
    key_null = rng.random(messages) < NULL_KEY_FRACTION

    batch_size = np.ones(messages, dtype=np.int32)
    batched = rng.random(messages) < batch_fraction
    batch_size[batched] = rng.integers(BATCH_SIZES[0], BATCH_SIZES[1] + 1, int(batched.sum()), dtype=np.int32)

    delayed = rng.random(messages) < delayed_fraction
    due = publish_time.copy()
    due[delayed] += log_uniform(rng, DELAY_MS[0], DELAY_MS[1], int(delayed.sum()))
    return MessageColumns(ledger_id, entry_id, publish_time, due, delayed, key_id, key_null, batch_size)
