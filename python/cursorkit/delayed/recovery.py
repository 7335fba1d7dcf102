"""What a bucket tracker's recovery found, and the rule that decides which recorded buckets stand.

Pulsar reads the bucket properties in key order and may keep overlapping buckets. Here the largest
enclosing range wins whatever the order: a range inside another is a merge source whose swap already
happened, so its snapshot is stale and deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RecordedBucket:
    """One bucket property: its ledger range and snapshot id."""

    start_ledger_id: int
    end_ledger_id: int
    bucket_id: int
    key: str


@dataclass(slots=True)
class RecoveryReport:
    """Outcome of a recovery; ``damaged`` buckets' messages must be replayed from the cursor."""

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
    """Properties naming a snapshot the storage does not hold: dropped."""
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
        return bool(self.damaged)


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
