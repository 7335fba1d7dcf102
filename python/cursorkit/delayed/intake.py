"""``Intake``: where a new index goes (PIP-195's rule), and the seal of a full tail.

When an index of a later ledger arrives and the tail holds ``min_index_count_per_bucket`` indexes,
the tail is sealed into an immutable bucket cut into time-ordered segments: its queue is swapped
out in O(1), segment 1 is loaded, and the snapshot is written in a job.
"""

from __future__ import annotations

from cursorkit._core import DelayQueue
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import ImmutableBucket, Int64Array
from cursorkit.delayed.lifecycle import BucketLifecycle
from cursorkit.delayed.merge import Merges
from cursorkit.delayed.parts import TrackerParts


class Intake:
    """Places new indexes in the tail or the shared queue (callers hold the tracker's lock)."""

    def __init__(
        self,
        *,
        min_index_count_per_bucket: int,
        parts: TrackerParts,
        lifecycle: BucketLifecycle,
        merges: Merges,
    ) -> None:
        self._parts = parts
        self._min_count = min_index_count_per_bucket
        self._lifecycle = lifecycle
        self._merges = merges

    def queue_for(self, ledger: int) -> DelayQueue:
        """Where a new index of ``ledger`` goes (PIP-195's rule), sealing the tail first if due.

        The tail takes ledgers at or after its end that no bucket covers, and (beyond Pulsar) only
        above every range ever sealed, so no seal can enclose a bucket it did not contain (a later
        recovery would discard that bucket as a stale merge source). Everything else waits in the
        shared queue.
        """
        covering = self._parts.sealed.covering(ledger)
        if covering is None and ledger > self._parts.tail.end:
            self._maybe_seal()
        if covering is None and ledger >= self._parts.tail.end and ledger > self._parts.sealed.end:
            return self._parts.tail.take(ledger)
        return self._parts.queue.queue

    def add_run(self, ledger: int, ts: Int64Array, ls: Int64Array, es: Int64Array) -> None:
        """Tracks indexes of one ledger; ones already tracked count as duplicates."""
        self.queue_for(ledger).add_many(ts, ls, es)
        new = self._parts.positions.add_many(ls, es)
        self._parts.tally.add("added", new)
        self._parts.tally.add("duplicates", len(ls) - new)

    def _maybe_seal(self) -> None:
        n = len(self._parts.tail)
        if n == 0 or n < self._min_count:
            return
        ts, ls, es = self._parts.tail.queue.drain()
        live = self._parts.positions.contains_many(ls, es)  # trimmed (acked) indexes stay out of the snapshot
        if not live.all():
            ts, ls, es = ts[live], ls[live], es[live]
        if len(ts) == 0:
            self._parts.tail.reset()
            return
        segs = self._parts.io.cut(ts, ls, es)
        b = ImmutableBucket(
            self._parts.tail.start,
            self._parts.tail.end,
            last_segment_entry_id=len(segs),
            number_bucket_delayed_messages=len(ts),
            first_schedule_timestamps=snapshot.first_timestamps(segs),
            pending=segs,
        )
        self._parts.tail.reset()
        self._parts.sealed.insert(b)
        self._parts.queue.push(b, 1, *segs.segment(0), self._parts.positions)
        self._parts.tally.add("seals")
        self._lifecycle.submit_create(b, segs)
        self._merges.request()
