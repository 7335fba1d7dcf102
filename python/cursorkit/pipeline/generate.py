"""Synthetic topic logs: a message log and an ack log shaped like a busy topic's, for the pipeline.

:func:`generate` writes ``out/messages/part-NNNNN.parquet`` and ``out/acks/part-NNNNN.parquet``
(zstd, at most ``rows_per_file`` rows each, so Spark reads them in parallel) with exactly the columns
of :mod:`cursorkit.pipeline.schema`. Everything is drawn with numpy's PCG64 from ``seed``: stream 0
draws the message log and stream ``1 + i`` the acks of subscription ``i``, so the same seed gives the
same tables, and adding a subscription leaves the message log and the other subscriptions unchanged.
All of it is vectorised; no Python loop runs per message.

Message log (one row per entry, in position order):

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

Ack log, subscription by subscription (``"sub-0"``, ``"sub-1"``, ...):

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

With ``subscriptions=0`` the ack log is one Parquet file with the schema and no rows.
"""

from __future__ import annotations

import math
import operator
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.pipeline.schema import ACK_COLUMNS, ACK_CUMULATIVE, ACK_INDIVIDUAL, MESSAGE_COLUMNS

__all__ = ["GenerateSummary", "generate", "subscription_progress"]

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

MESSAGE_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in MESSAGE_COLUMNS])
"""Arrow schema of the written message log (non-null columns are marked so)."""
ACK_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in ACK_COLUMNS])
"""Arrow schema of the written ack log."""

FIRST_LEDGER_ID = 3
ZIPF_EXPONENT = 1.1
NULL_KEY_FRACTION = 0.01
MAX_KEYS = 2**31
"""Upper bound on ``keys``: key ids are mixed with int64 arithmetic (``rank * a`` must not overflow)."""
GAP_MEAN_MS = (0.2, 5.0)
DELAY_MS = (60_000, 3 * 86_400_000)
FAILOVER_LOST_TAIL = 0.05
"""Share of a Failover subscription's consumed messages (the most recent) where lost runs fall."""
PROCESSING_MS = (5, 2_000)
BATCH_SIZES = (2, 16)
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
COMPRESSION = "zstd"


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateSummary:
    """What :func:`generate` wrote: where, how many rows and files, and the log's end."""

    messages_path: Path
    """Directory of the message log's Parquet files."""
    acks_path: Path
    """Directory of the ack log's Parquet files."""
    messages: int
    acks: int
    """Ack rows over all subscriptions (duplicates included)."""
    ledgers: int
    keys: int
    """Distinct non-null keys that occur in the message log (at most the ``keys`` asked for)."""
    subscriptions: list[str]
    delayed: int
    """Messages with a ``deliver_at``."""
    now_ms: int
    """The log's end: the largest ``publish_time``; no ack is later."""
    files: int
    """Parquet files written, message and ack logs together."""


@dataclass(frozen=True, slots=True)
class _Messages:
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


@dataclass(frozen=True, slots=True)
class _Acks:
    """Ack rows of one subscription as numpy columns; ``batch_index`` -1 stands for null."""

    position: Int64Array
    """Row of the acked entry in the message log."""
    batch_index: Int32Array
    cumulative: BoolArray
    ack_time: Int64Array

    @staticmethod
    def concat(parts: list[_Acks]) -> _Acks:
        """All rows of ``parts``, in order."""
        return _Acks(
            np.concatenate([p.position for p in parts]),
            np.concatenate([p.batch_index for p in parts]),
            np.concatenate([p.cumulative for p in parts]),
            np.concatenate([p.ack_time for p in parts]),
        )

    def take(self, rows: npt.NDArray[np.intp] | BoolArray | slice) -> _Acks:
        """The rows selected by an index array, a mask or a slice (a view)."""
        return _Acks(self.position[rows], self.batch_index[rows], self.cumulative[rows], self.ack_time[rows])


