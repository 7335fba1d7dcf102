"""A subscription's durable redelivery counts (``--durable-redelivery-counts``, beyond Pulsar).

Pulsar counts redeliveries in memory: a restart, an unload, a hand-over or the last consumer
leaving resets them, so a client's dead-letter policy may never fire (pulsar-site#1117). Here the
dispatcher still owns the counts (it raises them and sends them in MESSAGE frames), with its
journal on; this module keeps the cursor store's copy (``CursorStore.redelivery_counts``: a journal
beside a file store's log, or the cursor znode's record):

- a nack or a redelivery request raises the count of every message it takes back from the
  consumer (as Pulsar); so does a consumer whose connection is lost holding messages (a crash:
  Pulsar does not count those, so a message that kills its consumers is never dead-lettered,
  apache/pulsar#5881). A consumer that closes, a seek's or a hand-over's reconnect, a broker
  stopping: no raise. The raises the dispatcher journaled are recorded here (:meth:`record`);
- the recorded counts are flushed with the cursor before any message is sent after them
  (write-ahead), so a count a client saw never goes back after a crash;
- entries read from the log get their stored counts back in the dispatcher (:meth:`seed`, one
  lookup per read), so after a restart or a new dispatcher the counts go on from where they were;
- a seek starts counting again; counts of acknowledged messages are pruned at each cursor flush.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from cursorkit import Cursor, CursorStore, Position
from cursorkit.ackstate import RaisedCounts
from cursorkit.broker.server.dispatch.model import CountOwner
from cursorkit.errors import BudgetExceeded, PersistFailed

__all__ = ["DurableCounts"]

log = logging.getLogger("cursorkit.broker")


def _columns(positions: Sequence[Position]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    n = len(positions)
    ls = np.fromiter((p.ledger_id for p in positions), np.int64, n)
    es = np.fromiter((p.entry_id for p in positions), np.int64, n)
    return ls, es


class DurableCounts:
    """The counts of one subscription, kept by its cursor store; every method runs on the event loop."""

    def __init__(self, store: CursorStore, cursor: Cursor) -> None:
        self.store = store
        self.cursor = cursor
        self.counts = store.redelivery_counts
        report = store.redelivery_report
        if report.damaged:
            log.warning("redelivery counts damaged, some may be lower: %s", "; ".join(report.problems))
        self.counts.prune(cursor)
        self.dirty = False
        """Counts raised since the last write-ahead."""
        self.not_counted = 0
        """Raises refused past the counts' budget (those messages keep their in-memory count)."""

    def seed(self, dispatcher: CountOwner, positions: Sequence[Position]) -> None:
        """Gives the dispatcher the stored counts of entries just read (one lookup for the read)."""
        if not len(self.counts) or not positions:
            return
        ls, es = _columns(positions)
        ns = self.counts.get_many(ls, es)
        (some,) = ns.nonzero()
        if len(some):
            dispatcher.seed_redelivery_counts(ls[some], es[some], ns[some].astype(np.int64))

    def record(self, raised: RaisedCounts) -> None:
        """Keeps the counts the dispatcher raised (written ahead of the next send)."""
        if not raised:
            return
        try:
            self.counts.set_many(raised.ledger_ids, raised.entry_ids, raised.counts.astype(np.int64))
        except BudgetExceeded as e:
            self.not_counted += len(raised.ledger_ids)
            log.warning("redelivery counts not raised durably: %s", e)
            return
        self.dirty = True

    def write_ahead(self) -> None:
        """Makes raised counts durable with the cursor (before the messages carrying them go out)."""
        self.dirty = False
        try:
            self.store.flush(self.cursor)
        except PersistFailed as e:  # sent anyway: the next flush writes them
            log.warning("redelivery counts not persisted: %s", e)

    def prune(self) -> None:
        """Forgets the counts of what the cursor acknowledged."""
        if len(self.counts):
            self.counts.prune(self.cursor)

    def reset(self) -> None:
        """A seek: every count starts again (durable at the next write-ahead)."""
        self.counts.clear()
        self.dirty = True
