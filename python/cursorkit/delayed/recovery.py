"""A bucket tracker's recovery: what it found, which recorded buckets stand, and the rebuild itself.

Pulsar reads the bucket properties in key order and may keep overlapping buckets. Here the largest
enclosing range wins whatever the order: a range inside another is a merge source whose swap already
happened, so its snapshot is stale and deleted. ``recover_into`` rebuilds a tracker at construction:
bucket properties, their snapshots' first unexpired segments (Pulsar's skip rule), orphans written
before a crash, and the persisted tail; damage is reported, never raised. A bucket whose snapshot
is missing or damaged has its ledgers handed back for replay from the cursor: its messages are
still owed, whatever became of the snapshot.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import (
    DAMAGED_PROPERTY_PREFIX,
    MUTABLE_TAIL_PROPERTY,
    ImmutableBucket,
    parse_bucket_key,
    parse_id,
)
from cursorkit.errors import BucketNotFound, CorruptSnapshot

MAX_LEDGER_ID = 2**63 - 1
"""The open upper end of a replay range that runs to the newest ledger."""

if TYPE_CHECKING:
    from cursorkit.delayed.bucket_tracker import BucketDelayedDeliveryTracker


@dataclass(frozen=True, slots=True)
class RecordedBucket:
    """One bucket property: its ledger range and snapshot id."""

    start_ledger_id: int
    end_ledger_id: int
    bucket_id: int
    key: str


@dataclass(slots=True)
class RecoveryReport:
    """Outcome of a recovery; ``missing`` and ``damaged`` buckets' messages are replayed from the cursor."""

    recovered: list[int] = field(default_factory=list)
    """Snapshot ids now live in the tracker."""
    messages_recovered: int = 0
    """Indexes recovered from snapshots (not-yet-due segments only), plus the mutable tail."""
    tail_messages: int = 0
    """Indexes recovered from the persisted mutable tail."""
    expired: list[int] = field(default_factory=list)
    """Snapshots whose every segment was already due: deleted (those messages dispatch directly)."""
    stale: list[int] = field(default_factory=list)
    """Snapshots enclosed by another bucket's range (merge sources): deleted."""
    trimmed: list[int] = field(default_factory=list)
    """Snapshots wholly below the mark-delete ledger: deleted."""
    missing: list[str] = field(default_factory=list)
    """Properties naming a snapshot the storage does not hold: dropped, and their ledgers handed
    back for replay from the cursor (``take_replay_ranges``) as for a damaged one."""
    damaged: list[str] = field(default_factory=list)
    """Corrupt snapshots or properties, with the reason; their messages must be replayed from the
    cursor. A tracker appends here too when a segment it loads later turns out damaged."""
    quarantined: list[int] = field(default_factory=list)
    """Damaged snapshots kept for inspection (``#cursorkit.delayed.damaged_<id>``): never loaded,
    never deleted by the tracker; ``discard_damaged()`` removes them."""
    overlapping: list[str] = field(default_factory=list)
    """Partly overlapping ranges (kept both; the shared index deduplicates)."""
    adopted: list[int] = field(default_factory=list)
    """Snapshots written before a crash stopped their property write: recorded now, not replayed."""
    orphans_deleted: list[int] = field(default_factory=list)
    """Unrecorded snapshots of this topic and cursor that overlap live ones: deleted."""

    @property
    def replay_required(self) -> bool:
        """Whether some recorded state was lost and the dispatcher must replay from mark-delete."""
        return bool(self.damaged or self.missing)


def plan_ranges(
    recorded: list[RecordedBucket],
) -> tuple[list[RecordedBucket], list[RecordedBucket], list[str]]:
    """Splits recorded buckets into (kept, enclosed, overlap notes); kept ones are in range order."""
    ordered = sorted(recorded, key=lambda r: (r.start_ledger_id, -r.end_ledger_id, r.bucket_id))
    kept: list[RecordedBucket] = []
    enclosed: list[RecordedBucket] = []
    notes: list[str] = []
    for r in ordered:
        outer = next(
            (
                k
                for k in kept
                if k.start_ledger_id <= r.start_ledger_id and r.end_ledger_id <= k.end_ledger_id
            ),
            None,
        )
        if outer is not None:
            enclosed.append(r)
            continue
        notes.extend(
            f"{r.key} overlaps {k.key}"
            for k in kept
            if r.start_ledger_id <= k.end_ledger_id and k.start_ledger_id <= r.end_ledger_id
        )
        kept.append(r)
    return kept, enclosed, notes


