"""The *index* stage: the message log folded into per-ledger entry bitmaps, checked and counted.

Positions must be unique and each ledger's entries dense; delayed messages are counted by when they
fall due, and the message keys' slots are histogrammed for the Key_Shared load figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from cursorkit._core import RangeSet
from cursorkit.pipeline.input_problems import duplicate_error, gap_error, raise_problems
from cursorkit.pipeline.partitions.index import INDEX_SCHEMA, SLOTS, index_messages
from cursorkit.pipeline.partitions.problems import Problems
from cursorkit.pipeline.stages import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cursorkit.pipeline.rebuild_config import RebuildConfig

__all__ = ["MessageIndex", "dense_sizes", "fold_message_log", "merge_index_rows"]


@dataclass(slots=True)
class MessageIndex:
    """The message log folded: positions, sizes and counts the later stages need."""

    positions: RangeSet
    sizes: dict[int, int]
    not_yet_due: dict[int, int]
    rows: int
    delayed: int
    due: int
    beyond: int
    hours: dict[int, int]
    range_slots: np.ndarray[Any, np.dtype[np.int64]]
    consistent_slots: np.ndarray[Any, np.dtype[np.int64]]
    batch_entries: int


def fold_message_log(msgs: DataFrame, now: int, cfg: RebuildConfig, source: str) -> MessageIndex:
    """The message log folded and checked: unique positions, dense ledgers (else ``InvalidInput``)."""
    fn = partial(index_messages, now_ms=now, max_delay_ms=cfg.max_delay_ms)
    table = msgs.mapInArrow(fn, spark_schema(INDEX_SCHEMA)).toArrow()
    index, problems = merge_index_rows(table.to_pylist())
    raise_problems(problems, "message", source)
    valid = index.positions.total_cardinality()
    counted = index.rows - sum(problems.counts.values())
    if valid != counted:  # a position repeated across partitions
        raise duplicate_error(msgs, source, counted - valid)
    sizes, gap = dense_sizes(index.positions)
    if gap is not None:
        raise gap_error(source, gap)
    index.sizes = sizes
    return index


def merge_index_rows(parts: Iterable[Mapping[str, Any]]) -> tuple[MessageIndex, Problems]:
    """Merges ``index_messages`` rows (any partitioning, any order) into one topic's index.

    ``sizes`` is left empty (see :func:`dense_sizes`); rows whose slot histograms are None add none.
    """
    positions = RangeSet()
    nyd: dict[int, int] = {}
    problems = Problems()
    rows = delayed = due = beyond = batch_entries = 0
    hours: dict[int, int] = {}
    range_slots = np.zeros(SLOTS, dtype=np.int64)
    consistent_slots = np.zeros(SLOTS, dtype=np.int64)
    for r in parts:
        if r["ledger_id"] == -1:
            st = json.loads(r["stats"])
            problems.merge(st["problems"])
            rows += st["rows"]
            delayed += st["delayed"]
            due += st["delayed_due"]
            beyond += st["delayed_beyond_max_delay"]
            batch_entries += st["batch_entries"]
            for k, v in st["hours"].items():
                hours[int(k)] = hours.get(int(k), 0) + v
            if r["range_slots"] is not None:
                range_slots += np.frombuffer(r["range_slots"], dtype=np.int64)
                consistent_slots += np.frombuffer(r["consistent_slots"], dtype=np.int64)
            continue
        positions.union_ledger_bytes(r["ledger_id"], r["bitmap"])
        if r["not_yet_due"]:
            nyd[r["ledger_id"]] = nyd.get(r["ledger_id"], 0) + r["not_yet_due"]
    index = MessageIndex(
        positions, {}, nyd, rows, delayed, due, beyond, hours, range_slots, consistent_slots, batch_entries
    )
    return index, problems


def dense_sizes(positions: RangeSet) -> tuple[dict[int, int], tuple[int, int, int] | None]:
    """Entries per ledger, or the first ledger whose entries are not ``0..n-1``: (ledger, n, missing)."""
    sizes: dict[int, int] = {}
    for ledger in positions.ledgers():
        n = positions.cardinality(ledger, -1, ledger, 2**31)
        if positions.cardinality(ledger, -1, ledger, n - 1) != n:
            return sizes, (ledger, n, _first_missing(positions, ledger))
        sizes[ledger] = n
    return sizes, None


def _first_missing(positions: RangeSet, ledger: int) -> int:
    """The lowest entry id of ``ledger`` below its highest that the log does not hold."""
    expect = 0
    for lo_ledger, lo_entry, _, hi_entry in positions.ranges():
        if lo_ledger == ledger:
            if lo_entry + 1 != expect:
                return expect
            expect = hi_entry + 1
    return expect
