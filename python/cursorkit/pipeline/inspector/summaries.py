"""What `cursorkit inspect` reports: one frozen summary per kind of store and per part."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal, TypeVar, cast

from cursorkit import _core
from cursorkit.ackstate.cursor import CursorStats
from cursorkit.ackstate.store import RecoveryReport

PROPERTIES_FILE = "cursor.properties"
"""Name of a ``FileCursorProperties`` file looked for next to (or inside) a bucket store."""

T = TypeVar("T")
CURSOR_LOG = "cursor-*.log"
BUCKET_FILE = "bucket-*.snap"


# -- summaries ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentSummary:
    """One segment of a bucket snapshot, as its metadata entry describes it."""

    segment: int
    """1-based segment entry id."""
    min_deliver_at: int
    """``min_schedule_timestamp`` (ms)."""
    max_deliver_at: int
    """``max_schedule_timestamp`` (ms)."""
    messages: int
    """Delayed indexes: the cardinalities of the segment's per-ledger bitmaps, summed."""
    ledgers: int
    """Ledgers with an index in the segment."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketSummary:
    """One stored bucket snapshot: owner, ledger range, segments; ``error`` when it is damaged.

    Fields stay ``None`` when damage kept them from being read (a bad header hides the bucket key; a
    bad metadata record hides the segments).
    """

    bucket_id: int
    length_bytes: int | None
    bucket_key: str | None = None
    start_ledger_id: int | None = None
    end_ledger_id: int | None = None
    topic: str | None = None
    cursor: str | None = None
    segments: tuple[SegmentSummary, ...] = ()
    verified: bool = False
    """Every segment record was read back, checksummed, decoded and matched against the metadata."""
    error: str | None = None
    """The ``CorruptSnapshot`` (or other read failure) message."""

    @property
    def damaged(self) -> bool:
        """Whether anything of the bucket could not be read or did not check out."""
        return self.error is not None

    @property
    def messages(self) -> int:
        """Delayed indexes over all segments read."""
        return sum(s.messages for s in self.segments)

    @property
    def first_deliver_at(self) -> int | None:
        """Earliest deliver-at in the bucket (ms), None when no segment was read."""
        return min((s.min_deliver_at for s in self.segments), default=None)

    @property
    def last_deliver_at(self) -> int | None:
        """Latest deliver-at in the bucket (ms), None when no segment was read."""
        return max((s.max_deliver_at for s in self.segments), default=None)


PropertyKind = Literal["bucket", "mutable_tail"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PropertyRef:
    """A cursor property naming a bucket snapshot, and what is wrong with it (``problem``) if anything."""

    key: str
    value: str
    kind: PropertyKind
    """``"bucket"`` (``#pulsar.internal.delayed.bucket_<start>_<end>``) or the persisted mutable tail."""
    bucket_id: int | None
    """The snapshot id the value names; None when the value is not an id."""
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PropertiesSummary:
    """A ``FileCursorProperties`` file checked against the bucket store it points into."""

    path: str
    error: str | None = None
    """Why the file could not be read (then nothing else is filled in)."""
    references: tuple[PropertyRef, ...] = ()
    other_keys: int = 0
    """Properties that name no bucket snapshot."""
    orphans: tuple[int, ...] = ()
    """Stored snapshot ids no property names: leaked, or written just before a crash (the tracker's
    recovery adopts those that fit and deletes the rest)."""
    missing: tuple[int, ...] = ()
    """Snapshot ids properties name that the store does not hold."""

    @property
    def damaged(self) -> bool:
        """Whether the file is unreadable or any reference is broken (orphans alone are not damage)."""
        return self.error is not None or any(r.problem is not None for r in self.references)


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketStoreSummary:
    """A bucket snapshot store: every bucket, and the cursor properties that point into it."""

    path: str
    error: str | None = None
    """Why the store could not be opened (then ``buckets`` is empty)."""
    buckets: tuple[BucketSummary, ...] = ()
    properties: PropertiesSummary | None = None

    @property
    def damaged(self) -> bool:
        """Whether the store, a bucket or a property reference is damaged."""
        return (
            self.error is not None
            or any(b.damaged for b in self.buckets)
            or (self.properties is not None and self.properties.damaged)
        )

    @property
    def messages(self) -> int:
        """Delayed indexes over every readable bucket."""
        return sum(b.messages for b in self.buckets)

    @property
    def length_bytes(self) -> int:
        """Stored bytes of every bucket file."""
        return sum(b.length_bytes or 0 for b in self.buckets)

    @property
    def damaged_buckets(self) -> tuple[int, ...]:
        """Ids of the buckets that are damaged."""
        return tuple(b.bucket_id for b in self.buckets if b.damaged)


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeSummary:
    """One individually acknowledged range, open below and closed above: ``(lower, upper]``."""

    lower: _core.Position
    upper: _core.Position

    def __str__(self) -> str:
        return f"({self.lower}, {self.upper}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSummary:
    """One partially acknowledged batch entry."""

    position: _core.Position
    batch_size: int
    acked: int
    """Batch indexes acknowledged so far."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CursorStoreSummary:
    """A cursor store: its log, what recovery found, and the recovered cursor's figures."""

    path: str
    error: str | None = None
    """Why nothing could be recovered (then only ``path`` is meaningful)."""
    name: str = ""
    generation: int = 0
    sequence: int = 0
    """Flush number of the checkpoint marker recovered."""
    log_bytes: int = 0
    live_bytes: int = 0
    dead_bytes: int = 0
    recovery: RecoveryReport | None = None
    stats: CursorStats | None = None
    acked_ledgers: int = 0
    """Ledgers holding individually acknowledged entries."""
    ranges: tuple[RangeSummary, ...] = ()
    """The first individually acknowledged ranges (at most the ``sample`` asked for)."""
    batches: tuple[BatchSummary, ...] = ()
    """The first partial batches (at most the ``sample`` asked for)."""
    properties: Mapping[str, int] = field(default_factory=dict)
    """The cursor's properties (Pulsar's ``ManagedCursorInfo.properties``)."""
    inspected_copy: bool = False
    """Opened from a temporary copy, because opening in place would have deleted stale files;
    ``recovery.stale_files_removed`` then names the files an in-place open would delete (they are kept)."""

    @property
    def damaged(self) -> bool:
        """Whether nothing was recoverable or recovery stepped over damage."""
        return self.error is not None or (self.recovery is not None and self.recovery.damaged)


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuildOutputSummary:
    """A ``cursorkit rebuild`` output: the manifest and a summary of each part it names."""

    path: str
    topic: str
    now_ms: int
    delayed_topic: str | None = None
    delayed_cursor: str | None = None
    delayed: BucketStoreSummary | None = None
    """The delayed index's bucket store (its properties file checked against it); None if none."""
    subscriptions: Mapping[str, CursorStoreSummary] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Parts the manifest names that are missing or do not match it."""

    @property
    def damaged(self) -> bool:
        """Whether any part is missing, mismatched or damaged."""
        return (
            bool(self.problems)
            or (self.delayed is not None and self.delayed.damaged)
            or any(s.damaged for s in self.subscriptions.values())
        )


InspectSummary = BucketStoreSummary | CursorStoreSummary | RebuildOutputSummary
"""What :func:`inspect_path` returns, by the kind of directory it was given."""


def retarget(value: T, old: str, new: str) -> T:
    """``value`` with every string in it that mentions ``old`` (a copy's path) naming ``new`` instead."""
    out: Any = value
    if isinstance(value, str):
        out = value.replace(old, new)
    elif isinstance(value, tuple):
        out = tuple(retarget(v, old, new) for v in value)
    elif isinstance(value, Mapping):
        out = {retarget(k, old, new): retarget(v, old, new) for k, v in value.items()}
    elif is_dataclass(value) and not isinstance(value, type):
        out = replace(
            value, **{f.name: retarget(getattr(value, f.name), old, new) for f in fields(value) if f.init}
        )
    return cast(T, out)
