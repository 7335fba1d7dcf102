"""Redelivery counts in a cursor znode (beyond Pulsar): fields 11-12 of cursorkit's record.

The counts travel as one zlib-compressed ``RedeliveryCounts`` snapshot inside field 100 of Pulsar's
``ManagedCursorInfo``, which Pulsar skips. They get at most a quarter of the znode's byte budget, so
they never crowd out the ack ranges: past it, the runs of the lowest positions are kept (the oldest
messages, nearest a dead-letter policy) and the cut is reported in the flush's result and in the
record (``redelivery_runs_left_out``).
"""

from __future__ import annotations

import zlib

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.store.redelivery_journal import JournalReport, inflate_counts
from cursorkit.errors import CorruptSnapshot
from cursorkit.proto import cursor_znode_pb2 as zpb

__all__ = ["budget_of", "encode_counts", "read_counts"]


def budget_of(max_znode_bytes: int) -> int:
    """The bytes the counts may take in a znode of ``max_znode_bytes``."""
    return max_znode_bytes // 4


def encode_counts(counts: RedeliveryCounts, budget: int) -> tuple[bytes, int]:
    """The compressed snapshot within ``budget`` bytes, and how many runs it leaves out."""
    whole = zlib.compress(counts.encode(), 1)
    total = counts.run_count
    if len(whole) <= budget:
        return whole, 0
    lo, hi = 0, total  # the most runs whose snapshot fits: lo fits, hi + 1 does not
    best = zlib.compress(counts.encode(first_runs=0), 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        blob = zlib.compress(counts.encode(first_runs=mid), 1)
        if len(blob) <= budget:
            lo, best = mid, blob
        else:
            hi = mid - 1
    return best, total - lo


def read_counts(record: zpb.CursorkitState | None, where: str) -> tuple[RedeliveryCounts, JournalReport]:
    """The counts a znode's record holds (none for a record without them); damage is reported, not raised."""
    report = JournalReport()
    counts = RedeliveryCounts()
    if record is None or not record.HasField("redelivery_counts"):
        report.created = True
        return counts, report
    try:
        counts.apply(inflate_counts(record.redelivery_counts, counts.max_runs))
    except CorruptSnapshot as e:
        report.problems.append(f"{where}: redelivery counts do not decode ({e}); counting starts again")
        return RedeliveryCounts(), report
    report.records = 1
    if record.redelivery_runs_left_out:
        report.problems.append(
            f"{where}: {record.redelivery_runs_left_out} runs of redelivery counts were left out "
            "of the znode (past its budget): those messages count from 0 again"
        )
    counts.take_delta()  # as loaded: nothing to write yet
    return counts, report
