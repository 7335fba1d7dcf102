"""``cursorkit inspect PATH``: what a bucket snapshot store, a cursor store or a rebuild output holds.

The kind of ``PATH`` is told from its content: ``manifest.json`` (a ``cursorkit rebuild`` output),
``store.meta`` / ``cursor-*.log`` (a :class:`~cursorkit.ackstate.store.CursorStore`) or
``next-bucket-id`` / ``bucket-*.snap`` (a :class:`~cursorkit.delayed.storage.FileBucketSnapshotStorage`).
:func:`inspect_path` reads it through the library's own stores, so every figure is what recovery would
see, and damage is reported per part (a corrupt bucket, an unrecoverable cursor store) instead of
raised, so the rest is still summarised. :func:`render` turns a summary into rich tables.

Nothing is modified, with two exceptions the stores make on open: the bucket store drops temp files an
interrupted write left (as its ``start`` always does), and so does ``FileCursorProperties`` for its
own file. ``CursorStore.open`` would also delete superseded log generations and a leftover metadata
temp file, so a cursor store holding anything beyond ``store.meta`` and one log is opened as a copy.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import io
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import numpy as np
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from cursorkit import _core
from cursorkit.ackstate.cursor import CursorStats
from cursorkit.ackstate.store import META_FILE, CursorStore, RecoveryReport
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, parse_bucket_key
from cursorkit.delayed.properties import FileCursorProperties
from cursorkit.delayed.storage import NEXT_ID_FILE, BucketInfo, FileBucketSnapshotStorage
from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
)
from cursorkit.fsio import read_regular
from cursorkit.pipeline.load import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION, inside, parse_manifest
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "BatchSummary",
    "BucketStoreSummary",
    "BucketSummary",
    "CursorStoreSummary",
    "InspectSummary",
    "PropertiesSummary",
    "PropertyRef",
    "RangeSummary",
    "RebuildOutputSummary",
    "SegmentSummary",
    "inspect_path",
    "render",
]


PROPERTIES_FILE = "cursor.properties"
"""Name of a ``FileCursorProperties`` file looked for next to (or inside) a bucket store."""

_T = TypeVar("_T")
_CURSOR_LOG = "cursor-*.log"
_BUCKET_FILE = "bucket-*.snap"


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


# -- detection -----------------------------------------------------------------------------------------


def _kind_of(root: Path) -> Literal["rebuild", "cursor", "bucket"]:
    """Which kind of directory ``root`` is, from the files it holds."""
    try:
        if not root.is_dir():
            what = "does not exist" if not root.exists() else "is not a directory"
            raise InvalidArgument(
                f"{root} {what}; expected a bucket store, a cursor store or a rebuild output"
            )
        names = [p.name for p in root.iterdir()]
    except OSError as e:
        raise InvalidArgument(f"{root}: cannot read the directory ({e.strerror or e})") from e
    kinds: list[Literal["rebuild", "cursor", "bucket"]] = []
    if MANIFEST_FILE in names:
        kinds.append("rebuild")
    if META_FILE in names or fnmatch.filter(names, _CURSOR_LOG):
        kinds.append("cursor")
    if NEXT_ID_FILE in names or fnmatch.filter(names, _BUCKET_FILE):
        kinds.append("bucket")
    if len(kinds) == 1:
        return kinds[0]
    expected = (
        f"a bucket snapshot store ({NEXT_ID_FILE} or {_BUCKET_FILE}), a cursor store "
        f"({META_FILE} or {_CURSOR_LOG}) or a rebuild output ({MANIFEST_FILE})"
    )
    if not kinds:
        raise InvalidArgument(f"{root} is not a cursorkit directory; expected {expected}")
    raise InvalidArgument(
        f"{root} holds the files of more than one kind ({', '.join(kinds)}); expected {expected}"
    )


def inspect_path(
    path: str | os.PathLike[str],
    *,
    properties: str | os.PathLike[str] | None = None,
    verify: bool = True,
    sample: int = 20,
) -> InspectSummary:
    """Summarises a bucket store, a cursor store or a rebuild output directory, reading it only.

    Args:
        path: The directory; its kind is told from its content.
        properties: A ``FileCursorProperties`` file to check a bucket store against. Without it,
            ``cursor.properties`` next to the store (or inside it) is used when there is one; a
            rebuild output uses the file its manifest names.
        verify: Also read back every segment record of every bucket (checksum, decode, counts and
            deliver-at bounds against the metadata); without it only headers and metadata are read.
        sample: How many acknowledged ranges and partial batches of a cursor to list.

    Raises:
        InvalidArgument: ``path`` is none of the three kinds (the message says what was expected), or
            ``properties`` is given for another kind or does not exist.
        InvalidInputType: an argument of the wrong type.
        UnsupportedVersion: a manifest of a version this build does not read.
        CorruptSnapshot: a manifest that is not of the expected shape.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputType(f"path must be a str or path, got {type(path).__name__}")
    if properties is not None and not isinstance(properties, str | os.PathLike):
        raise InvalidInputType(f"properties must be a str or path, got {type(properties).__name__}")
    if not isinstance(verify, bool):
        raise InvalidInputType(f"verify must be a bool, got {type(verify).__name__}")
    if isinstance(sample, bool) or not isinstance(sample, int):
        raise InvalidInputType(f"sample must be an int, got {type(sample).__name__}")
    if sample < 0:
        raise InvalidArgument(f"sample must be >= 0, got {sample}")
    root = Path(path)
    kind = _kind_of(root)
    if properties is not None and kind != "bucket":
        raise InvalidArgument(f"properties applies to a bucket store only; {root} is a {kind} directory")
    if kind == "rebuild":
        return _inspect_rebuild(root, verify=verify, sample=sample)
    if kind == "cursor":
        return _inspect_cursor_store(root, sample=sample)
    props: Path | None
    if properties is not None:
        props = Path(properties)
        if not props.is_file():
            raise InvalidArgument(f"properties file {props} does not exist")
    else:
        props = _find_properties(root)
    return _inspect_bucket_store(root, props, verify=verify)


