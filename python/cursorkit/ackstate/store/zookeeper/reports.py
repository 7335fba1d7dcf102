"""What opening a ZooKeeper cursor store found, and what one flush wrote."""

from __future__ import annotations

from dataclasses import dataclass

from cursorkit._core import Position

__all__ = ["ZkFlushResult", "ZkRecoveryReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkRecoveryReport:
    """What :meth:`ZkCursorStore.open` found in the znode, and everything it had to step over."""

    location: str
    version: int
    """The znode's version once this store holds it."""
    owner_epoch: int
    """This store's epoch (0: opened read-only)."""
    previous_epoch: int
    """The epoch the znode held (0: never owned by cursorkit)."""
    previous_owner: str | None
    sequence: int
    """Write number of the content recovered."""
    written_by: str
    """``cursorkit``, or ``pulsar`` for a znode with no cursorkit record."""
    state_source: str
    """Where the state came from: ``znode``, ``object`` or ``mark-delete only``."""
    state_object: str | None
    """Key of the state object the znode names, if any."""
    mark_delete: Position
    ranges: int
    """Ack ranges recovered."""
    ranges_recorded: int
    """Ack ranges the writer recorded (more than :attr:`ranges` when state was lost or cut)."""
    batches: int
    batches_recorded: int
    properties: int
    cursor_properties: int
    compression: str | None = None
    """Pulsar's codec when the znode was compressed."""
    conflicts: int = 0
    """Versioned writes retried while taking ownership (other writers at the same time)."""
    znode_bytes: int = 0
    """Bytes of the ownership write (0: opened read-only)."""
    written_compression: str | None = None
    """``ZLIB`` when the ownership write took Pulsar's compressed form (the plain record passed
    ``max_znode_bytes``)."""
    ranges_left_out: int = 0
    """Recovered ranges the ownership write could not keep in the znode (neither form fit
    ``max_znode_bytes``, and no state object holds them): the store holds them, and its next flush
    writes them out or reports the cut."""
    batches_left_out: int = 0
    """Recovered partial batches the ownership write left out, as for :attr:`ranges_left_out`."""
    fallbacks: tuple[str, ...] = ()
    """Why recovery used less than the writer recorded, one line each; empty when nothing was lost."""

    @property
    def damaged(self) -> bool:
        """Whether recovery fell back to less state than was recorded."""
        return bool(self.fallbacks)

    @property
    def rewound(self) -> bool:
        """Whether acks recorded by the writer are missing (they will be redelivered)."""
        return self.ranges < self.ranges_recorded or self.batches < self.batches_recorded or self.damaged


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkFlushResult:
    """One flush to ZooKeeper: what it wrote, and what (if anything) no durable copy holds."""

    skipped: bool
    bytes_written: int
    """Znode and state-object bytes."""
    znode_bytes: int
    object_bytes: int
    version: int
    """The znode's version after the write."""
    sequence: int
    ranges_total: int
    ranges_inline: int
    """Ranges in the znode itself (Pulsar's view)."""
    ranges_cut: int
    """Ranges no durable copy holds (no object store, and more than the znode takes)."""
    batches_cut: int
    conflicts: int
    """Versioned writes retried because another writer had changed the znode."""
    duration_s: float
    compression: str | None = None
    """``ZLIB`` when the znode was written in Pulsar's compressed form (the plain one passed the budget)."""
    redelivery_runs_left_out: int = 0
    """Runs of redelivery counts past their share of the znode, not written (beyond Pulsar)."""

    @property
    def truncated(self) -> bool:
        """Whether part of the state was left out of everything durable."""
        return self.ranges_cut > 0 or self.batches_cut > 0
