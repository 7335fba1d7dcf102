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

Snapshot ids are recorded in the cursor properties as ``#pulsar.internal.delayed.bucket_<s>_<e>``;
a snapshot is written before its property, and deleted before its property is removed, so every
step is idempotent and a crash leaves at worst an orphan that recovery adopts or deletes.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from cursorkit._core import DelayQueue, Position, RangeSet
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import (
    DAMAGED_PROPERTY_PREFIX,
    MUTABLE_TAIL_PROPERTY,
    ImmutableBucket,
    Int64Array,
    Key,
    SegmentArrays,
    parse_id,
)
from cursorkit.delayed.merge import MAX_MERGE_NUM, merge_buckets, select_merged_buckets
from cursorkit.delayed.metrics import OpStats, TrackerFigures
from cursorkit.delayed.recovery import RecoveryReport, recover_into
from cursorkit.delayed.storage.api import BucketSnapshotStorage
from cursorkit.delayed.worker import JobRunner
from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
    TrackerClosed,
)

I64_MAX = 2**63 - 1
MAX_ENTRY_ID = 2**32 - 1
T = TypeVar("T")
Clock = Callable[[], int]


def system_clock() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketTrackerConfig:
    """Settings of a bucket tracker, with Pulsar's defaults (its config names in each docstring)."""

    tick_time_ms: int = 1000
    """``delayedDeliveryTickTimeMillis``: non-strict trackers deliver up to one tick early."""
    strict: bool = False
    """``isDelayedDeliveryDeliverAtTimeStrict``: never deliver before deliver-at."""
    min_index_count_per_bucket: int = 50_000
    """``delayedDeliveryMinIndexCountPerBucket``: seal the tail at a ledger boundary past this."""
    max_time_step_per_segment_ms: int = 300_000
    """``delayedDeliveryMaxTimeStepPerBucketSnapshotSegmentSeconds`` (here in ms)."""
    max_indexes_per_segment: int = 5000
    """``delayedDeliveryMaxIndexesPerBucketSnapshotSegment``; -1 = unlimited."""
    max_num_buckets: int = -1
    """``delayedDeliveryMaxNumBuckets``: merge adjacent buckets beyond this; <= 0 disables."""
    persist_mutable_tail: bool = False
    """Beyond Pulsar: ``checkpoint_tail()`` and ``close()`` persist the tail (no replay after a restart)."""
    storage_retries: int = 3
    """Attempts per storage write/delete (Pulsar's MaxRetryTimes)."""
    max_pending_snapshots: int = 8
    """Snapshot jobs the worker may fall behind by before adds wait for it (bounds the memory of
    sealed buckets not yet written: ~1.2 MB each at 50,000 indexes)."""

    def __post_init__(self) -> None:
        for name in (
            "tick_time_ms",
            "min_index_count_per_bucket",
            "max_time_step_per_segment_ms",
            "storage_retries",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputType(f"{name} must be an int, got {type(value).__name__}")
            if value < (0 if name == "tick_time_ms" else 1):
                raise InvalidArgument(f"{name} must be positive, got {value}")
        if self.max_indexes_per_segment != -1 and self.max_indexes_per_segment < 1:
            raise InvalidArgument(
                f"max_indexes_per_segment must be -1 or positive, got {self.max_indexes_per_segment}"
            )


@dataclass(frozen=True, slots=True)
class BucketCounters:
    """What the tracker has done, for stats and tests."""

    added: int
    duplicates: int
    rejected_due: int
    rejected_acked: int
    delivered: int
    seals: int
    merges: int
    segment_loads: int
    downgrades: int
    damaged: int
    """Buckets lost to a damaged or vanished snapshot (at recovery or at a later segment load)."""


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidInputType(f"{what} must be an int, got {type(value).__name__}")
    v = int(value)
    if not -(2**63) <= v <= I64_MAX:
        raise InvalidArgument(f"{what} {v} does not fit in a signed 64-bit integer")
    return v


class _Properties:
    """The caller's cursor properties, with an atomic multi-key change where the store offers one."""

    def __init__(self, store: MutableMapping[str, str]) -> None:
        self.store = store

    def apply(self, set_items: Mapping[str, str], delete_keys: Iterable[str] = ()) -> None:
        apply = getattr(self.store, "apply", None)
        if callable(apply):
            apply(dict(set_items), list(delete_keys))
            return
        for k, v in set_items.items():
            self.store[k] = v
        for k in delete_keys:
            self.store.pop(k, None)

    def drop_if(self, key: str, value: str) -> None:
        """Deletes ``key`` only while it still names ``value`` (a newer bucket may own the key)."""
        if self.store.get(key) == value:
            self.apply({}, [key])


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
        self._props = _Properties(cursor_properties if cursor_properties is not None else {})
        self._clock: Clock = clock if clock is not None else system_clock
        self._lock = threading.RLock()
        self._index = RangeSet()
        self._count = 0
        self._mutable = DelayQueue()
        self._mut_start = -1
        self._mut_end = -1
        self._sealed_end = -1
        self._shared = DelayQueue()
        self._buckets: list[ImmutableBucket] = []
        self._starts: list[int] = []
        self._barriers: list[tuple[Key, int, ImmutableBucket]] = []
        self._seq = itertools.count()
        self._tick = self.config.tick_time_ms
        self._closed = False
        self._merge_queued = False
        self._mark_delete: Position | None = mark_delete
        self._tail_id: int | None = None
        self._seen: set[int] = set()
        self._replay: list[tuple[int, int]] = []
        self._snapshot_bytes = 0
        self._n = dict.fromkeys(BucketCounters.__slots__, 0)
        self.op_stats = OpStats()
        self._jobs = JobRunner(background=background, name=f"cursorkit-delayed-{topic}-{cursor}")
        self.storage.start()
        self.recovery_report = RecoveryReport()
        recover_into(self)

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

    def _now(self) -> int:
        now = self._clock()
        if isinstance(now, bool) or not isinstance(now, int | np.integer):
            raise InvalidInputType(f"clock must return int milliseconds, got {type(now).__name__}")
        return int(now)

    def _cutoff(self, now: int) -> int:
        return now if self.config.strict else min(now + self._tick, I64_MAX)

    def reset_tick_time(self, tick_time_ms: int) -> None:
        """Changes the tick (a topic policy update)."""
        tick = _as_int(tick_time_ms, "tick_time_ms")
        if tick < 0:
            raise InvalidArgument(f"tick_time_ms must be >= 0, got {tick}")
        with self._lock:
            self._tick = tick

    @property
    def tick_time_ms(self) -> int:
        """The current tick."""
        return self._tick

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
            tracked = self._index.contains(ledger_id, entry_id)  # validates the position first
            if at < 0 or at <= self._cutoff(self._now()):
                if tracked:  # [main]: an expired message is untracked as well
                    self._index.remove(ledger_id, entry_id)
                    self._count -= 1
                    self._settle()
                self._n["rejected_due"] += 1
                return False
            md = self._mark_delete
            if md is not None and (ledger_id, entry_id) <= (md.ledger_id, md.entry_id):
                self._n["rejected_acked"] += 1
                return False
            if tracked:
                self._n["duplicates"] += 1
                return True
            self._queue_for(ledger_id).add(at, ledger_id, entry_id)
            self._index.add(ledger_id, entry_id)
            self._count += 1
            self._n["added"] += 1
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
            present = self._index.contains_many(ls, es)  # validates every position first
            due = (ts < 0) | (ts <= self._cutoff(self._now()))
            out = ~due
            expired = due & present
            if expired.any():
                self._count -= int(self._index.remove_many(ls[expired], es[expired]).sum())
                self._settle()
            self._n["rejected_due"] += int(due.sum())
            md = self._mark_delete
            if md is not None:
                acked = ~due & ((ls < md.ledger_id) | ((ls == md.ledger_id) & (es <= md.entry_id)))
                out &= ~acked
                self._n["rejected_acked"] += int(acked.sum())
            fresh = out & ~present
            self._n["duplicates"] += int((out & present).sum())
            idx = np.flatnonzero(fresh)
            if len(idx):
                cuts = np.flatnonzero(np.diff(ls[idx])) + 1
                for run in np.split(idx, cuts):
                    self._add_run(int(ls[run[0]]), ts[run], ls[run], es[run])
            return out

    def _queue_for(self, ledger: int) -> DelayQueue:
        """Where a new index of ``ledger`` goes (PIP-195's rule), sealing the tail first if due.

        The tail takes ledgers at or after its end that no bucket covers, and (beyond Pulsar) only
        above every range ever sealed, so no seal can enclose a bucket it did not contain (a later
        recovery would discard that bucket as a stale merge source). Everything else waits in the
        shared queue.
        """
        covering = self._covering(ledger)
        if covering is None and ledger > self._mut_end:
            self._maybe_seal()
        if covering is None and ledger >= self._mut_end and ledger > self._sealed_end:
            if self._mut_start < 0:
                self._mut_start = ledger
            self._mut_end = ledger
            return self._mutable
        return self._shared

    def _add_run(self, ledger: int, ts: Int64Array, ls: Int64Array, es: Int64Array) -> None:
        self._queue_for(ledger).add_many(ts, ls, es)
        new = self._index.add_many(ls, es)
        self._count += new
        self._n["added"] += new
        self._n["duplicates"] += len(ls) - new

    def _covering(self, ledger_id: int) -> ImmutableBucket | None:
        i = bisect.bisect_right(self._starts, ledger_id) - 1
        if i >= 0 and self._buckets[i].covers(ledger_id):
            return self._buckets[i]
        return None

    # --- sealing -------------------------------------------------------------------------------------

    def _maybe_seal(self) -> None:
        n = len(self._mutable)
        if n == 0 or n < self.config.min_index_count_per_bucket:
            return
        ts, ls, es = self._mutable.drain()
        live = self._index.contains_many(ls, es)  # trimmed (acked) indexes stay out of the snapshot
        if not live.all():
            ts, ls, es = ts[live], ls[live], es[live]
        if len(ts) == 0:
            self._mut_start = self._mut_end = -1
            return
        segs = self._cut(ts, ls, es)
        b = ImmutableBucket(
            self._mut_start,
            self._mut_end,
            last_segment_entry_id=len(segs),
            number_bucket_delayed_messages=len(ts),
            first_schedule_timestamps=snapshot.first_timestamps(segs),
            pending=segs,
        )
        self._mut_start = self._mut_end = -1
        self._insert(b)
        self._push_segment(b, 1, *segs.segment(0))
        self._n["seals"] += 1
        self._jobs.submit(lambda: self._create_job(b, segs))
        self._queue_merge()

    def _cut(self, ts: Int64Array, ls: Int64Array, es: Int64Array) -> SegmentArrays:
        """Sorted indexes cut into segments by this tracker's time step and index limit."""
        return snapshot.cut(
            ts,
            ls,
            es,
            max_time_step_ms=self.config.max_time_step_per_segment_ms,
            max_indexes_per_segment=self.config.max_indexes_per_segment,
        )

    def _insert(self, b: ImmutableBucket) -> None:
        self._sealed_end = max(self._sealed_end, b.end_ledger_id)
        i = bisect.bisect_left(self._starts, b.start_ledger_id)
        self._buckets.insert(i, b)
        self._starts.insert(i, b.start_ledger_id)

    def _remove(self, b: ImmutableBucket) -> None:
        if b.removed:
            return
        b.removed = True
        b.barrier = None
        i = self._buckets.index(b)
        del self._buckets[i]
        del self._starts[i]

    def _push_segment(
        self, b: ImmutableBucket, segment_id: int, ts: Int64Array, ls: Int64Array, es: Int64Array
    ) -> None:
        """Puts a segment's still-tracked indexes in the shared queue and sets the bucket's barrier."""
        live = self._index.contains_many(ls, es)
        if live.all():
            self._shared.add_many(ts, ls, es)
        else:
            self._shared.add_many(ts[live], ls[live], es[live])
        b.current_segment_entry_id = segment_id
        b.barrier = (int(ts[-1]), int(ls[-1]), int(es[-1]))
        heapq.heappush(self._barriers, (b.barrier, next(self._seq), b))

    # --- the delivery path -----------------------------------------------------------------------------

    def _min_barrier(self) -> ImmutableBucket | None:
        while self._barriers:
            key, _, b = self._barriers[0]
            if b.removed or b.barrier != key:
                heapq.heappop(self._barriers)
                continue
            return b
        return None

    def _move_due_tail(self, cutoff: int) -> None:
        ts, ls, es = self._mutable.pop_due(cutoff, I64_MAX)
        if len(ts):
            self._shared.add_many(ts, ls, es)

    def _settle(self) -> None:
        """Restores the delivery invariant after any change to the queues or the index.

        Untracked indexes at the heads (expired re-adds, trims, merged or downgraded duplicates)
        leave, and while the shared head lies beyond the earliest barrier, that bucket's loaded
        segment is used up: its next segment is loaded (or the bucket retired). Afterwards the
        shared head is the earliest tracked index unless a load failed (see ``_next_time``).
        """
        self._mutable.drop_untracked(self._index)
        while True:
            self._shared.drop_untracked(self._index)
            b = self._min_barrier()
            if b is None or b.barrier is None:
                return
            head = self._shared.peek()
            if head is not None and head <= b.barrier:
                return
            if not self._advance(b):
                return

    def _next_time(self) -> int | None:
        """Earliest deliver-at still tracked, or None when nothing is.

        The queue heads give it, except for buckets whose next segment could not be loaded yet:
        their metadata's ``min_schedule_timestamp`` of that segment stands in for it.
        """
        heads = [h[0] for h in (self._mutable.peek(), self._shared.peek()) if h is not None]
        heads.extend(c.next_unloaded_timestamp() for c in self._stalled())
        return min(heads) if heads else None

    def _stalled(self) -> list[ImmutableBucket]:
        """Buckets whose loaded segment is used up while their next one is not loaded.

        Only a failed load leaves one (settling stops there); usually the list is empty.
        """
        b = self._min_barrier()
        if b is None or b.barrier is None:
            return []
        head = self._shared.peek()
        if head is not None and head <= b.barrier:
            return []
        return [c for c in self._buckets if c.barrier is not None and (head is None or head > c.barrier)]

    def _pop_limit(self, cutoff: int) -> Key:
        """The last index that may leave now: due, and before every bucket's unloaded indexes.

        A bucket's unloaded segments follow its barrier; one whose next segment failed to load
        holds back only indexes from that segment's ``min_schedule_timestamp`` on.
        """
        limit: Key = (cutoff, I64_MAX, I64_MAX)
        stalled = set(self._stalled())
        if not stalled:  # every load succeeded: the earliest barrier
            b = self._min_barrier()
            return min(limit, b.barrier) if b is not None and b.barrier is not None else limit
        for c in self._buckets:
            if c.barrier is not None:
                bound = (c.next_unloaded_timestamp() - 1, I64_MAX, I64_MAX) if c in stalled else c.barrier
                limit = min(limit, bound)
        return limit

    def has_message_available(self) -> bool:
        """Whether a tracked message is due now (a due tail index counts too)."""
        with self._lock:
            self._check_open()
            if self._count == 0:
                return False
            nxt = self._next_time()
            return nxt is not None and nxt <= self._cutoff(self._now())

    def next_delivery_time(self) -> int | None:
        """Earliest deliver-at of any tracked message (for arming a timer), or None when none is."""
        with self._lock:
            self._check_open()
            return self._next_time() if self._count else None

    def now(self) -> int:
        """The tracker's clock (ms)."""
        return self._now()

    def get_scheduled_messages(self, max_messages: int) -> Int64Array:
        """Up to ``max_messages`` due messages as (ledger, entry) rows sorted by position.

        They leave in deliver-at order (the sort is of the returned batch only); each is untracked.
        """
        limit_n = _as_int(max_messages, "max_messages")
        if limit_n < 0:
            raise InvalidArgument(f"max_messages must be >= 0, got {limit_n}")
        with self._lock:
            self._check_open()
            cutoff = self._cutoff(self._now())
            self._move_due_tail(cutoff)
            self._settle()  # retries a load that failed earlier
            out_l: list[Int64Array] = []
            out_e: list[Int64Array] = []
            remaining = limit_n
            while remaining > 0:
                limit = self._pop_limit(cutoff)
                ts, ls, es = self._shared.pop_until(limit[0], limit[1], limit[2], remaining)
                if not len(ts):
                    break
                live = self._index.remove_many(ls, es)
                k = int(live.sum())
                if k:
                    out_l.append(ls[live] if k < len(ls) else ls)
                    out_e.append(es[live] if k < len(es) else es)
                    self._count -= k
                    self._n["delivered"] += k
                    remaining -= k
                self._settle()  # a popped barrier loads its bucket's next segment at once
            if not out_l:
                return np.empty((0, 2), dtype=np.int64)
            ls_all, es_all = np.concatenate(out_l), np.concatenate(out_e)
            order = np.lexsort((es_all, ls_all))
            return np.stack((ls_all[order], es_all[order]), axis=1)

    def _advance(self, b: ImmutableBucket) -> bool:
        """Loads the bucket's next segment (or retires it after its last); False if loading failed."""
        nxt = b.current_segment_entry_id + 1
        if nxt > b.last_segment_entry_id:
            self._retire(b)
            return True
        try:
            cols = self._segment_columns(b, nxt)
        except (PersistFailed, OSError):
            return False  # counted in op_stats; retried on the next call
        except (CorruptSnapshot, BucketNotFound) as e:
            self._lose(b, f"segment {nxt}: {e}")
            return True
        self._push_segment(b, nxt, *cols)
        self._n["segment_loads"] += 1
        return True

    def _segment_columns(
        self, b: ImmutableBucket, segment_id: int
    ) -> tuple[Int64Array, Int64Array, Int64Array]:
        if b.pending is not None:
            return b.pending.segment(segment_id - 1)
        assert b.bucket_id is not None
        bucket_id = b.bucket_id
        blobs = self._timed(
            "load", lambda: self.storage.get_bucket_snapshot_segment(bucket_id, segment_id, segment_id)
        )
        if not blobs:
            raise CorruptSnapshot(f"bucket snapshot {bucket_id} has no segment {segment_id}")
        segs = snapshot.decode(blobs)
        return segs.segment(0)

    def _lose(self, b: ImmutableBucket, reason: str) -> None:
        """Drops a bucket whose snapshot can no longer be read, and reports it.

        Its ledgers are untracked and handed back for replay from the cursor
        (``take_replay_ranges``); the snapshot is kept for inspection. The other buckets go on
        delivering in order: this one's barrier goes with it.
        """
        self._remove(b)
        before = self._index.total_cardinality()
        self._index.remove_open_closed(b.start_ledger_id, -1, b.end_ledger_id, MAX_ENTRY_ID)
        self._count -= before - self._index.total_cardinality()
        self._replay.append((b.start_ledger_id, b.end_ledger_id))
        self.recovery_report.damaged.append(f"{b.key} (snapshot {b.bucket_id}): {reason}")
        self._n["damaged"] += 1
        bucket_id = b.bucket_id
        if bucket_id is not None:
            self._jobs.submit(lambda: self._quarantine(b.key, bucket_id))

    def _quarantine(self, key: str, bucket_id: int) -> None:
        """Moves a damaged bucket's property out of Pulsar's namespace; the snapshot stays."""
        drop = [key] if self._props.store.get(key) == str(bucket_id) else []
        self._props.apply({f"{DAMAGED_PROPERTY_PREFIX}{bucket_id}": key}, drop)
        self.recovery_report.quarantined.append(bucket_id)

    def take_replay_ranges(self) -> list[tuple[int, int]]:
        """Ledger ranges (inclusive) whose delayed messages were lost to damage since the last call.

        Their positions are no longer tracked: the dispatcher reads them again from the cursor and
        adds them anew (at-least-once). Damage found at recovery is included.
        """
        with self._lock:
            taken, self._replay = self._replay, []
            return taken

    def discard_damaged(self) -> list[int]:
        """Deletes the snapshots kept for inspection and their properties; returns their ids."""
        doomed = []
        for k in list(self._props.store):
            if k.startswith(DAMAGED_PROPERTY_PREFIX):
                with contextlib.suppress(CorruptSnapshot):
                    doomed.append((k, parse_id(k[len(DAMAGED_PROPERTY_PREFIX) :], "damaged snapshot")))
        for key, bucket_id in doomed:
            if self._delete_quietly(bucket_id):
                self._props.apply({}, [key])
        return [bucket_id for _, bucket_id in doomed]

    def _retire(self, b: ImmutableBucket) -> None:
        """Drops a consumed (or trimmed) bucket; its snapshot, then its property, go in a job."""
        self._remove(b)
        self._jobs.submit(lambda: self._delete_job(b))

    # --- jobs (run on the worker, or in maintenance()) -------------------------------------------------

    def _timed(self, op: str, fn: Callable[[], T], *, retries: int = 1) -> T:
        for attempt in range(1, retries + 1):
            t0 = time.perf_counter()
            try:
                result = fn()
            except (PersistFailed, OSError):
                self.op_stats.record(op, False, (time.perf_counter() - t0) * 1000)
                if attempt == retries:
                    raise
                continue
            except Exception:
                self.op_stats.record(op, False, (time.perf_counter() - t0) * 1000)
                raise
            self.op_stats.record(op, True, (time.perf_counter() - t0) * 1000)
            return result
        raise AssertionError("unreachable")

    def _write_snapshot(self, segs: SegmentArrays, key: str) -> tuple[int, int]:
        """Encodes and writes a snapshot; returns (snapshot id, stored bytes)."""
        meta, blobs = snapshot.encode(segs)
        bucket_id = self._timed(
            "create",
            lambda: self.storage.create_bucket_snapshot(meta, blobs, key, self.topic, self.cursor),
            retries=self.config.storage_retries,
        )
        return bucket_id, self.storage.get_bucket_snapshot_length(bucket_id)

    def _create_job(self, b: ImmutableBucket, segs: SegmentArrays) -> None:
        """Writes a sealed bucket's snapshot, then its property; either failing downgrades it."""
        try:
            bucket_id, length = self._write_snapshot(segs, b.key)
        except Exception:
            with self._lock:
                self._downgrade(b)
            raise
        try:
            self._props.apply({b.key: str(bucket_id)})
        except Exception:
            self._delete_quietly(bucket_id)
            with self._lock:
                self._downgrade(b)
            raise
        with self._lock:
            gone = b.removed
            if not gone:  # created = durable and recorded
                b.bucket_id = bucket_id
                b.snapshot_length = length
                b.pending = None
                self._snapshot_bytes += length
        if gone:  # consumed or cleared while being written
            self._delete_quietly(bucket_id)
            self._props.drop_if(b.key, str(bucket_id))

    def _delete_quietly(self, bucket_id: int) -> bool:
        """Deletes a snapshot nothing needs any more; a failure leaves an orphan for recovery."""
        try:
            self._timed(
                "delete",
                partial(self.storage.delete_bucket_snapshot, bucket_id),
                retries=self.config.storage_retries,
            )
        except (PersistFailed, OSError):
            return False
        return True

    def _downgrade(self, b: ImmutableBucket) -> None:
        """A snapshot that could not be written: its remaining segments go to the shared queue."""
        self._n["downgrades"] += 1
        if b.removed or b.pending is None:
            return
        for sid in range(b.current_segment_entry_id + 1, b.last_segment_entry_id + 1):
            ts, ls, es = b.pending.segment(sid - 1)
            live = self._index.contains_many(ls, es)
            self._shared.add_many(ts[live], ls[live], es[live])
        self._remove(b)

    def _delete_job(self, b: ImmutableBucket) -> None:
        with self._lock:
            bucket_id = b.bucket_id
            if bucket_id is not None and b.snapshot_length:
                self._snapshot_bytes -= b.snapshot_length
                b.snapshot_length = 0
        if bucket_id is None:
            return
        self._timed(
            "delete",
            lambda: self.storage.delete_bucket_snapshot(bucket_id),
            retries=self.config.storage_retries,
        )
        self._props.drop_if(b.key, str(bucket_id))

    def _queue_merge(self) -> None:
        if (
            self.config.max_num_buckets > 0
            and len(self._buckets) > self.config.max_num_buckets
            and not self._merge_queued
        ):
            self._merge_queued = True
            self._jobs.submit(self._merge_job)

    def _merge_job(self) -> None:
        with self._lock:
            self._merge_queued = False
            if self._closed or len(self._buckets) <= self.config.max_num_buckets:
                return
            window = select_merged_buckets(self._buckets, min(MAX_MERGE_NUM, len(self._buckets)))
            if window is None:
                return
            sources = self._buckets[window[0] : window[1]]
            for s in sources:
                s.merging = True
        t0 = time.perf_counter()
        try:
            merged = merge_buckets(self, sources)
        except Exception:
            self.op_stats.record("merge", False, (time.perf_counter() - t0) * 1000)
            with self._lock:
                for s in sources:
                    s.merging = False
            raise
        self.op_stats.record("merge", True, (time.perf_counter() - t0) * 1000)
        with self._lock:
            self._n["merges"] += 1
            if merged is not None:
                self._queue_merge()  # still above the limit: merge again

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
            before = self._index.total_cardinality()
            self._index.remove_at_most(mark_delete.ledger_id, mark_delete.entry_id)
            removed = before - self._index.total_cardinality()
            self._count -= removed
            self._mutable.remove_ledgers_below(mark_delete.ledger_id)
            self._shared.remove_ledgers_below(mark_delete.ledger_id)
            for b in [b for b in self._buckets if b.end_ledger_id < mark_delete.ledger_id]:
                self._retire(b)
            self._settle()
            return removed

    def checkpoint_tail(self) -> None:
        """Persists the mutable tail (beyond Pulsar) so a restart recovers it instead of replaying it.

        The write is a job like a seal's: call ``maintenance()`` to wait for it.
        """
        with self._lock:
            self._check_open()
            ts, ls, es = self._mutable.drain()
            self._mutable.add_many(ts, ls, es)
            key = f"mutable_{self._mut_start}_{self._mut_end}"
        self._jobs.submit(lambda: self._tail_job(ts, ls, es, key))

    def _tail_job(self, ts: Int64Array, ls: Int64Array, es: Int64Array, key: str) -> None:
        old = self._tail_id
        if len(ts):
            segs = self._cut(ts, ls, es)
            new_id, _ = self._write_snapshot(segs, key)
            self._props.apply({MUTABLE_TAIL_PROPERTY: str(new_id)})
            self._tail_id = new_id
        else:
            self._props.apply({}, [MUTABLE_TAIL_PROPERTY])
            self._tail_id = None
        if old is not None:
            self._delete_quietly(old)

    def clear(self) -> None:
        """Forgets every index and deletes every snapshot and bucket property (a cleared backlog)."""
        self._jobs.run_pending()
        with self._lock:
            self._check_open()
            doomed = list(self._buckets)
            for b in doomed:
                self._remove(b)
            self._index.clear()
            self._count = 0
            self._mutable.clear()
            self._shared.clear()
            self._barriers.clear()
            self._mut_start = self._mut_end = -1
        for b in doomed:
            self._delete_job(b)
        tail = self._tail_id
        if tail is not None:
            self._timed("delete", lambda: self.storage.delete_bucket_snapshot(tail))
            self._props.apply({}, [MUTABLE_TAIL_PROPERTY])
            self._tail_id = None
        with self._lock:
            self._snapshot_bytes = 0

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
            self._mutable.clear()
            self._shared.clear()
            self._barriers.clear()
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
            return self._index.contains(ledger_id, entry_id)

    @property
    def number_of_delayed_messages(self) -> int:
        """Distinct positions tracked (tail, loaded and unloaded segments)."""
        return self._count

    @property
    def buffer_memory_usage(self) -> int:
        """Bytes of the in-memory queues and the position index (Pulsar counts only the queues)."""
        with self._lock:
            return self._mutable.memory_usage() + self._shared.memory_usage() + self._index.memory_usage()

    @property
    def immutable_buckets(self) -> list[ImmutableBucket]:
        """The sealed buckets in ledger order (live objects: read, do not change)."""
        with self._lock:
            return list(self._buckets)

    @property
    def cursor_properties(self) -> MutableMapping[str, str]:
        """The cursor properties the tracker records its snapshots in."""
        return self._props.store

    @property
    def mutable_bucket_range(self) -> tuple[int, int]:
        """``(start, end)`` ledgers of the tail bucket; (-1, -1) when empty."""
        return self._mut_start, self._mut_end

    def should_pause_all_deliveries(self) -> bool:
        """Always False: fixed-delay detection is the in-memory tracker's (as in Pulsar)."""
        return False

    def counters(self) -> BucketCounters:
        """What the tracker has done so far."""
        with self._lock:
            return BucketCounters(**self._n)

    def metric_figures(self) -> TrackerFigures:
        """Figures for ``DelayedDeliveryCollector``."""
        with self._lock:
            return TrackerFigures(
                delayed_messages=self._count,
                buffer_memory_usage=self._mutable.memory_usage() + self._shared.memory_usage(),
                bucket_total=len(self._buckets) + 1,
                loaded_indexes=len(self._mutable) + len(self._shared),
                snapshot_size_bytes=self._snapshot_bytes,
                op_stats=self.op_stats,
                damaged_buckets=self._n["damaged"],
            )

    def __repr__(self) -> str:
        return (
            f"<BucketDelayedDeliveryTracker {self.topic}/{self.cursor} delayed={self._count} "
            f"buckets={len(self._buckets)} tail={len(self._mutable)} loaded={len(self._shared)}>"
        )
