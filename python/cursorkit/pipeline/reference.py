"""A single-process rebuild of the same logs, written the plain way, to check the Spark job against.

It reads the logs with pyarrow, replays every ack one by one in ack-time order through the library's
``Cursor`` (ack, ack_batch_index, ack_cumulative), and builds the delayed index with Python sorting.
Slow but obvious: ``cursorkit demo`` and the tests compare the Spark outputs with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from cursorkit._core import Position
from cursorkit.ackstate import Cursor
from cursorkit.pipeline import schema
from cursorkit.pipeline.inputs import log_format

__all__ = ["ReferenceBucket", "ReferenceRebuild", "rebuild_reference", "replay_acks", "replay_redeliveries"]


@dataclass(frozen=True, slots=True)
class ReferenceBucket:
    """A bucket as the plain computation sees it: ledger range and sorted (at, ledger, entry) rows."""

    start_ledger_id: int
    end_ledger_id: int
    indexes: list[tuple[int, int, int]]


@dataclass(slots=True)
class ReferenceRebuild:
    """What the plain computation produced."""

    now_ms: int
    ledger_sizes: dict[int, int]
    cursors: dict[str, Cursor] = field(default_factory=dict)
    buckets: list[ReferenceBucket] = field(default_factory=list)
    not_yet_due: list[tuple[int, int, int]] = field(default_factory=list)
    """Every indexed delayed message, sorted by (deliver_at, ledger, entry)."""


def _read(path: str | os.PathLike[str]) -> pa.Table:
    return ds.dataset(Path(path), format=log_format(os.fspath(path))).to_table()


def rebuild_reference(
    messages: str | os.PathLike[str],
    acks: str | os.PathLike[str] | None,
    *,
    now_ms: int | None = None,
    min_index_count_per_bucket: int = 50_000,
    max_delay_ms: int = 365 * 24 * 3_600_000,
) -> ReferenceRebuild:
    """The cursors and delayed-index buckets of the logs, computed in one process."""
    msgs = _read(messages).to_pydict()
    ledgers = msgs["ledger_id"]
    entries = msgs["entry_id"]
    publish = msgs["publish_time"]
    deliver = msgs.get("deliver_at", [None] * len(ledgers))
    batch = msgs.get("batch_size", [1] * len(ledgers))
    now = now_ms if now_ms is not None else (max(publish) if publish else 0)
    sizes: dict[int, int] = {}
    size_of: dict[tuple[int, int], int] = {}
    for ledger, entry, b in zip(ledgers, entries, batch, strict=True):
        sizes[ledger] = max(sizes.get(ledger, 0), entry + 1)
        size_of[(ledger, entry)] = b if b is not None else 1
    out = ReferenceRebuild(now_ms=now, ledger_sizes=sizes)
    if acks is not None:
        out.cursors = replay_acks(_read(acks), now, sizes, size_of)
    rows: list[tuple[int, int, int]] = []
    for ledger, entry, pub, at in zip(ledgers, entries, publish, deliver, strict=True):
        if at is not None and at > pub and now < at <= now + max_delay_ms:
            rows.append((at, ledger, entry))
    per_ledger: dict[int, int] = {}
    for _, ledger, _ in rows:
        per_ledger[ledger] = per_ledger.get(ledger, 0) + 1
    ranges: list[tuple[int, int]] = []
    held = 0
    for ledger in sorted(per_ledger):
        if held >= min_index_count_per_bucket:
            held = 0
        if held == 0:
            ranges.append((ledger, ledger))
        ranges[-1] = (ranges[-1][0], ledger)
        held += per_ledger[ledger]
    cursors = list(out.cursors.values())
    for start, end in ranges:
        kept = sorted(
            r
            for r in rows
            if start <= r[1] <= end
            and not (cursors and all(c.is_acked(Position(r[1], r[2])) for c in cursors))
        )
        if kept:
            out.buckets.append(ReferenceBucket(start, end, kept))
    out.not_yet_due = sorted(r for b in out.buckets for r in b.indexes)
    return out


def replay_acks(
    table: pa.Table, now: int, sizes: Mapping[int, int], size_of: Mapping[tuple[int, int], int]
) -> dict[str, Cursor]:
    """Each subscription's cursor after its acks, applied one by one in ack-time order.

    Acks after ``now`` and of positions not in ``size_of`` (position -> batch size) are skipped.
    """
    acks = table.to_pydict()
    n = table.num_rows
    batch_index = acks.get("batch_index", [None] * n)
    order = np.argsort(np.asarray(acks["ack_time"], dtype=np.int64), kind="stable")
    first = min(sizes) if sizes else 0
    cursors: dict[str, Cursor] = {}
    for i in order.tolist():
        sub = acks["subscription"][i]
        if acks["ack_time"][i] > now:
            continue
        key = (acks["ledger_id"][i], acks["entry_id"][i])
        if key not in size_of:
            continue
        cursor = cursors.get(sub)
        if cursor is None:
            cursor = cursors[sub] = Cursor(Position(first, -1), name=sub, ledger_sizes=dict(sizes))
        p = Position(*key)
        index = batch_index[i]
        kind = str(acks["ack_type"][i]).lower()
        if kind == schema.ACK_NACK:  # a redelivery, not an ack: see replay_redeliveries
            continue
        if kind == schema.ACK_CUMULATIVE:  # in any case, as the job reads it
            if index is None:
                cursor.ack_cumulative(p)
            else:
                cursor.ack_cumulative(p, index, size_of[key])
        elif index is None:
            cursor.ack(p)
        else:
            cursor.ack_batch_index(p, index, size_of[key])
    return dict(sorted(cursors.items()))


def replay_redeliveries(
    table: pa.Table, now: int, size_of: Mapping[tuple[int, int], int], cursors: Mapping[str, Cursor]
) -> dict[str, dict[tuple[int, int], int]]:
    """Per subscription, the ``nack`` rows of each position its cursor has not acknowledged.

    Rows after ``now`` and of positions not in ``size_of`` are skipped, as the acks are.
    """
    acks = table.to_pydict()
    out: dict[str, dict[tuple[int, int], int]] = {}
    for i in range(table.num_rows):
        key = (acks["ledger_id"][i], acks["entry_id"][i])
        if (
            str(acks["ack_type"][i]).lower() != schema.ACK_NACK
            or acks["ack_time"][i] > now
            or key not in size_of
        ):
            continue
        sub = acks["subscription"][i]
        if cursors[sub].is_acked(Position(*key)):
            continue
        counts = out.setdefault(sub, {})
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(out.items()))
