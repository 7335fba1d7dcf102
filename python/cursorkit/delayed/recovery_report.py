"""``RecoveryReport``: what a bucket tracker's recovery found, and what damage cost it later."""

from __future__ import annotations

from dataclasses import dataclass, field


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
