"""The synthetic ack log's rows, drawn with numpy subscription by subscription (``"sub-0"``, ...).

- Progress: subscription ``i`` has consumed the first ``floor(p_i * messages)`` messages, with
  ``p_i = 0.97 * 0.7**i`` (0.97, 0.68, 0.48, 0.33, ...); nothing after that is acked.
- Timing: a consumed message is acked at ``max(publish_time, deliver_at)`` plus a processing delay
  log-uniform between 5 ms and 2 s. An ack later than ``now_ms`` has not happened and is not in the
  log, so delayed messages not yet due stay unacked (as do the messages of the last second or two).
- Lost messages: runs of 1 to 20 consecutive consumed messages, starting at random and covering
  about 0.5% of them, are never acked (their redelivery is pending).
- Failover style (``i % 3 == 0``): delayed delivery does not apply to Failover subscriptions (Pulsar
  delays only Shared and Key_Shared), so it acks at ``publish_time`` plus the processing delay, and
  its lost runs fall only in the last 5% of what it consumed (since a consumer restart). As long as
  no unacked message precedes, the consumer acks
  cumulatively, once at the end of each run of 100 to 1,000 messages (and once at the last message
  before the first unacked one), at the latest ack time reached so far. A quarter of the cumulative
  acks that land on a batch entry carry a ``batch_index`` short of the batch's last message (the ack
  ends inside the batch). From the first unacked message on, it acks individually.
- Shared style (the other subscriptions): individual acks only, one row per acked message.
- Individually acked batch entries: 70% get one whole-entry ack (``batch_index`` null); 30% get one
  ack per batch index, each 0 to 50 ms after the entry's ack time, for every index in half of them
  and for each index with probability 0.6 in the other half (partial batches).
- Duplicates: about 0.1% of the individual ack rows appear a second time, 1 to 60 s later (a
  redelivered message acked twice), when that is still no later than ``now_ms``.
- Rows are sorted by ``ack_time`` within a subscription (ties in a fixed, seed-independent order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cursorkit.pipeline.generate_messages import (
    BoolArray,
    Int32Array,
    Int64Array,
    MessageColumns,
    log_uniform,
)

__all__ = ["AckColumns", "draw_acks", "subscription_progress"]

FAILOVER_LOST_TAIL = 0.05
"""Share of a Failover subscription's consumed messages (the most recent) where lost runs fall."""
PROCESSING_MS = (5, 2_000)
LOST_FRACTION = 0.005
LOST_RUN = (1, 20)
CUMULATIVE_RUN = (100, 1_000)
CUMULATIVE_INSIDE_BATCH = 0.25
BY_INDEX_FRACTION = 0.3
PARTIAL_BATCH_FRACTION = 0.5
INDEX_ACK_PROBABILITY = 0.6
INDEX_JITTER_MS = 50
DUPLICATE_FRACTION = 0.001
REDELIVERY_MS = (1_000, 60_000)


@dataclass(frozen=True, slots=True)
class AckColumns:
    """Ack rows of one subscription as numpy columns; ``batch_index`` -1 stands for null."""

    position: Int64Array
    """Row of the acked entry in the message log."""
    batch_index: Int32Array
    cumulative: BoolArray
    ack_time: Int64Array

    @staticmethod
    def concat(parts: list[AckColumns]) -> AckColumns:
        """All rows of ``parts``, in order."""
        return AckColumns(
            np.concatenate([p.position for p in parts]),
            np.concatenate([p.batch_index for p in parts]),
            np.concatenate([p.cumulative for p in parts]),
            np.concatenate([p.ack_time for p in parts]),
        )

    def take(self, rows: npt.NDArray[np.intp] | BoolArray | slice) -> AckColumns:
        """The rows selected by an index array, a mask or a slice (a view)."""
        return AckColumns(
            self.position[rows], self.batch_index[rows], self.cumulative[rows], self.ack_time[rows]
        )


def subscription_progress(index: int) -> float:
    """Fraction of the log subscription ``index`` has consumed: 0.97, 0.68, 0.48, ... (0.97 * 0.7**i)."""
    return 0.97 * 0.7**index


