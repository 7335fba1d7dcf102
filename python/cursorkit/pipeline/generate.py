"""Synthetic topic logs: a message log and an ack log shaped like a busy topic's, for the pipeline.

:func:`generate` writes ``out/messages/part-NNNNN.parquet`` and ``out/acks/part-NNNNN.parquet``
(zstd, at most ``rows_per_file`` rows each, so Spark reads them in parallel) with exactly the columns
of :mod:`cursorkit.pipeline.schema`. Everything is drawn with numpy's PCG64 from ``seed``: stream 0
draws the message log and stream ``1 + i`` the acks of subscription ``i``, so the same seed gives the
same tables, and adding a subscription leaves the message log and the other subscriptions unchanged.
All of it is vectorised; no Python loop runs per message.

The message log is drawn by :mod:`cursorkit.pipeline.generate_messages`, the ack log subscription
by subscription by :mod:`cursorkit.pipeline.generate_acks` (their docstrings say how).

With ``subscriptions=0`` the ack log is one Parquet file with the schema and no rows.
"""

from __future__ import annotations

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
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.pipeline.generate_acks import draw_acks
from cursorkit.pipeline.generate_messages import (
    MAX_KEYS,
    BoolArray,
    Int64Array,
    MessageColumns,
    draw_messages,
)
from cursorkit.pipeline.schema import ACK_COLUMNS, ACK_CUMULATIVE, ACK_INDIVIDUAL, MESSAGE_COLUMNS

__all__ = ["COMPRESSION", "GenerateSummary", "generate"]

MESSAGE_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in MESSAGE_COLUMNS])
"""Arrow schema of the written message log (non-null columns are marked so)."""
ACK_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in ACK_COLUMNS])
"""Arrow schema of the written ack log."""

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

    log = draw_messages(_stream(seed, 0), messages, ledgers, keys, delayed_fraction, batch_fraction, start_ms)
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


def _key_strings(key_id: Int64Array, key_null: BoolArray, keys: int) -> pa.Array:
    """``"key-000123"`` strings for ``key_id`` (null where ``key_null``), built by Arrow kernels."""
    width = max(6, len(str(keys - 1)))
    digits = pc.utf8_lpad(pc.cast(pa.array(key_id, mask=key_null), pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise("key-", digits, "")


def _message_tables(log: MessageColumns, keys: int, rows_per_file: int) -> Iterator[pa.Table]:
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
    log: MessageColumns, names: list[str], seed: int, now_ms: int, rows_per_file: int, counts: list[int]
) -> Iterator[pa.Table]:
    """The ack log, subscription after subscription, in tables of at most ``rows_per_file`` rows.

    Appends each subscription's row count to ``counts`` as it is drawn.
    """
    ack_types = pa.array([ACK_INDIVIDUAL, ACK_CUMULATIVE], pa.string())
    for i, name in enumerate(names):
        acks = draw_acks(_stream(seed, 1 + i), i, log, now_ms)
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
