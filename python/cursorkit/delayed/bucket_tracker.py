"""``BucketDelayedDeliveryTracker``: PIP-195's bucket-based delayed index with durable snapshots.

Indexes of not-yet-due messages go to a mutable tail bucket; when a message of a later ledger
arrives and the tail holds ``min_index_count_per_bucket`` indexes, the tail is sealed into an
immutable bucket cut into time-ordered segments. Only each bucket's earliest unconsumed segment is
in memory, in one shared queue; a segment's last index is a *barrier* past which nothing is popped
until that bucket's next segment is loaded, so delivery is in exact (deliver-at, ledger, entry)
order. After every change the tracker *settles*: untracked heads leave the queues and every bucket
whose loaded segment is used up gets its next one, so the shared queue's head is always the earliest
tracked index and ``has_message_available`` / ``next_delivery_time`` are exact at every moment (a
broker that arms its timer from them never waits while something is due). One index (a
``RangeSet``) of every tracked position answers ``contains_message`` and deduplicates. Sealing
swaps queues in O(1) and pushes segment 1; encoding, writing, merging and deleting snapshots run as
jobs off the add path (a worker thread, or ``maintenance()``).

The tracker is a façade over its parts, each owning its state: ``TrackedPositions`` (the index),
``MutableBucket`` (the tail), ``SegmentQueue`` (loaded segments and barriers), ``SealedBuckets``,
``JobRunner``; ``Intake``, ``Delivery``, ``BucketLifecycle``, ``Merges`` and ``Recovery`` work on
the parts they are handed as one ``TrackerParts`` bundle.

Snapshot ids are recorded in the cursor properties as ``#pulsar.internal.delayed.bucket_<s>_<e>``;
a snapshot is written before its property, and deleted before its property is removed, so every
step is idempotent and a crash leaves at worst an orphan that recovery adopts or deletes.
"""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from typing import Any

import numpy as np

from cursorkit._core import Position
from cursorkit.delayed.bucket import ImmutableBucket, Int64Array
from cursorkit.delayed.bucket_props import BucketProperties
from cursorkit.delayed.clock import I64_MAX, Clock, TrackerClock
from cursorkit.delayed.config import BucketTrackerConfig
from cursorkit.delayed.counters import BucketCounters, Tally
from cursorkit.delayed.damage import Damage
from cursorkit.delayed.delivery import Delivery
from cursorkit.delayed.intake import Intake
from cursorkit.delayed.lifecycle import BucketLifecycle
from cursorkit.delayed.merge import Merges
from cursorkit.delayed.metrics import TrackerFigures
from cursorkit.delayed.mutable_bucket import MutableBucket
from cursorkit.delayed.parts import TrackerParts
from cursorkit.delayed.positions import TrackedPositions
from cursorkit.delayed.recovery import Recovery
from cursorkit.delayed.recovery_report import RecoveryReport
from cursorkit.delayed.sealed import SealedBuckets
from cursorkit.delayed.segment_queue import SegmentQueue
from cursorkit.delayed.snapshot_io import SnapshotIO
from cursorkit.delayed.storage.api import BucketSnapshotStorage
from cursorkit.delayed.tail_snapshot import TailSnapshot
from cursorkit.delayed.worker import JobRunner
from cursorkit.errors import InvalidArgument, InvalidInputType, TrackerClosed


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidInputType(f"{what} must be an int, got {type(value).__name__}")
    v = int(value)
    if not -(2**63) <= v <= I64_MAX:
        raise InvalidArgument(f"{what} {v} does not fit in a signed 64-bit integer")
    return v