def _find_properties(root: Path) -> Path | None:
    for candidate in (root.parent / PROPERTIES_FILE, root / PROPERTIES_FILE):
        if candidate.is_file():
            return candidate
    return None


# -- bucket stores ---------------------------------------------------------------------------------------


def _inspect_bucket_store(root: Path, props: Path | None, *, verify: bool) -> BucketStoreSummary:
    storage = FileBucketSnapshotStorage(root, fsync=False)
    try:
        storage.start()
    except (CorruptSnapshot, OSError) as e:
        summary = BucketStoreSummary(path=str(root), error=f"store does not open: {e}")
        if props is not None:
            summary = replace(summary, properties=_check_properties(props, None, {}))
        return summary
    try:
        ids = storage.list_bucket_snapshots()
        buckets = tuple(_inspect_bucket(storage, bid, verify=verify) for bid in ids)
    finally:
        storage.close()
    checked = _check_properties(props, ids, {b.bucket_id: b for b in buckets}) if props is not None else None
    return BucketStoreSummary(path=str(root), buckets=buckets, properties=checked)


def _inspect_bucket(storage: FileBucketSnapshotStorage, bucket_id: int, *, verify: bool) -> BucketSummary:
    """One bucket, read as far as it verifies; the first damage found ends up in ``error``."""
    try:
        length: int | None = storage.get_bucket_snapshot_length(bucket_id)
    except BucketNotFound:
        length = None
    summary = BucketSummary(bucket_id=bucket_id, length_bytes=length)
    try:
        info = storage.bucket_info(bucket_id)
        summary = replace(summary, **_owner_fields(info))
        rng = parse_bucket_key(info.bucket_key)
        if rng is not None:
            summary = replace(summary, start_ledger_id=rng[0], end_ledger_id=rng[1])
        meta = storage.get_bucket_snapshot_metadata(bucket_id)
        summary = replace(summary, segments=_segments_of(meta))
        if verify:
            for seg in summary.segments:
                _verify_segment(storage, bucket_id, seg)
            summary = replace(summary, verified=True)
    except (CorruptSnapshot, BucketNotFound, OSError) as e:
        summary = replace(summary, error=str(e))
    return summary


def _owner_fields(info: BucketInfo) -> dict[str, Any]:
    return {"bucket_key": info.bucket_key, "topic": info.topic, "cursor": info.cursor}


