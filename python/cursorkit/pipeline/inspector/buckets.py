"""Inspecting a bucket snapshot store and the cursor properties that point into it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cursorkit import _core
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed import snapshot
from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, parse_bucket_key
from cursorkit.delayed.storage.api import BucketInfo
from cursorkit.delayed.storage.file import FileBucketSnapshotStorage
from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
)
from cursorkit.pipeline.inspector.summaries import (
    BucketStoreSummary,
    BucketSummary,
    PropertiesSummary,
    PropertyKind,
    PropertyRef,
    SegmentSummary,
)
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

# -- bucket stores ---------------------------------------------------------------------------------------


def inspect_bucket_store(root: Path, props: Path | None, *, verify: bool) -> BucketStoreSummary:
    """Every bucket of a snapshot store, checked against the properties at ``props`` if any."""
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
    except (BucketNotFound, CorruptSnapshot, OSError) as e:
        return BucketSummary(bucket_id=bucket_id, length_bytes=None, error=str(e))
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