class BucketDelayedDeliveryTracker:
    """PIP-195's delayed index for one subscription (or one topic, through ``SharedDelayedIndex``).

    Construction starts the storage and recovers whatever the cursor properties record (see
    ``recovery_report``); ``close()`` closes the storage too unless ``close_storage=False`` (a
    storage shared by several trackers). ``clock`` returns ms; ``background=False`` runs snapshot
    jobs only in ``maintenance()``.
    """

    def __init__(
        self,
        storage: BucketSnapshotStorage,
        cursor_properties: MutableMapping[str, str] | None = None,
        *,
        clock: Clock | None = None,
        topic: str = "topic",
        cursor: str = "subscription",
        background: bool = True,
        mark_delete: Position | None = None,
        close_storage: bool = True,
        config: BucketTrackerConfig | None = None,
        **settings: Any,
    ) -> None:
        self.config = config if config is not None else BucketTrackerConfig(**settings)
        if config is not None and settings:
            raise InvalidArgument("pass settings either as config= or as keywords, not both")
        self.storage = storage
        self._close_storage = close_storage
        self.topic = topic
        self.cursor = cursor
        self._props = BucketProperties(cursor_properties if cursor_properties is not None else {})
        self._clock = TrackerClock(clock, tick_ms=self.config.tick_time_ms, strict=self.config.strict)
        self._lock = threading.RLock()
        self._closed = False
        self._mark_delete: Position | None = mark_delete
        self._positions = TrackedPositions()
        self._tail = MutableBucket()
        self._queue = SegmentQueue()
        self._sealed = SealedBuckets()
        self._tally = Tally()
        self._io = SnapshotIO(storage, self.config, topic=topic, cursor=cursor)
        self.op_stats = self._io.op_stats
        self._jobs = JobRunner(background=background, name=f"cursorkit-delayed-{topic}-{cursor}")
        self.storage.start()
        self.recovery_report = RecoveryReport()
        self._damage = Damage(self.recovery_report, self._props, self._io)
        self._tail_snapshot = TailSnapshot(self._io, self._props)
        parts = TrackerParts(
            lock=self._lock,
            jobs=self._jobs,
            io=self._io,
            props=self._props,
            positions=self._positions,
            tail=self._tail,
            queue=self._queue,
            sealed=self._sealed,
            tally=self._tally,
        )
        self._lifecycle = BucketLifecycle(parts=parts, damage=self._damage)
        self._delivery = Delivery(parts=parts, lifecycle=self._lifecycle)
        merges = Merges(
            max_num_buckets=self.config.max_num_buckets,
            closed=lambda: self._closed,
            parts=parts,
            delivery=self._delivery,
        )
        self._intake = Intake(
            min_index_count_per_bucket=self.config.min_index_count_per_bucket,
            parts=parts,
            lifecycle=self._lifecycle,
            merges=merges,
        )
        Recovery(
            cutoff=self._clock.due_cutoff(),
            mark_delete=mark_delete,
            parts=parts,
            intake=self._intake,
            delivery=self._delivery,
            tail_snapshot=self._tail_snapshot,
            damage=self._damage,
        ).run()

    @classmethod
    def recover(
        cls,
        *,
        storage: BucketSnapshotStorage,
        cursor_properties: MutableMapping[str, str],
        **kwargs: Any,
    ) -> BucketDelayedDeliveryTracker:
        """A tracker rebuilt from ``storage`` and the bucket properties (same as the constructor)."""
        return cls(storage, cursor_properties, **kwargs)

    # --- time --------------------------------------------------------------------------------------

    def reset_tick_time(self, tick_time_ms: int) -> None:
        """Changes the tick (a topic policy update)."""
        tick = _as_int(tick_time_ms, "tick_time_ms")
        if tick < 0:
            raise InvalidArgument(f"tick_time_ms must be >= 0, got {tick}")
        with self._lock:
            self._clock.tick_ms = tick

    @property
    def tick_time_ms(self) -> int:
        """The current tick."""
        return self._clock.tick_ms

    def now(self) -> int:
        """The tracker's clock (ms)."""
        return self._clock.now()

    # --- the add path ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise TrackerClosed(f"delayed tracker {self.topic}/{self.cursor} is closed")

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """Tracks a message read by the dispatcher; False means it is due (or acked): dispatch it now."""
        at = _as_int(deliver_at, "deliver_at")
        self._jobs.wait_below(self.config.max_pending_snapshots)
        with self._lock:
            self._check_open()
            tracked = self._positions.contains(ledger_id, entry_id)  # validates the position first
            if at < 0 or at <= self._clock.due_cutoff():
                if tracked:  # [main]: an expired message is untracked as well
                    self._positions.remove(ledger_id, entry_id)
                    self._delivery.settle()
                self._tally.add("rejected_due")
                return False
            md = self._mark_delete
            if md is not None and (ledger_id, entry_id) <= (md.ledger_id, md.entry_id):
                self._tally.add("rejected_acked")
                return False
            if tracked:
                self._tally.add("duplicates")
                return True
            self._intake.queue_for(ledger_id).add(at, ledger_id, entry_id)
            self._positions.add(ledger_id, entry_id)
            self._tally.add("added")
            return True

    def add_many(
        self, ledger_ids: Any, entry_ids: Any, deliver_at: Any
    ) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """``add_message`` over columns; returns the tracked mask (False = dispatch now).

        Runs of one ledger are handled in bulk, so input in ledger order (as a dispatcher reads it)
        costs a few Rust calls per ledger.
        """
        ls = np.ascontiguousarray(ledger_ids, dtype=np.int64)
        es = np.ascontiguousarray(entry_ids, dtype=np.int64)
        ts = np.ascontiguousarray(deliver_at, dtype=np.int64)
        if not (ls.ndim == es.ndim == ts.ndim == 1) or not (len(ls) == len(es) == len(ts)):
            raise InvalidArgument(
                "ledger_ids, entry_ids and deliver_at must be 1-D of one length, "
                f"got {ls.shape}, {es.shape}, {ts.shape}"
            )
        self._jobs.wait_below(self.config.max_pending_snapshots)
        with self._lock:
            self._check_open()
            present = self._positions.contains_many(ls, es)  # validates every position first
            due = (ts < 0) | (ts <= self._clock.due_cutoff())
            out = ~due
            expired = due & present
            if expired.any():
                self._positions.remove_many(ls[expired], es[expired])
                self._delivery.settle()
            self._tally.add("rejected_due", int(due.sum()))
            md = self._mark_delete
            if md is not None:
                acked = ~due & ((ls < md.ledger_id) | ((ls == md.ledger_id) & (es <= md.entry_id)))
                out &= ~acked
                self._tally.add("rejected_acked", int(acked.sum()))
            fresh = out & ~present
            self._tally.add("duplicates", int((out & present).sum()))
            idx = np.flatnonzero(fresh)
            if len(idx):
                cuts = np.flatnonzero(np.diff(ls[idx])) + 1
                for run in np.split(idx, cuts):
                    self._intake.add_run(int(ls[run[0]]), ts[run], ls[run], es[run])
            return out

    # --- the delivery path -----------------------------------------------------------------------------

    def has_message_available(self) -> bool:
        """Whether a tracked message is due now (a due tail index counts too)."""
        with self._lock:
            self._check_open()
            if self._positions.count == 0:
                return False
            nxt = self._delivery.next_time()
            return nxt is not None and nxt <= self._clock.due_cutoff()

    def next_delivery_time(self) -> int | None:
        """Earliest deliver-at of any tracked message (for arming a timer), or None when none is."""
        with self._lock:
            self._check_open()
            return self._delivery.next_time() if self._positions.count else None

    def get_scheduled_messages(self, max_messages: int) -> Int64Array:
        """Up to ``max_messages`` due messages as (ledger, entry) rows sorted by position.

        They leave in deliver-at order (the sort is of the returned batch only); each is untracked.
        """
        limit_n = _as_int(max_messages, "max_messages")
        if limit_n < 0:
            raise InvalidArgument(f"max_messages must be >= 0, got {limit_n}")
        with self._lock:
            self._check_open()
            if not self._positions.count:  # the dispatcher asks every round: nothing tracked is cheap
                return np.empty((0, 2), dtype=np.int64)
            return self._delivery.pop_due(self._clock.due_cutoff(), limit_n)

    # --- damage, jobs ----------------------------------------------------------------------------------

    def take_replay_ranges(self) -> list[tuple[int, int]]:
        """Ledger ranges (inclusive) whose delayed messages were lost to damage since the last call.

        Their positions are no longer tracked: the dispatcher reads them again from the cursor and
        adds them anew (at-least-once). Damage found at recovery is included.
        """
        with self._lock:
            return self._damage.take()

    def discard_damaged(self) -> list[int]:
        """Deletes the snapshots kept for inspection and their properties; returns their ids."""
        return self._damage.discard()

    def maintenance(self) -> None:
        """Runs (or, with a worker thread, waits for) every queued snapshot job."""
        self._jobs.run_pending()

    # --- trimming, tail persistence, clear, close ---------------------------------------------------

    def trim(self, mark_delete: Position) -> int:
        """Forgets indexes at or below ``mark_delete`` (they are acked); returns how many.

        Buckets wholly below the mark-delete ledger are retired and their snapshots deleted; later
        adds at or below it are refused (counted as ``rejected_acked``).
        """
        with self._lock:
            self._check_open()
            self._mark_delete = mark_delete
            removed = self._positions.remove_at_most(mark_delete.ledger_id, mark_delete.entry_id)
            self._tail.queue.remove_ledgers_below(mark_delete.ledger_id)
            self._queue.queue.remove_ledgers_below(mark_delete.ledger_id)
            for b in [b for b in self._sealed if b.end_ledger_id < mark_delete.ledger_id]:
                self._lifecycle.retire(b)
            self._delivery.settle()
            return removed

    def checkpoint_tail(self) -> None:
        """Persists the mutable tail (beyond Pulsar) so a restart recovers it instead of replaying it.

        The write is a job like a seal's: call ``maintenance()`` to wait for it.
        """
        with self._lock:
            self._check_open()
            ts, ls, es = self._tail.queue.drain()
            self._tail.queue.add_many(ts, ls, es)
            key = self._tail.key
        self._jobs.submit(lambda: self._tail_snapshot.write(ts, ls, es, key))

    def clear(self) -> None:
        """Forgets every index and deletes every snapshot and bucket property (a cleared backlog)."""
        self._jobs.run_pending()
        with self._lock:
            self._check_open()
            doomed = self._sealed.as_list()
            for b in doomed:
                self._sealed.remove(b)
            self._positions.clear()
            self._tail.queue.clear()
            self._queue.clear()
            self._tail.reset()
        for b in doomed:
            self._lifecycle.delete(b)
        self._tail_snapshot.drop()
        with self._lock:
            self._sealed.snapshot_bytes = 0

    def close(self) -> None:
        """Finishes queued snapshot jobs (and persists the tail if configured); snapshots are kept."""
        with self._lock:
            if self._closed:
                return
        if self.config.persist_mutable_tail:
            self.checkpoint_tail()
        self._jobs.close()
        with self._lock:
            self._closed = True
            self._tail.queue.clear()
            self._queue.clear()
        if self._close_storage:
            self.storage.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    # --- state --------------------------------------------------------------------------------------

    def contains_message(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is tracked (the dispatcher's skip condition when reading)."""
        with self._lock:
            return self._positions.contains(ledger_id, entry_id)

    @property
    def number_of_delayed_messages(self) -> int:
        """Distinct positions tracked (tail, loaded and unloaded segments)."""
        return self._positions.count

    @property
    def buffer_memory_usage(self) -> int:
        """Bytes of the in-memory queues and the position index (Pulsar counts only the queues)."""
        with self._lock:
            return self._queues_memory() + self._positions.memory_usage()

    def _queues_memory(self) -> int:
        return self._tail.queue.memory_usage() + self._queue.queue.memory_usage()

    @property
    def immutable_buckets(self) -> list[ImmutableBucket]:
        """The sealed buckets in ledger order (live objects: read, do not change)."""
        with self._lock:
            return self._sealed.as_list()

    @property
    def cursor_properties(self) -> MutableMapping[str, str]:
        """The cursor properties the tracker records its snapshots in."""
        return self._props.store

    @property
    def mutable_bucket_range(self) -> tuple[int, int]:
        """``(start, end)`` ledgers of the tail bucket; (-1, -1) when empty."""
        return self._tail.range

    def should_pause_all_deliveries(self) -> bool:
        """Always False: fixed-delay detection is the in-memory tracker's (as in Pulsar)."""
        return False

    def counters(self) -> BucketCounters:
        """What the tracker has done so far."""
        with self._lock:
            return self._tally.snapshot()

    def metric_figures(self) -> TrackerFigures:
        """Figures for ``DelayedDeliveryCollector``."""
        with self._lock:
            return TrackerFigures(
                delayed_messages=self._positions.count,
                buffer_memory_usage=self._queues_memory(),
                bucket_total=len(self._sealed) + 1,
                loaded_indexes=len(self._tail) + len(self._queue.queue),
                snapshot_size_bytes=self._sealed.snapshot_bytes,
                op_stats=self.op_stats,
                damaged_buckets=self._tally["damaged"],
            )

    def __repr__(self) -> str:
        return (
            f"<BucketDelayedDeliveryTracker {self.topic}/{self.cursor} delayed={self._positions.count} "
            f"buckets={len(self._sealed)} tail={len(self._tail)} loaded={len(self._queue.queue)}>"
        )