def _segments_of(meta: SnapshotMetadata) -> tuple[SegmentSummary, ...]:
    out: list[SegmentSummary] = []
    for i, m in enumerate(meta.metadata_list, start=1):
        try:
            counts = [_core.bitmap_cardinality(b) for b in m.delayed_index_bit_map.values()]
        except CorruptSnapshot as e:
            raise CorruptSnapshot(f"segment {i}: delayed index bitmap does not decode ({e})") from e
        out.append(
            SegmentSummary(
                segment=i,
                min_deliver_at=m.min_schedule_timestamp,
                max_deliver_at=m.max_schedule_timestamp,
                messages=sum(counts),
                ledgers=len(counts),
            )
        )
    return tuple(out)


def _verify_segment(storage: FileBucketSnapshotStorage, bucket_id: int, seg: SegmentSummary) -> None:
    """Reads one segment record back and checks it against its metadata entry (``CorruptSnapshot``)."""
    blobs = storage.get_bucket_snapshot_segment(bucket_id, seg.segment, seg.segment)
    if len(blobs) != 1:
        raise CorruptSnapshot(f"bucket snapshot {bucket_id}: segment {seg.segment} is missing")
    try:
        arrays = snapshot.decode(blobs)
    except CorruptSnapshot as e:
        raise CorruptSnapshot(
            f"bucket snapshot {bucket_id}: segment {seg.segment} does not decode ({e})"
        ) from e
    ts = arrays.timestamps
    where = f"bucket snapshot {bucket_id}: segment {seg.segment}"
    if len(ts) != seg.messages:
        raise CorruptSnapshot(f"{where} holds {len(ts)} indexes, its metadata bitmaps {seg.messages}")
    if len(ts) and (int(ts.min()) != seg.min_deliver_at or int(ts.max()) != seg.max_deliver_at):
        raise CorruptSnapshot(
            f"{where} spans deliver-at {int(ts.min())}..{int(ts.max())}, "
            f"its metadata {seg.min_deliver_at}..{seg.max_deliver_at}"
        )
    ledgers = len(np.unique(arrays.ledger_ids))
    if ledgers != seg.ledgers:
        raise CorruptSnapshot(f"{where} holds indexes of {ledgers} ledgers, its metadata {seg.ledgers}")


def _check_properties(
    path: Path, stored: Sequence[int] | None, buckets: Mapping[int, BucketSummary]
) -> PropertiesSummary:
    """Cross-references a properties file and the snapshot ids a store holds (``None``: store unread)."""
    try:
        data = dict(FileCursorProperties(path))
    except (CorruptSnapshot, OSError) as e:
        return PropertiesSummary(path=str(path), error=str(e))
    refs, other = _references(data)
    present = set(stored) if stored is not None else None
    checked: list[PropertyRef] = []
    for ref in refs:
        problem = ref.problem
        if problem is None and ref.bucket_id is not None and present is not None:
            bucket = buckets.get(ref.bucket_id)
            if ref.bucket_id not in present:
                problem = "names a snapshot the store does not hold"
            elif (
                ref.kind == "bucket"
                and bucket is not None
                and bucket.bucket_key is not None
                and bucket.bucket_key != ref.key
            ):
                problem = f"the snapshot belongs to {bucket.bucket_key}"
        checked.append(replace(ref, problem=problem))
    # A malformed key names nothing: the tracker's recovery drops it, leaving its snapshot an orphan.
    named = {r.bucket_id for r in refs if r.bucket_id is not None and r.problem is None}
    orphans, missing = _orphans_and_missing(present or set(), named)
    return PropertiesSummary(
        path=str(path),
        references=tuple(checked),
        other_keys=other,
        orphans=orphans if present is not None else (),
        missing=missing if present is not None else (),
    )


