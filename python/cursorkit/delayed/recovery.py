"""A bucket tracker's recovery: what it found, which recorded buckets stand, and the rebuild itself.

Pulsar reads the bucket properties in key order and may keep overlapping buckets. Here the largest
enclosing range wins whatever the order: a range inside another is a merge source whose swap already
happened, so its snapshot is stale and deleted. ``Recovery`` rebuilds a tracker at construction:
bucket properties, their snapshots' first unexpired segments (Pulsar's skip rule), orphans written
before a crash, and the persisted tail; damage is reported, never raised. A bucket whose snapshot
is missing or damaged has its ledgers handed back for replay from the cursor: its messages are
still owed, whatever became of the snapshot.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial

import numpy as np

from cursorkit._core import Position
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import (
    DAMAGED_PROPERTY_PREFIX,
    MUTABLE_TAIL_PROPERTY,
    ImmutableBucket,
    parse_bucket_key,
    parse_id,
)
from cursorkit.delayed.damage import Damage
from cursorkit.delayed.delivery import Delivery
from cursorkit.delayed.intake import Intake
from cursorkit.delayed.parts import TrackerParts
from cursorkit.delayed.tail_snapshot import TailSnapshot
from cursorkit.errors import BucketNotFound, CorruptSnapshot

MAX_LEDGER_ID = 2**63 - 1
"""The open upper end of a replay range that runs to the newest ledger."""


@dataclass(frozen=True, slots=True)
class RecordedBucket:
    """One bucket property: its ledger range and snapshot id."""

    start_ledger_id: int
    end_ledger_id: int
    bucket_id: int
    key: str


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


class Recovery:
    """Rebuilds a new tracker's parts from its storage and cursor properties, into ``damage.report``."""

    def __init__(
        self,
        *,
        cutoff: int,
        mark_delete: Position | None,
        parts: TrackerParts,
        intake: Intake,
        delivery: Delivery,
        tail_snapshot: TailSnapshot,
        damage: Damage,
    ) -> None:
        self._parts = parts
        self._cutoff = cutoff
        self._md = mark_delete
        self._intake = intake
        self._delivery = delivery
        self._tail_snapshot = tail_snapshot
        self._damage = damage
        self._report = damage.report
        self._seen: set[int] = set()

    def run(self) -> None:
        """Recovers the recorded buckets, orphans and the persisted tail; settles the queues."""
        report = self._report
        md_ledger = self._md.ledger_id if self._md is not None else -1
        recorded: list[RecordedBucket] = []
        for name, value in list(self._parts.props.store.items()):
            if name.startswith(DAMAGED_PROPERTY_PREFIX):
                try:
                    kept_id = parse_id(name[len(DAMAGED_PROPERTY_PREFIX) :], "damaged snapshot")
                except CorruptSnapshot:
                    continue
                self._seen.add(kept_id)  # kept for inspection: never adopted or deleted
                report.quarantined.append(kept_id)
                # Its messages are owed until discard_damaged() says the replay was done: again now.
                try:
                    rng = parse_bucket_key(value)
                except CorruptSnapshot:
                    rng = None
                if rng is not None:
                    report.damaged.append(
                        f"{value} (snapshot {kept_id}): quarantined earlier, not yet discarded"
                    )
                    self._damage.owe(*rng)
                continue
            try:
                rng = parse_bucket_key(name)
                if rng is None:
                    continue
                bucket_id = parse_id(value, f"cursor property {name!r}: snapshot")
            except CorruptSnapshot as e:
                report.damaged.append(f"{name}={value!r}: {e}")
                self._parts.props.apply({}, [name])
                continue
            recorded.append(RecordedBucket(rng[0], rng[1], bucket_id, name))
        self._seen |= {r.bucket_id for r in recorded}
        kept, enclosed, notes = plan_ranges(recorded)
        report.overlapping.extend(notes)
        for r in enclosed:
            self._discard(r.bucket_id, r.key, report.stale)
        for r in kept:
            if r.end_ledger_id < md_ledger:
                self._discard(r.bucket_id, r.key, report.trimmed)
                continue
            self._load_bucket(r)
        self._adopt_orphans()
        if self._md is not None:  # snapshots may hold indexes acked since they were written
            self._parts.positions.remove_at_most(self._md.ledger_id, self._md.entry_id)
        self._recover_tail()
        self._delivery.settle()
        report.messages_recovered = self._parts.positions.count

    def _discard(self, bucket_id: int, key: str, into: list[int]) -> None:
        """Drops a recorded snapshot recovery does not keep: snapshot first, then its property."""
        if self._parts.io.delete_quietly(bucket_id):
            self._parts.props.drop_if(key, str(bucket_id))
        into.append(bucket_id)

    def _load_bucket(self, r: RecordedBucket) -> bool:
        """Installs one recorded bucket from its metadata and first unexpired segment."""
        report, io = self._report, self._parts.io
        try:
            meta = io.timed("load", partial(io.storage.get_bucket_snapshot_metadata, r.bucket_id))
            segments = list(meta.metadata_list)
            skip = 0
            while skip < len(segments) and segments[skip].max_schedule_timestamp <= self._cutoff:
                skip += 1
            if skip == len(segments):
                self._discard(r.bucket_id, r.key, report.expired)
                return False
            first = io.load(r.bucket_id, skip + 1, skip + 1)
            if not first:
                raise CorruptSnapshot(f"bucket snapshot {r.bucket_id} lacks segment {skip + 1}")
            cols = snapshot.decode(first).segment(0)
            length = io.storage.get_bucket_snapshot_length(r.bucket_id)
        except BucketNotFound:
            # Nothing left to inspect, but its messages are still owed: replayed, as a damaged one's.
            report.missing.append(r.key)
            self._damage.owe(r.start_ledger_id, r.end_ledger_id)
            self._parts.props.drop_if(r.key, str(r.bucket_id))
            return False
        except CorruptSnapshot as e:
            # Never taken as due, never deleted: kept for inspection, its messages replayed.
            report.damaged.append(f"{r.key} (snapshot {r.bucket_id}): {e}")
            self._parts.tally.add("damaged")
            self._damage.owe(r.start_ledger_id, r.end_ledger_id)
            self._damage.quarantine(r.key, r.bucket_id)
            return False
        count = 0
        for seg in segments[skip:]:
            for ledger, bitmap in seg.delayed_index_bit_map.items():
                count += self._parts.positions.union_ledger_bytes(ledger, bitmap)
        b = ImmutableBucket(
            r.start_ledger_id,
            r.end_ledger_id,
            last_segment_entry_id=len(segments),
            number_bucket_delayed_messages=count,
            first_schedule_timestamps=[int(s.min_schedule_timestamp) for s in segments],
            bucket_id=r.bucket_id,
            snapshot_length=length,
        )
        self._parts.sealed.snapshot_bytes += length
        self._parts.sealed.insert(b)
        self._parts.queue.push(b, skip + 1, *cols, self._parts.positions)
        report.recovered.append(r.bucket_id)
        return True

    def _adopt_orphans(self) -> None:
        """Snapshots of this topic/cursor that no property names: adopted if disjoint, else deleted."""
        storage, report = self._parts.io.storage, self._report
        lister = getattr(storage, "list_bucket_snapshots", None)
        info = getattr(storage, "bucket_info", None)
        if not callable(lister) or not callable(info):
            return
        referenced = set(self._seen)
        tail = self._parts.props.store.get(MUTABLE_TAIL_PROPERTY)
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
            if meta.topic != self._parts.io.topic or meta.cursor != self._parts.io.cursor:
                continue
            try:
                rng = parse_bucket_key(meta.bucket_key)
            except CorruptSnapshot:
                rng = None
            ranges = [(b.start_ledger_id, b.end_ledger_id) for b in self._parts.sealed]
            if rng is None or overlaps(rng[0], rng[1], ranges):
                if self._parts.io.delete_quietly(bucket_id):
                    report.orphans_deleted.append(bucket_id)
                continue
            r = RecordedBucket(rng[0], rng[1], bucket_id, meta.bucket_key)
            if self._load_bucket(r):
                self._parts.props.apply({r.key: str(bucket_id)})
                report.adopted.append(bucket_id)

    def _recover_tail(self) -> None:
        value = self._parts.props.store.get(MUTABLE_TAIL_PROPERTY)
        if value is None:
            return
        storage, md = self._parts.io.storage, self._md
        try:
            tail_id = parse_id(value, MUTABLE_TAIL_PROPERTY)
            n = storage.get_bucket_snapshot_metadata(tail_id).metadata_list
            segs = snapshot.decode(storage.get_bucket_snapshot_segment(tail_id, 1, len(n)))
        except (ValueError, BucketNotFound, CorruptSnapshot) as e:
            # The tail held ledgers after the sealed buckets: replay from the last one's end onwards.
            ends = [b.end_ledger_id for b in self._parts.sealed]
            start = max(ends) if ends else (md.ledger_id if md is not None else 0)
            self._report.damaged.append(
                f"{MUTABLE_TAIL_PROPERTY}={value!r}: {e}; ledgers {start} onwards replayed"
            )
            self._damage.owe(start, MAX_LEDGER_ID)
            self._parts.props.apply({}, [MUTABLE_TAIL_PROPERTY])
            return
        self._tail_snapshot.snapshot_id = tail_id
        ts, ls, es = segs.timestamps, segs.ledger_ids, segs.entry_ids
        keep = ~self._parts.positions.contains_many(ls, es)
        if md is not None:
            keep &= (ls > md.ledger_id) | ((ls == md.ledger_id) & (es > md.entry_id))
        ts, ls, es = ts[keep], ls[keep], es[keep]
        for ledger in np.unique(ls):
            sel = ls == ledger
            self._intake.add_run(int(ledger), ts[sel], ls[sel], es[sel])
        self._report.tail_messages = int(keep.sum())
