"""``BucketLifecycle``: the jobs that make a sealed bucket durable, and its ends.

A snapshot is written before its property, and deleted before its property is removed, so every
step is idempotent and a crash leaves at worst an orphan that recovery adopts or deletes. A bucket
ends consumed (retired), downgraded (its snapshot could not be written) or lost (damaged).
"""

from __future__ import annotations

from cursorkit.delayed.bucket import ImmutableBucket, SegmentArrays
from cursorkit.delayed.damage import Damage
from cursorkit.delayed.parts import TrackerParts


class BucketLifecycle:
    """Writes, retires, downgrades and loses sealed buckets; I/O runs as jobs (callers hold the lock)."""

    def __init__(
        self,
        *,
        parts: TrackerParts,
        damage: Damage,
    ) -> None:
        self._parts = parts
        self._damage = damage

    def submit_create(self, b: ImmutableBucket, segs: SegmentArrays) -> None:
        """Queues the write of a just-sealed bucket's snapshot (``segs``: all its segments)."""
        self._parts.jobs.submit(lambda: self._create(b, segs))

    def _create(self, b: ImmutableBucket, segs: SegmentArrays) -> None:
        """Writes a sealed bucket's snapshot, then its property; either failing downgrades it."""
        try:
            bucket_id, length = self._parts.io.write(segs, b.key)
        except Exception:
            with self._parts.lock:
                self._downgrade(b)
            raise
        try:
            self._parts.props.apply({b.key: str(bucket_id)})
        except Exception:
            self._parts.io.delete_quietly(bucket_id)
            with self._parts.lock:
                self._downgrade(b)
            raise
        with self._parts.lock:
            gone = b.removed
            if not gone:  # created = durable and recorded
                b.bucket_id = bucket_id
                b.snapshot_length = length
                b.pending = None
                self._parts.sealed.snapshot_bytes += length
        if gone:  # consumed or cleared while being written
            self._parts.io.delete_quietly(bucket_id)
            self._parts.props.drop_if(b.key, str(bucket_id))

    def _downgrade(self, b: ImmutableBucket) -> None:
        """A snapshot that could not be written: its remaining segments go to the shared queue."""
        self._parts.tally.add("downgrades")
        if b.removed or b.pending is None:
            return
        for sid in range(b.current_segment_entry_id + 1, b.last_segment_entry_id + 1):
            ts, ls, es = b.pending.segment(sid - 1)
            live = self._parts.positions.contains_many(ls, es)
            self._parts.queue.queue.add_many(ts[live], ls[live], es[live])
        self._parts.sealed.remove(b)

    def retire(self, b: ImmutableBucket) -> None:
        """Drops a consumed (or trimmed) bucket; its snapshot, then its property, go in a job."""
        self._parts.sealed.remove(b)
        self._parts.jobs.submit(lambda: self.delete(b))

    def delete(self, b: ImmutableBucket) -> None:
        """Deletes a dropped bucket's snapshot, then its property (the job ``retire`` queues)."""
        with self._parts.lock:
            bucket_id = b.bucket_id
            if bucket_id is not None and b.snapshot_length:
                self._parts.sealed.snapshot_bytes -= b.snapshot_length
                b.snapshot_length = 0
        if bucket_id is None:
            return
        self._parts.io.delete(bucket_id)
        self._parts.props.drop_if(b.key, str(bucket_id))

    def lose(self, b: ImmutableBucket, reason: str) -> None:
        """Drops a bucket whose snapshot can no longer be read, and reports it.

        Its ledgers are untracked and handed back for replay from the cursor
        (``take_replay_ranges``); the snapshot is kept for inspection. The other buckets go on
        delivering in order: this one's barrier goes with it.
        """
        self._parts.sealed.remove(b)
        self._parts.positions.remove_ledgers(b.start_ledger_id, b.end_ledger_id)
        self._damage.owe(b.start_ledger_id, b.end_ledger_id)
        self._damage.report.damaged.append(f"{b.key} (snapshot {b.bucket_id}): {reason}")
        self._parts.tally.add("damaged")
        bucket_id = b.bucket_id
        if bucket_id is not None:
            self._parts.jobs.submit(lambda: self._damage.quarantine(b.key, bucket_id))