def _orphans_and_missing(
    stored: Iterable[int], named: Iterable[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Stored ids no property names, and named ids the store lacks, each ascending."""
    have, want = set(stored), set(named)
    return tuple(sorted(have - want)), tuple(sorted(want - have))


def _references(props: Mapping[str, str]) -> tuple[list[PropertyRef], int]:
    """The properties naming bucket snapshots, in key order, and how many others there are."""
    refs: list[PropertyRef] = []
    other = 0
    for key in sorted(props):
        value = props[key]
        kind: PropertyKind
        problem: str | None = None
        if key == MUTABLE_TAIL_PROPERTY:
            kind = "mutable_tail"
        else:
            try:
                if parse_bucket_key(key) is None:
                    other += 1
                    continue
            except CorruptSnapshot as e:
                problem = str(e)
            kind = "bucket"
        bucket_id = int(value) if value.isascii() and value.isdigit() else None
        if bucket_id is None and problem is None:
            problem = f"value {value!r} is not a snapshot id"
        refs.append(PropertyRef(key=key, value=value, kind=kind, bucket_id=bucket_id, problem=problem))
    return refs, other


# -- cursor stores -------------------------------------------------------------------------------------


def _inspect_cursor_store(root: Path, *, sample: int) -> CursorStoreSummary:
    """Opens a cursor store (or a copy of it, when opening would delete files) and recovers its cursor."""
    names = [p.name for p in root.iterdir()]
    logs = fnmatch.filter(names, _CURSOR_LOG)
    if set(names) <= {META_FILE, *logs} and len(logs) <= 1:
        # Open writes nothing here: it only deletes other generations and a metadata temp file.
        return _summarise_store(root, root, sample=sample, copy=False)
    with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
        copy = Path(tmp) / "store"
        copy.mkdir()
        try:
            for name in names:
                if name == META_FILE or name.startswith(META_FILE + ".") or name in logs:
                    (copy / name).write_bytes(read_regular(root / name))  # never through a link
        except OSError as e:
            return CursorStoreSummary(path=str(root), error=f"{name}: {e.strerror or e}", inspected_copy=True)
        summary = _summarise_store(copy, root, sample=sample, copy=True)
    return _retarget(summary, str(copy), str(root))


def _summarise_store(where: Path, root: Path, *, sample: int, copy: bool) -> CursorStoreSummary:
    try:
        store = CursorStore.open(where)
    except (CorruptSnapshot, OSError) as e:
        return CursorStoreSummary(path=str(root), error=str(e), inspected_copy=copy)
    with store:
        try:
            cursor = store.recover()
        except CorruptSnapshot as e:
            return CursorStoreSummary(
                path=str(root), error=str(e), recovery=store.report, inspected_copy=copy
            )
        acked = cursor.individually_deleted
        ranges = tuple(
            RangeSummary(
                lower=_core.Position(int(r[0]), int(r[1])), upper=_core.Position(int(r[2]), int(r[3]))
            )
            for r in acked.ranges_array(sample)
        )
        batches = tuple(_batch_summary(row) for row in cursor.batches()[:sample])
        return CursorStoreSummary(
            path=str(root),
            name=store.name,
            generation=store.generation,
            sequence=store.sequence,
            log_bytes=store.log_bytes,
            live_bytes=store.live_bytes,
            dead_bytes=store.dead_bytes,
            recovery=store.report,
            stats=cursor.stats(),
            acked_ledgers=len(acked.ledgers()),
            ranges=ranges,
            batches=batches,
            properties=dict(cursor.properties),
            inspected_copy=copy,
        )


def _batch_summary(row: tuple[int, int, int, bytes]) -> BatchSummary:
    ledger, entry, size, words = row
    bits = np.unpackbits(np.frombuffer(words, dtype=np.uint8), bitorder="little")[:size]
    return BatchSummary(position=_core.Position(ledger, entry), batch_size=size, acked=size - int(bits.sum()))


def _retarget(value: _T, old: str, new: str) -> _T:
    """``value`` with every string mentioning the copy's path pointing at the original instead."""
    out: Any = value
    if isinstance(value, str):
        out = value.replace(old, new)
    elif isinstance(value, tuple):
        out = tuple(_retarget(v, old, new) for v in value)
    elif is_dataclass(value) and not isinstance(value, type):
        out = replace(
            value, **{f.name: _retarget(getattr(value, f.name), old, new) for f in fields(value) if f.init}
        )
    return cast(_T, out)


# -- rebuild outputs -------------------------------------------------------------------------------------


def _inspect_rebuild(root: Path, *, verify: bool, sample: int) -> RebuildOutputSummary:
    manifest = parse_manifest(root / MANIFEST_FILE)
    problems: list[str] = []
    delayed = manifest["delayed"]
    delayed_summary: BucketStoreSummary | None = None
    delayed_topic = delayed_cursor = None
    if delayed is not None:
        delayed_topic, delayed_cursor = delayed["topic"], delayed["cursor"]
        storage = _part(root, delayed["storage"], "delayed.storage", problems)
        props = _part(root, delayed["properties"], "delayed.properties", problems)
        if props is not None and not props.is_file():
            problems.append(f"delayed.properties: {props} is missing")
            props = None
        if storage is not None and not storage.is_dir():
            problems.append(f"delayed.storage: {storage} is missing")
            storage = None
        if storage is not None:
            delayed_summary = _inspect_bucket_store(storage, props, verify=verify)
            for b in delayed_summary.buckets:
                for what, got, want in (
                    ("topic", b.topic, delayed_topic),
                    ("cursor", b.cursor, delayed_cursor),
                ):
                    if got is not None and got != want:
                        problems.append(
                            f"bucket snapshot {b.bucket_id} belongs to {what} {got!r}, not {want!r}"
                        )
    subs: dict[str, CursorStoreSummary] = {}
    for name, rel in manifest["subscriptions"].items():
        where = _part(root, rel, f"subscriptions[{name!r}]", problems)
        if where is None:
            continue
        if not where.is_dir():
            problems.append(f"subscriptions[{name!r}]: {where} is missing")
            continue
        if not any(p.name == META_FILE or fnmatch.fnmatch(p.name, _CURSOR_LOG) for p in where.iterdir()):
            problems.append(f"subscriptions[{name!r}]: {where} is not a cursor store")
            continue
        subs[name] = _inspect_cursor_store(where, sample=sample)
    return RebuildOutputSummary(
        path=str(root),
        topic=manifest["topic"],
        now_ms=manifest["now_ms"],
        delayed_topic=delayed_topic,
        delayed_cursor=delayed_cursor,
        delayed=delayed_summary,
        subscriptions=subs,
        problems=tuple(problems),
    )


def _part(root: Path, rel: str, what: str, problems: list[str]) -> Path | None:
    """A path the manifest names, if it stays inside the output directory (else a problem)."""
    try:
        return inside(root, rel, what)
    except CorruptSnapshot as e:
        problems.append(str(e))
        return None


# -- rendering -------------------------------------------------------------------------------------------


def render(summary: InspectSummary, *, console: Console | None = None, max_rows: int = 50) -> str:
    """Prints a summary as rich tables on ``console`` (when given) and returns it as plain text.

    Args:
        summary: What :func:`inspect_path` returned.
        console: Where to print; the text is returned either way.
        max_rows: Rows shown per table (buckets, properties, subscriptions); the rest are counted.
    """
    if not isinstance(summary, BucketStoreSummary | CursorStoreSummary | RebuildOutputSummary):
        raise InvalidInputType(f"summary must come from inspect_path, got {type(summary).__name__}")
    rows: object = max_rows
    if isinstance(rows, bool) or not isinstance(rows, int):
        raise InvalidInputType(f"max_rows must be an int, got {type(rows).__name__}")
    if rows < 1:
        raise InvalidArgument(f"max_rows must be >= 1, got {rows}")
    parts: list[RenderableType] = []
    for section in _renderables(summary, rows):
        if parts:
            parts.append(Text(""))
        parts.append(section)
    body = Group(*parts)
    if console is not None:
        console.print(body)
    buffer = io.StringIO()
    out = Console(
        file=buffer,
        width=console.width if console is not None else 120,
        color_system=None,
        force_terminal=False,
        soft_wrap=False,
    )
    out.print(body)
    return buffer.getvalue()


def _renderables(summary: InspectSummary, max_rows: int) -> Iterator[RenderableType]:
    if isinstance(summary, BucketStoreSummary):
        yield from _render_bucket_store(summary, max_rows, title="Bucket snapshot store")
    elif isinstance(summary, CursorStoreSummary):
        yield from _render_cursor_store(summary, max_rows, title="Cursor store")
    else:
        yield from _render_rebuild(summary, max_rows)


def _status(damaged: bool) -> Text:
    return Text("DAMAGED", style="bold red") if damaged else Text("ok", style="green")


def _when(ms: int | None) -> str:
    """A deliver-at in ms as UTC ISO time (the raw number when out of the calendar's range)."""
    if ms is None:
        return "-"
    try:
        stamp = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _table(title: str) -> Table:
    """A table whose title is never wrapped to the width of a narrow body."""
    return Table(title=title, title_justify="left", min_width=len(title))


def _facts(title: str, rows: Iterable[tuple[str, object]]) -> Table:
    table = Table(
        title=title, title_justify="left", show_header=False, box=None, pad_edge=False, min_width=len(title)
    )
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value if isinstance(value, Text) else str(value))
    return table


def _cut(rows: Sequence[Any], max_rows: int) -> tuple[Sequence[Any], str | None]:
    if len(rows) <= max_rows:
        return rows, None
    return rows[:max_rows], f"… {len(rows) - max_rows} more not shown"


def _render_bucket_store(s: BucketStoreSummary, max_rows: int, *, title: str) -> Iterator[RenderableType]:
    firsts = [b.first_deliver_at for b in s.buckets if b.first_deliver_at is not None]
    lasts = [b.last_deliver_at for b in s.buckets if b.last_deliver_at is not None]
    facts: list[tuple[str, object]] = [
        ("path", s.path),
        ("status", _status(s.damaged)),
        ("buckets", f"{len(s.buckets)} ({len(s.damaged_buckets)} damaged)"),
        ("messages", s.messages),
        ("bytes", s.length_bytes),
        ("deliver-at", f"{_when(min(firsts, default=None))} .. {_when(max(lasts, default=None))}"),
        ("properties", s.properties.path if s.properties is not None else "none found"),
    ]
    if s.error is not None:
        facts.append(("error", Text(s.error, style="red")))
    yield _facts(title, facts)
    if s.buckets:
        table = _table("Buckets")
        for col in ("id", "ledgers", "segments", "messages", "first deliver-at", "last deliver-at", "bytes"):
            table.add_column(
                col, justify="right" if col in {"id", "segments", "messages", "bytes"} else "left"
            )
        table.add_column("status")
        shown, more = _cut(s.buckets, max_rows)
        for b in shown:
            ledgers = (
                f"{b.start_ledger_id}..{b.end_ledger_id}"
                if b.start_ledger_id is not None
                else _opt(b.bucket_key)
            )
            status = Text(b.error, style="red") if b.error is not None else Text("ok", style="green")
            table.add_row(
                str(b.bucket_id),
                ledgers,
                str(len(b.segments)),
                str(b.messages),
                _when(b.first_deliver_at),
                _when(b.last_deliver_at),
                _opt(b.length_bytes),
                status,
            )
        if more:
            table.caption = more
        yield table
    if s.properties is not None:
        yield from _render_properties(s.properties, max_rows)


def _render_properties(p: PropertiesSummary, max_rows: int) -> Iterator[RenderableType]:
    if p.error is not None:
        yield _facts("Cursor properties", [("path", p.path), ("error", Text(p.error, style="red"))])
        return
    table = _table(f"Cursor properties ({p.path})")
    table.add_column("key")
    table.add_column("snapshot", justify="right")
    table.add_column("status")
    shown, more = _cut(p.references, max_rows)
    for r in shown:
        status = Text(r.problem, style="red") if r.problem is not None else Text("ok", style="green")
        table.add_row(r.key, r.value, status)
    captions = [c for c in (more, f"{p.other_keys} other properties" if p.other_keys else None) if c]
    if captions:
        table.caption = "; ".join(captions)
    yield table
    yield _facts(
        "",
        [
            ("orphan snapshots", ", ".join(map(str, p.orphans)) or "none"),
            ("missing snapshots", Text(", ".join(map(str, p.missing)), style="red") if p.missing else "none"),
        ],
    )


def _render_cursor_store(s: CursorStoreSummary, max_rows: int, *, title: str) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [("path", s.path), ("status", _status(s.damaged))]
    if s.inspected_copy:
        stale = ", ".join(s.recovery.stale_files_removed) if s.recovery is not None else ""
        facts.append(("opened", f"a copy (opening in place would delete stale files: {stale or 'none'})"))
    if s.error is not None:
        facts.append(("error", Text(s.error, style="red")))
    st = s.stats
    if st is not None:
        facts += [
            ("name", s.name),
            ("generation / flush", f"{s.generation} / {s.sequence}"),
            ("log bytes", f"{s.log_bytes} ({s.live_bytes} live, {s.dead_bytes} dead)"),
            ("mark-delete", st.mark_delete_position),
            ("acked ranges", st.non_contiguous_deleted_ranges),
            ("individually acked", f"{st.individually_acked_entries} in {s.acked_ledgers} ledgers"),
            ("partial batches", st.partial_batches),
            ("fully persistable", st.fully_persistable),
            (
                "persisted sizes",
                f"compact {st.compact_bytes} B, MessageRange {st.message_range_bytes} B, "
                f"LongListMap {st.long_list_map_bytes} B",
            ),
            ("memory", f"{st.memory_bytes} B"),
        ]
        if s.properties:
            facts.append(("properties", ", ".join(f"{k}={v}" for k, v in sorted(s.properties.items()))))
    yield _facts(title, facts)
    if s.recovery is not None:
        yield from _render_recovery(s.recovery)
    if s.ranges and st is not None:
        table = _table("Acknowledged ranges (lower, upper]")
        table.add_column("range")
        for r in s.ranges[:max_rows]:
            table.add_row(str(r))
        if st.non_contiguous_deleted_ranges > min(len(s.ranges), max_rows):
            table.caption = f"first {min(len(s.ranges), max_rows)} of {st.non_contiguous_deleted_ranges}"
        yield table
    if s.batches and st is not None:
        table = _table("Partial batches")
        for col in ("position", "batch size", "acked"):
            table.add_column(col, justify="left" if col == "position" else "right")
        for b in s.batches[:max_rows]:
            table.add_row(str(b.position), str(b.batch_size), str(b.acked))
        if st.partial_batches > min(len(s.batches), max_rows):
            table.caption = f"first {min(len(s.batches), max_rows)} of {st.partial_batches}"
        yield table


def _render_recovery(r: RecoveryReport) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [
        ("log", r.log_file),
        ("marker", f"flush {r.marker_sequence} at byte {r.marker_offset}, {r.ledgers} ledger records"),
        ("records scanned", r.records_scanned),
    ]
    if r.torn_tail_bytes:
        facts.append(("torn tail", Text(f"{r.torn_tail_bytes} bytes", style="red")))
    if r.unused_tail_bytes:
        facts.append(("unused tail", f"{r.unused_tail_bytes} bytes"))
    if r.meta_error is not None:
        facts.append(("store.meta", Text(r.meta_error, style="red")))
    facts.extend(("corrupt", Text(str(d), style="red")) for d in r.corrupt_records)
    facts.extend(("passed over", Text(str(d), style="red")) for d in r.fallbacks)
    yield _facts("Recovery", facts)


def _render_rebuild(s: RebuildOutputSummary, max_rows: int) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [
        ("path", s.path),
        ("status", _status(s.damaged)),
        ("topic", s.topic),
        ("now", f"{_when(s.now_ms)} ({s.now_ms})"),
        (
            "delayed index",
            f"{s.delayed_topic} / {s.delayed_cursor}" if s.delayed_topic is not None else "none",
        ),
        ("subscriptions", len(s.subscriptions)),
    ]
    facts.extend(("problem", Text(p, style="red")) for p in s.problems)
    yield _facts("Rebuild output", facts)
    if s.delayed is not None:
        yield from _render_bucket_store(s.delayed, max_rows, title="Delayed index")
    if s.subscriptions:
        table = _table("Subscriptions")
        for col in ("subscription", "mark-delete", "ranges", "acked", "batches", "log bytes", "status"):
            table.add_column(
                col, justify="right" if col in {"ranges", "acked", "batches", "log bytes"} else "left"
            )
        items = sorted(s.subscriptions.items())
        shown, more = _cut(items, max_rows)
        for name, c in shown:
            st = c.stats
            status = _status(c.damaged)
            table.add_row(
                name,
                str(st.mark_delete_position) if st is not None else "-",
                str(st.non_contiguous_deleted_ranges) if st is not None else "-",
                str(st.individually_acked_entries) if st is not None else "-",
                str(st.partial_batches) if st is not None else "-",
                str(c.log_bytes) if st is not None else "-",
                status,
            )
        if more:
            table.caption = more
        yield table
        for name, c in items:
            if c.damaged:
                yield from _render_cursor_store(c, max_rows, title=f"Subscription {name!r}")
