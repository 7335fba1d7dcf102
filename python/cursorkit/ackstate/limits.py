"""Persistence limits of a cursor, with Pulsar's broker.conf names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from cursorkit.errors import InvalidArgument

NETTY_MAX_FRAME_BYTES = 5 * 1024 * 1024 + 10 * 1024
"""Largest BookKeeper entry a Pulsar broker writes (``nettyMaxFrameSizeBytes``, 5 MB + 10 KB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistLimits:
    """How much ack state one persist may carry; what exceeds a limit is cut and reported."""

    max_unacked_ranges_to_persist: int = 10_000
    """``managedLedgerMaxUnackedRangesToPersist``: ranges in a PositionInfo (and the PIP-299 limit)."""
    max_unacked_ranges_to_persist_in_metadata_store: int = 1_000
    """``managedLedgerMaxUnackedRangesToPersistInMetadataStore``: ranges in a ManagedCursorInfo."""
    max_batch_deleted_index_to_persist: int = 10_000
    """``managedLedgerMaxBatchDeletedIndexToPersist``: partial batches persisted."""
    max_entry_bytes: int = NETTY_MAX_FRAME_BYTES
    """Largest single persisted record (a cursor-ledger entry in Pulsar)."""

    def __post_init__(self) -> None:
        for name in (
            "max_unacked_ranges_to_persist",
            "max_unacked_ranges_to_persist_in_metadata_store",
            "max_batch_deleted_index_to_persist",
            "max_entry_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a non-negative int, got {value!r}")
        if self.max_entry_bytes < 64:
            raise InvalidArgument(f"max_entry_bytes must be at least 64, got {self.max_entry_bytes}")


UNLIMITED = PersistLimits(
    max_unacked_ranges_to_persist=2**62, max_batch_deleted_index_to_persist=2**62, max_entry_bytes=2**62
)
"""Limits that keep everything: pickling, and the benchmarks' whole-state rewrites."""