def subscription_progress(index: int) -> float:
    """Fraction of the log subscription ``index`` has consumed: 0.97, 0.68, 0.48, ... (0.97 * 0.7**i)."""
    return 0.97 * 0.7**index


def generate(
    out: str | os.PathLike[str],
    *,
    messages: int,
    ledgers: int,
    keys: int,
    delayed_fraction: float,
    subscriptions: int,
    seed: int,
    batch_fraction: float = 0.05,
    rows_per_file: int = 1_000_000,
    start_ms: int = 1_767_225_600_000,
) -> GenerateSummary:
    """Writes a synthetic message log and ack log under ``out`` (see the module docstring for how).

    ``out`` may exist, but ``out/messages`` and ``out/acks`` must not: both are written in a
    temporary directory inside ``out`` and renamed into place at the end, so a failed run leaves
    neither behind (short of a failure between the two renames).

    Raises:
        InvalidInputType: an argument of the wrong type (a float count, a string fraction).
        InvalidArgument: a count, fraction or time out of range, or ``out/messages`` / ``out/acks``
            already existing.
    """
    if not isinstance(out, str | os.PathLike):
        raise InvalidInputType(f"out must be a str or os.PathLike, not {type(out).__name__}")
    messages = _int_arg("messages", messages, 1)
    ledgers = _int_arg("ledgers", ledgers, 1, messages)
    keys = _int_arg("keys", keys, 1, MAX_KEYS)
    subscriptions = _int_arg("subscriptions", subscriptions, 0)
    seed = _int_arg("seed", seed, 0)
    rows_per_file = _int_arg("rows_per_file", rows_per_file, 1)
    start_ms = _int_arg("start_ms", start_ms, 0, 2**53)
    delayed_fraction = _fraction_arg("delayed_fraction", delayed_fraction)
    batch_fraction = _fraction_arg("batch_fraction", batch_fraction)

    root = Path(out)
    messages_path, acks_path = root / "messages", root / "acks"
    for target in (messages_path, acks_path):
        if target.exists():
            raise InvalidArgument(f"{target} already exists; generate writes a new log")
    root.mkdir(parents=True, exist_ok=True)

    log = _draw_messages(
        _stream(seed, 0), messages, ledgers, keys, delayed_fraction, batch_fraction, start_ms
    )
    now_ms = int(log.publish_time[-1])
    names = [f"sub-{i}" for i in range(subscriptions)]
    scratch = Path(tempfile.mkdtemp(prefix=".generate-", dir=root))
    try:
        (scratch / "messages").mkdir()
        (scratch / "acks").mkdir()
        message_files = _write_parts(scratch / "messages", _message_tables(log, keys, rows_per_file))
        ack_counts: list[int] = []
        ack_files = _write_parts(
            scratch / "acks", _ack_tables(log, names, seed, now_ms, rows_per_file, ack_counts)
        )
        if ack_files == 0:
            pq.write_table(
                ACK_SCHEMA.empty_table(), scratch / "acks" / _part_name(0), compression=COMPRESSION
            )
            ack_files = 1
        os.rename(scratch / "messages", messages_path)
        os.rename(scratch / "acks", acks_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    distinct_keys = pc.count_distinct(pa.array(log.key_id, mask=log.key_null)).as_py()
    return GenerateSummary(
        messages_path=messages_path,
        acks_path=acks_path,
        messages=messages,
        acks=sum(ack_counts),
        ledgers=ledgers,
        keys=int(distinct_keys),
        subscriptions=names,
        delayed=int(np.count_nonzero(log.delayed)),
        now_ms=now_ms,
        files=message_files + ack_files,
    )


def _int_arg(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``low..high``; bools and floats are refused."""
    if isinstance(value, bool | np.bool_):
        raise InvalidInputType(f"{name} must be an integer, not bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidInputType(f"{name} must be an integer, not {type(value).__name__}") from None
    if number < low or (high is not None and number > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise InvalidArgument(f"{name} must be {bound}, got {number}")
    return number


def _fraction_arg(name: str, value: object) -> float:
    """``value`` as a float in [0, 1]; bools and non-numbers are refused."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidInputType(f"{name} must be a number, not {type(value).__name__}")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # also refuses NaN
        raise InvalidArgument(f"{name} must be between 0 and 1, got {number}")
    return number


def _stream(seed: int, stream: int) -> np.random.Generator:
    """The independent PCG64 generator ``stream`` of ``seed`` (0 = message log, 1 + i = subscription i)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(stream,))))


def _log_uniform(rng: np.random.Generator, low: float, high: float, size: int) -> Int64Array:
    """``size`` integers spread evenly in log scale over [low, high]."""
    values = np.exp(rng.uniform(math.log(low), math.log(high), size))
    return np.floor(values).astype(np.int64)


def _draw_messages(
    rng: np.random.Generator,
    messages: int,
    ledgers: int,
    keys: int,
    delayed_fraction: float,
    batch_fraction: float,
    start_ms: int,
) -> _Messages:
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
    due[delayed] += _log_uniform(rng, DELAY_MS[0], DELAY_MS[1], int(delayed.sum()))
    return _Messages(ledger_id, entry_id, publish_time, due, delayed, key_id, key_null, batch_size)


def _key_strings(key_id: Int64Array, key_null: BoolArray, keys: int) -> pa.Array:
    """``"key-000123"`` strings for ``key_id`` (null where ``key_null``), built by Arrow kernels."""
    width = max(6, len(str(keys - 1)))
    digits = pc.utf8_lpad(pc.cast(pa.array(key_id, mask=key_null), pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise("key-", digits, "")


def _message_tables(log: _Messages, keys: int, rows_per_file: int) -> Iterator[pa.Table]:
    """The message log in tables of at most ``rows_per_file`` rows."""
    for lo in range(0, len(log.ledger_id), rows_per_file):
        part = slice(lo, lo + rows_per_file)
        delayed = log.delayed[part]
        yield pa.Table.from_arrays(
            [
                pa.array(log.ledger_id[part]),
                pa.array(log.entry_id[part]),
                pa.array(log.publish_time[part]),
                pa.array(log.due[part], mask=~delayed),
                _key_strings(log.key_id[part], log.key_null[part], keys),
                pa.array(log.batch_size[part]),
            ],
            schema=MESSAGE_SCHEMA,
        )


def _ack_tables(
    log: _Messages, names: list[str], seed: int, now_ms: int, rows_per_file: int, counts: list[int]
) -> Iterator[pa.Table]:
    """The ack log, subscription after subscription, in tables of at most ``rows_per_file`` rows.

    Appends each subscription's row count to ``counts`` as it is drawn.
    """
    ack_types = pa.array([ACK_INDIVIDUAL, ACK_CUMULATIVE], pa.string())
    for i, name in enumerate(names):
        acks = _draw_acks(_stream(seed, 1 + i), i, log, now_ms)
        counts.append(len(acks.position))
        for lo in range(0, len(acks.position), rows_per_file):
            part = acks.take(slice(lo, lo + rows_per_file))
            yield pa.Table.from_arrays(
                [
                    pa.repeat(pa.scalar(name, pa.string()), len(part.position)),
                    pa.array(log.ledger_id[part.position]),
                    pa.array(log.entry_id[part.position]),
                    pa.array(part.batch_index, mask=part.batch_index < 0),
                    ack_types.take(pa.array(part.cumulative.astype(np.int8))),
                    pa.array(part.ack_time),
                ],
                schema=ACK_SCHEMA,
            )


def _draw_acks(rng: np.random.Generator, index: int, log: _Messages, now_ms: int) -> _Acks:
    """Draws subscription ``index``'s ack rows, sorted by ack time (see the module docstring)."""
    consumed = math.floor(subscription_progress(index) * len(log.ledger_id))
    failover = index % 3 == 0
    # Delayed delivery applies to Shared and Key_Shared subscriptions only: Failover gets it now.
    ready = log.publish_time[:consumed] if failover else log.due[:consumed]
    ack_time = ready + _log_uniform(rng, PROCESSING_MS[0], PROCESSING_MS[1], consumed)
    lost = _lost(rng, consumed)
    if failover:  # only since its last restart: the tail of what it consumed
        lost[: int(consumed * (1 - FAILOVER_LOST_TAIL))] = False
    acked = (ack_time <= now_ms) & ~lost
    parts: list[_Acks] = []
    first_gap = 0
    if failover:
        first_gap = consumed if bool(acked.all()) else int(np.argmin(acked))
        if first_gap:
            parts.append(_cumulative_acks(rng, ack_time[:first_gap], log.batch_size[:first_gap]))
    positions = np.flatnonzero(acked[first_gap:]) + first_gap
    parts += _individual_acks(rng, positions, ack_time[positions], log.batch_size[positions], now_ms)
    acks = _Acks.concat(parts)
    return acks.take(np.argsort(acks.ack_time, kind="stable"))


def _lost(rng: np.random.Generator, consumed: int) -> BoolArray:
    """Mask of the consumed messages that are never acked: random runs of 1..20, ~0.5% in all."""
    mean_run = (LOST_RUN[0] + LOST_RUN[1]) / 2
    runs = int(rng.poisson(LOST_FRACTION * consumed / mean_run)) if consumed else 0
    starts = rng.integers(0, max(consumed, 1), runs)
    ends = np.minimum(starts + rng.integers(LOST_RUN[0], LOST_RUN[1] + 1, runs), consumed)
    depth = np.bincount(starts, minlength=consumed + 1) - np.bincount(ends, minlength=consumed + 1)
    return np.cumsum(depth[:consumed]) > 0


def _cumulative_acks(rng: np.random.Generator, ack_time: Int64Array, batch_size: Int32Array) -> _Acks:
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
    return _Acks(ends.astype(np.int64), batch_index, np.ones(len(ends), dtype=np.bool_), times)


def _individual_acks(
    rng: np.random.Generator, positions: Int64Array, ack_time: Int64Array, batch_size: Int32Array, now_ms: int
) -> list[_Acks]:
    """Individual acks of the entries at ``positions``: whole entries, batch indexes, a few duplicates."""
    by_index = (batch_size > 1) & (rng.random(len(positions)) < BY_INDEX_FRACTION)
    whole = ~by_index
    whole_rows = _Acks(
        positions[whole],
        np.full(int(whole.sum()), -1, dtype=np.int32),
        np.zeros(int(whole.sum()), dtype=np.bool_),
        ack_time[whole],
    )

    sizes = batch_size[by_index].astype(np.int64)
    every = rng.random(len(sizes)) < 1.0 - PARTIAL_BATCH_FRACTION
    total = int(sizes.sum())
    first = np.cumsum(sizes) - sizes
    index_rows = _Acks(
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


def _part_name(number: int) -> str:
    """File name of the ``number``-th part of a log."""
    return f"part-{number:05d}.parquet"


def _write_parts(directory: Path, tables: Iterator[pa.Table]) -> int:
    """Writes each table as the next ``part-NNNNN.parquet`` in ``directory``; returns the file count.

    One background thread writes (compression releases the GIL) while the caller draws the next
    tables; at most two writes wait, which bounds the memory they hold.
    """
    count = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate-write") as writer:
        pending: deque[Future[None]] = deque()
        for table in tables:
            path = directory / _part_name(count)
            pending.append(writer.submit(pq.write_table, table, path, compression=COMPRESSION))
            count += 1
            while len(pending) > 2:
                pending.popleft().result()
        for write in pending:
            write.result()
    return count
