"""What a file cursor store is told (:class:`StoreOptions`), found when opened, and wrote in one flush."""

from __future__ import annotations

from dataclasses import dataclass

from cursorkit.ackstate.store.file.log import DamagedRecord
from cursorkit.errors import InvalidArgument

__all__ = ["FlushResult", "RecoveryReport", "StoreOptions"]

_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOptions:
    """When a flush rolls the log into a new generation (Pulsar rolls its cursor ledger by entry count)."""

    compact_min_dead_bytes: int = 4 * _MiB
    """Dead bytes (superseded records and markers) below which the log is never compacted."""
    compact_dead_ratio: float = 1.0
    """Compact once dead bytes exceed both this multiple of the live bytes and the minimum above."""
    sync: bool = True
    """fsync what a flush writes before it returns. False only for a store its writer makes durable
    as a whole afterwards (a rebuild's staged output, synced once before its commit)."""

    def __post_init__(self) -> None:
        dead: object = self.compact_min_dead_bytes
        ratio: object = self.compact_dead_ratio
        if isinstance(dead, bool) or not isinstance(dead, int) or dead < 0:
            raise InvalidArgument(f"compact_min_dead_bytes must be a non-negative int, got {dead!r}")
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio >= 0:
            raise InvalidArgument(f"compact_dead_ratio must be a number >= 0, got {ratio!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryReport:
    """What :meth:`FileCursorStore.open` found: the marker it used and any damage it stepped over."""

    log_file: str
    generation: int
    marker_offset: int
    """Byte offset of the checkpoint marker the state was rebuilt from."""
    marker_sequence: int
    """Flush number of that marker (0: the empty marker written by ``create``)."""
    records_scanned: int
    """Intact records read from the log."""
    ledgers: int
    """Ledger records the marker references."""
    log_bytes: int
    torn_tail_bytes: int = 0
    """Bytes of an incomplete record at the end of the log (a write cut short by a crash)."""
    unused_tail_bytes: int = 0
    """Bytes after the marker used (an unfinished flush, torn tail included); dropped on the next flush."""
    corrupt_records: tuple[DamagedRecord, ...] = ()
    fallbacks: tuple[DamagedRecord, ...] = ()
    """Markers (and logs) passed over for an older one, newest first, with the reason."""
    unfinished_flush_records: int = 0
    """Whole records after the marker used: a flush cut at a record boundary before its marker
    (its state is not recovered, and this says so)."""
    meta_error: str | None = None
    """Why ``store.meta`` was unusable (the log generation was then found by scanning the directory)."""
    stale_files_removed: tuple[str, ...] = ()

    @property
    def damaged(self) -> bool:
        """Whether anything was torn, corrupt or passed over.

        False for a log cut exactly at a flush boundary: that reads as a crash before the flush.
        The flush before the cut is recovered, and the acks cut are redelivered.
        """
        return bool(
            self.torn_tail_bytes
            or self.unfinished_flush_records
            or self.corrupt_records
            or self.fallbacks
            or self.meta_error is not None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushResult:
    """One :meth:`FileCursorStore.flush`: what it wrote (nothing when ``skipped``)."""

    skipped: bool
    """Nothing changed since the last flush, so nothing was written."""
    bytes_written: int
    ledgers_written: int
    ledgers_dropped: int
    """Ledgers emptied since the last flush: dropped from the marker's index."""
    marker_bytes: int
    compacted: bool
    """The flush rolled the log into a new generation (all live ledgers written)."""
    generation: int
    sequence: int
    """Flush number of the marker now current."""
    duration_s: float
