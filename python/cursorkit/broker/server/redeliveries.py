"""A subscription's durable redelivery counts (``--durable-redelivery-counts``, beyond Pulsar).

Pulsar counts redeliveries in memory: a restart, an unload, a hand-over or the last consumer
leaving resets them, so a client's dead-letter policy may never fire (pulsar-site#1117). Here the
counts are a :class:`~cursorkit.ackstate.store.redelivery_journal.RedeliveryJournal` in the
subscription's directory, and they are what MESSAGE frames carry:

- a nack or a redelivery request raises the count of every message it takes back from the
  consumer (as Pulsar); so does a consumer whose connection is lost holding messages (a crash:
  Pulsar does not count those, so a message that kills its consumers is never dead-lettered,
  apache/pulsar#5881). A consumer that closes, a seek's or a hand-over's reconnect, a broker
  stopping: no raise;
- the raised counts are durable before any message is sent after them (write-ahead), so a count
  a client saw never goes back after a crash;
- a seek starts counting again; counts of acknowledged messages are pruned at each cursor flush.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cursorkit import Cursor, Position
from cursorkit.ackstate.store.redelivery_journal import RedeliveryJournal
from cursorkit.errors import BudgetExceeded, PersistFailed

__all__ = ["JOURNAL_NAME", "DurableCounts"]

log = logging.getLogger("cursorkit.broker")

JOURNAL_NAME = "redeliveries"
"""The journal's file name in the subscription's directory."""


def _columns(positions: Sequence[Position]) -> tuple[np.ndarray, np.ndarray]:
    n = len(positions)
    ls = np.fromiter((p.ledger_id for p in positions), np.int64, n)
    es = np.fromiter((p.entry_id for p in positions), np.int64, n)
    return ls, es


class DurableCounts:
    """The counts of one subscription, journaled; every method runs on the broker's event loop."""

    def __init__(self, directory: Path, cursor: Cursor, *, sync: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.journal = RedeliveryJournal.open(directory / JOURNAL_NAME, sync=sync)
        self.counts = self.journal.counts
        if self.journal.report.damaged:
            log.warning(
                "redelivery counts damaged, some may be lower: %s", "; ".join(self.journal.report.problems)
            )
        self.counts.prune(cursor)
        self.journal.compact()  # a new owner's file: a writer still holding the old one writes into nothing
        self.dirty = False
        self.not_counted = 0
        """Raises refused past the counts' budget (those messages keep their in-memory count)."""

    def counts_for(self, positions: Sequence[Position]) -> list[int] | None:
        """The counts a dispatch round sends with ``positions``; None when no message has one."""
        if not len(self.counts):
            return None
        ls, es = _columns(positions)
        counts: list[int] = self.counts.get_many(ls, es).tolist()
        return counts

    def count(self, position: Position) -> int:
        """One message's count."""
        return int(self.counts.get(position))

    def raise_counts(self, positions: Sequence[Position]) -> None:
        """One more redelivery of each of ``positions`` (a position named twice counts once)."""
        if not positions:
            return
        ls, es = _columns(positions)
        try:
            self.counts.set_many(ls, es, self.counts.get_many(ls, es).astype(np.int64) + 1)
        except BudgetExceeded as e:
            self.not_counted += len(positions)
            log.warning("redelivery counts not raised durably: %s", e)
            return
        self.dirty = True

    def write_ahead(self) -> None:
        """Makes raised counts durable (before the messages carrying them go out)."""
        self.dirty = False
        try:
            self.journal.flush()
        except PersistFailed as e:  # sent anyway: the next flush writes a whole snapshot
            log.warning("redelivery counts not persisted: %s", e)

    def prune(self, cursor: Cursor) -> None:
        """Forgets the counts of what the cursor acknowledged (a compaction leaves them out)."""
        if len(self.counts):
            self.counts.prune(cursor)

    def reset(self) -> None:
        """A seek: every count starts again, durably."""
        self.dirty = False
        self.journal.reset()

    def close(self) -> None:
        """Persists what changed and releases the journal."""
        try:
            self.journal.flush()
        finally:
            self.journal.close()