def draw_acks(rng: np.random.Generator, index: int, log: MessageColumns, now_ms: int) -> AckColumns:
    """Draws subscription ``index``'s ack rows, sorted by ack time (see the module docstring)."""
    consumed = math.floor(subscription_progress(index) * len(log.ledger_id))
    failover = index % 3 == 0
    # Delayed delivery applies to Shared and Key_Shared subscriptions only: Failover gets it now.
    ready = log.publish_time[:consumed] if failover else log.due[:consumed]
    ack_time = ready + log_uniform(rng, PROCESSING_MS[0], PROCESSING_MS[1], consumed)
    lost = _lost(rng, consumed)
    if failover:  # only since its last restart: the tail of what it consumed
        lost[: int(consumed * (1 - FAILOVER_LOST_TAIL))] = False
    acked = (ack_time <= now_ms) & ~lost
    parts: list[AckColumns] = []
    first_gap = 0
    if failover:
        first_gap = consumed if bool(acked.all()) else int(np.argmin(acked))
        if first_gap:
            parts.append(_cumulative_acks(rng, ack_time[:first_gap], log.batch_size[:first_gap]))
    positions = np.flatnonzero(acked[first_gap:]) + first_gap
    parts += _individual_acks(rng, positions, ack_time[positions], log.batch_size[positions], now_ms)
    acks = AckColumns.concat(parts)
    return acks.take(np.argsort(acks.ack_time, kind="stable"))


def _lost(rng: np.random.Generator, consumed: int) -> BoolArray:
    """Mask of the consumed messages that are never acked: random runs of 1..20, ~0.5% in all."""
    mean_run = (LOST_RUN[0] + LOST_RUN[1]) / 2
    runs = int(rng.poisson(LOST_FRACTION * consumed / mean_run)) if consumed else 0
    starts = rng.integers(0, max(consumed, 1), runs)
    ends = np.minimum(starts + rng.integers(LOST_RUN[0], LOST_RUN[1] + 1, runs), consumed)
    depth = np.bincount(starts, minlength=consumed + 1) - np.bincount(ends, minlength=consumed + 1)
    return np.cumsum(depth[:consumed]) > 0


def _cumulative_acks(rng: np.random.Generator, ack_time: Int64Array, batch_size: Int32Array) -> AckColumns:
    """Cumulative acks over a fully acked prefix: one per run of 100..1000 and one at its last message."""
    length = len(ack_time)
    runs = rng.integers(CUMULATIVE_RUN[0], CUMULATIVE_RUN[1] + 1, length // CUMULATIVE_RUN[0] + 1)
    ends = np.cumsum(runs) - 1
    ends = np.append(ends[ends < length - 1], length - 1)
    times = np.maximum.accumulate(ack_time)[ends]
    sizes = batch_size[ends]
    inside = (sizes > 1) & (rng.random(len(ends)) < CUMULATIVE_INSIDE_BATCH)
    batch_index = np.full(len(ends), -1, dtype=np.int32)
    batch_index[inside] = rng.integers(0, sizes[inside] - 1, dtype=np.int32)
    return AckColumns(ends.astype(np.int64), batch_index, np.ones(len(ends), dtype=np.bool_), times)


def _individual_acks(
    rng: np.random.Generator, positions: Int64Array, ack_time: Int64Array, batch_size: Int32Array, now_ms: int
) -> list[AckColumns]:
    """Individual acks of the entries at ``positions``: whole entries, batch indexes, a few duplicates."""
    by_index = (batch_size > 1) & (rng.random(len(positions)) < BY_INDEX_FRACTION)
    whole = ~by_index
    whole_rows = AckColumns(
        positions[whole],
        np.full(int(whole.sum()), -1, dtype=np.int32),
        np.zeros(int(whole.sum()), dtype=np.bool_),
        ack_time[whole],
    )

    sizes = batch_size[by_index].astype(np.int64)
    every = rng.random(len(sizes)) < 1.0 - PARTIAL_BATCH_FRACTION
    total = int(sizes.sum())
    first = np.cumsum(sizes) - sizes
    index_rows = AckColumns(
        np.repeat(positions[by_index], sizes),
        (np.arange(total, dtype=np.int64) - np.repeat(first, sizes)).astype(np.int32),
        np.zeros(total, dtype=np.bool_),
        np.repeat(ack_time[by_index], sizes) + rng.integers(0, INDEX_JITTER_MS + 1, total),
    )
    keep = (np.repeat(every, sizes) | (rng.random(total) < INDEX_ACK_PROBABILITY)) & (
        index_rows.ack_time <= now_ms
    )
    rows = [whole_rows, index_rows.take(keep)]
    for part in rows[:2]:
        again = part.take(rng.random(len(part.position)) < DUPLICATE_FRACTION)
        again.ack_time[:] += rng.integers(REDELIVERY_MS[0], REDELIVERY_MS[1] + 1, len(again.position))
        rows.append(again.take(again.ack_time <= now_ms))
    return rows