def overlaps(start: int, end: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``[start, end]`` intersects any of ``ranges``."""
    return any(start <= e and s <= end for s, e in ranges)


# --- recovering a tracker ------------------------------------------------------------------------


def recover_into(t: BucketDelayedDeliveryTracker) -> None:
    """Rebuilds ``t`` from its storage and cursor properties, filling ``t.recovery_report``."""
    report = t.recovery_report
    cutoff = t._cutoff(t._now())
    md_ledger = t._mark_delete.ledger_id if t._mark_delete is not None else -1
    recorded: list[RecordedBucket] = []
    for name, value in list(t._props.store.items()):
        if name.startswith(DAMAGED_PROPERTY_PREFIX):
            try:
                kept_id = parse_id(name[len(DAMAGED_PROPERTY_PREFIX) :], "damaged snapshot")
            except CorruptSnapshot:
                continue
            t._seen.add(kept_id)  # kept for inspection: never adopted or deleted
            report.quarantined.append(kept_id)
            # Its messages are owed until discard_damaged() says the replay was done: again now.
            try:
                rng = parse_bucket_key(value)
            except CorruptSnapshot:
                rng = None
            if rng is not None:
                report.damaged.append(f"{value} (snapshot {kept_id}): quarantined earlier, not yet discarded")
                t._replay.append(rng)
            continue
        try:
            rng = parse_bucket_key(name)
            if rng is None:
                continue
            bucket_id = parse_id(value, f"cursor property {name!r}: snapshot")
        except CorruptSnapshot as e:
            report.damaged.append(f"{name}={value!r}: {e}")
            t._props.apply({}, [name])
            continue
        recorded.append(RecordedBucket(rng[0], rng[1], bucket_id, name))
    t._seen |= {r.bucket_id for r in recorded}
    kept, enclosed, notes = plan_ranges(recorded)
    report.overlapping.extend(notes)
    for r in enclosed:
        _discard(t, r.bucket_id, r.key, report.stale)
    for r in kept:
        if r.end_ledger_id < md_ledger:
            _discard(t, r.bucket_id, r.key, report.trimmed)
            continue
        _load_bucket(t, r, cutoff, report)
    _adopt_orphans(t, cutoff, report)
    if t._mark_delete is not None:  # snapshots may hold indexes acked since they were written
        md = t._mark_delete
        before = t._index.total_cardinality()
        t._index.remove_at_most(md.ledger_id, md.entry_id)
        t._count -= before - t._index.total_cardinality()
    _recover_tail(t, report)
    t._settle()
    report.messages_recovered = t._count


def _discard(t: BucketDelayedDeliveryTracker, bucket_id: int, key: str, into: list[int]) -> None:
    """Drops a recorded snapshot recovery does not keep: snapshot first, then its property."""
    if t._delete_quietly(bucket_id):
        t._props.drop_if(key, str(bucket_id))
    into.append(bucket_id)


def _load_bucket(
    t: BucketDelayedDeliveryTracker, r: RecordedBucket, cutoff: int, report: RecoveryReport
) -> bool:
    """Installs one recorded bucket from its metadata and first unexpired segment."""
    try:
        meta = t._timed("load", lambda: t.storage.get_bucket_snapshot_metadata(r.bucket_id))
        segments = list(meta.metadata_list)
        skip = 0
        while skip < len(segments) and segments[skip].max_schedule_timestamp <= cutoff:
            skip += 1
        if skip == len(segments):
            _discard(t, r.bucket_id, r.key, report.expired)
            return False
        first = t._timed(
            "load", lambda: t.storage.get_bucket_snapshot_segment(r.bucket_id, skip + 1, skip + 1)
        )
        if not first:
            raise CorruptSnapshot(f"bucket snapshot {r.bucket_id} lacks segment {skip + 1}")
        cols = snapshot.decode(first).segment(0)
        length = t.storage.get_bucket_snapshot_length(r.bucket_id)
    except BucketNotFound:
        # Nothing left to inspect, but its messages are still owed: replayed, as a damaged one's.
        report.missing.append(r.key)
        t._replay.append((r.start_ledger_id, r.end_ledger_id))
        t._props.drop_if(r.key, str(r.bucket_id))
        return False
    except CorruptSnapshot as e:
        # Never taken as due, never deleted: kept for inspection, its messages replayed.
        report.damaged.append(f"{r.key} (snapshot {r.bucket_id}): {e}")
        t._n["damaged"] += 1
        t._replay.append((r.start_ledger_id, r.end_ledger_id))
        t._quarantine(r.key, r.bucket_id)
        return False
    count = 0
    for seg in segments[skip:]:
        for ledger, bitmap in seg.delayed_index_bit_map.items():
            count += t._index.union_ledger_bytes(ledger, bitmap)
    t._count += count
    b = ImmutableBucket(
        r.start_ledger_id,
        r.end_ledger_id,
        last_segment_entry_id=len(segments),
        number_bucket_delayed_messages=count,
        first_schedule_timestamps=[int(s.min_schedule_timestamp) for s in segments],
        bucket_id=r.bucket_id,
        snapshot_length=length,
    )
    t._snapshot_bytes += length
    t._insert(b)
    t._push_segment(b, skip + 1, *cols)
    report.recovered.append(r.bucket_id)
    return True


def _adopt_orphans(t: BucketDelayedDeliveryTracker, cutoff: int, report: RecoveryReport) -> None:
    """Snapshots of this topic/cursor that no property names: adopted if disjoint, else deleted."""
    lister = getattr(t.storage, "list_bucket_snapshots", None)
    info = getattr(t.storage, "bucket_info", None)
    if not callable(lister) or not callable(info):
        return
    referenced = set(t._seen)
    tail = t._props.store.get(MUTABLE_TAIL_PROPERTY)
    if tail is not None:
        with contextlib.suppress(CorruptSnapshot):
            referenced.add(parse_id(tail, MUTABLE_TAIL_PROPERTY))
    for bucket_id in sorted(lister()):
        if bucket_id in referenced:
            continue
        try:
            meta = info(bucket_id)
        except (BucketNotFound, CorruptSnapshot):
            continue
        if meta.topic != t.topic or meta.cursor != t.cursor:
            continue
        try:
            rng = parse_bucket_key(meta.bucket_key)
        except CorruptSnapshot:
            rng = None
        ranges = [(b.start_ledger_id, b.end_ledger_id) for b in t._buckets]
        if rng is None or overlaps(rng[0], rng[1], ranges):
            if t._delete_quietly(bucket_id):
                report.orphans_deleted.append(bucket_id)
            continue
        r = RecordedBucket(rng[0], rng[1], bucket_id, meta.bucket_key)
        if _load_bucket(t, r, cutoff, report):
            t._props.apply({r.key: str(bucket_id)})
            report.adopted.append(bucket_id)


def _recover_tail(t: BucketDelayedDeliveryTracker, report: RecoveryReport) -> None:
    value = t._props.store.get(MUTABLE_TAIL_PROPERTY)
    if value is None:
        return
    try:
        tail_id = parse_id(value, MUTABLE_TAIL_PROPERTY)
        n = t.storage.get_bucket_snapshot_metadata(tail_id).metadata_list
        segs = snapshot.decode(t.storage.get_bucket_snapshot_segment(tail_id, 1, len(n)))
    except (ValueError, BucketNotFound, CorruptSnapshot) as e:
        # The tail held ledgers after the sealed buckets: replay from the last one's end onwards.
        ends = [b.end_ledger_id for b in t.immutable_buckets]
        start = max(ends) if ends else (t._mark_delete.ledger_id if t._mark_delete is not None else 0)
        report.damaged.append(f"{MUTABLE_TAIL_PROPERTY}={value!r}: {e}; ledgers {start} onwards replayed")
        t._replay.append((start, MAX_LEDGER_ID))
        t._props.apply({}, [MUTABLE_TAIL_PROPERTY])
        return
    t._tail_id = tail_id
    ts, ls, es = segs.timestamps, segs.ledger_ids, segs.entry_ids
    keep = ~t._index.contains_many(ls, es)
    if t._mark_delete is not None:
        md = t._mark_delete
        keep &= (ls > md.ledger_id) | ((ls == md.ledger_id) & (es > md.entry_id))
    ts, ls, es = ts[keep], ls[keep], es[keep]
    for ledger in np.unique(ls):
        sel = ls == ledger
        t._add_run(int(ledger), ts[sel], ls[sel], es[sel])
    report.tail_messages = int(keep.sum())
