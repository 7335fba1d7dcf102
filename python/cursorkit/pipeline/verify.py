"""Checking a rebuild's output against the single-process reference, through the library's own loaders.

Cursors must be equal (mark-delete, acked ranges, partial batches); the delayed index must hold the
reference's buckets with the same indexes; and a tracker recovered from it must emit exactly the
not-yet-due messages, in deliver-at order.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed import FileBucketSnapshotStorage, snapshot
from cursorkit.delayed.bucket import parse_bucket_key
from cursorkit.pipeline.load import open_delayed_index, read_cursors, read_manifest
from cursorkit.pipeline.reference import ReferenceRebuild

__all__ = ["Verification", "verify_rebuild"]


@dataclass(slots=True)
class Verification:
    """What was compared and every difference found (empty ``problems`` = equal)."""

    cursors: int = 0
    buckets: int = 0
    delayed_messages: int = 0
    emitted: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the output equals the reference."""
        return not self.problems


def verify_rebuild(
    out: str | os.PathLike[str], ref: ReferenceRebuild, *, emit_batch: int = 1
) -> Verification:
    """Compares the output at ``out`` with ``ref``; drains a recovered tracker ``emit_batch`` at a time."""
    v = Verification()
    manifest = read_manifest(out)
    if manifest.now_ms != ref.now_ms:
        v.problems.append(f"now: output {manifest.now_ms}, reference {ref.now_ms}")
    cursors = read_cursors(out, ref.ledger_sizes)
    v.cursors = len(cursors)
    if sorted(cursors) != sorted(ref.cursors):
        v.problems.append(f"subscriptions: output {sorted(cursors)}, reference {sorted(ref.cursors)}")
    for name, want in ref.cursors.items():
        got = cursors.get(name)
        if got is None:
            continue
        if got.mark_delete_position != want.mark_delete_position:
            v.problems.append(
                f"{name}: mark-delete {got.mark_delete_position} != {want.mark_delete_position}"
            )
        if got.individually_deleted != want.individually_deleted:
            v.problems.append(
                f"{name}: acked ranges differ "
                f"({len(got.individually_deleted)} vs {len(want.individually_deleted)})"
            )
        if got.batches() != want.batches():
            v.problems.append(f"{name}: partial batches differ ({got.batch_count} vs {want.batch_count})")
    _check_buckets(out, ref, v)
    _check_emission(out, ref, v, emit_batch)
    return v


def _check_buckets(out: str | os.PathLike[str], ref: ReferenceRebuild, v: Verification) -> None:
    manifest = read_manifest(out)
    if manifest.delayed is None:
        if ref.buckets:
            v.problems.append(f"delayed index: none written, reference has {len(ref.buckets)} buckets")
        return
    props = FileCursorProperties(manifest.root / manifest.delayed["properties"])
    found: dict[tuple[int, int], int] = {}
    for key, value in props.items():
        rng = parse_bucket_key(key)
        if rng is not None:
            found[rng] = int(value)
    want = {(b.start_ledger_id, b.end_ledger_id): b for b in ref.buckets}
    v.buckets = len(found)
    if sorted(found) != sorted(want):
        v.problems.append(f"bucket ranges: output {sorted(found)}, reference {sorted(want)}")
        return
    with FileBucketSnapshotStorage(manifest.root / manifest.delayed["storage"]) as storage:
        for rng, bucket_id in sorted(found.items()):
            meta = storage.get_bucket_snapshot_metadata(bucket_id)
            segs = snapshot.decode(storage.get_bucket_snapshot_segment(bucket_id, 1, len(meta.metadata_list)))
            rows = list(
                zip(segs.timestamps.tolist(), segs.ledger_ids.tolist(), segs.entry_ids.tolist(), strict=True)
            )
            if rows != want[rng].indexes:
                v.problems.append(
                    f"bucket {rng}: {len(rows)} indexes differ from the reference's {len(want[rng].indexes)}"
                )


def _check_emission(out: str | os.PathLike[str], ref: ReferenceRebuild, v: Verification, batch: int) -> None:
    """A strict tracker recovered at ``now`` must emit every indexed message, in deliver-at order.

    The tracker runs on a copy: draining it deletes consumed buckets, as a broker's would.
    """
    manifest = read_manifest(out)
    if manifest.delayed is None:
        return
    with tempfile.TemporaryDirectory(prefix="cursorkit-verify-") as scratch:
        copy = Path(scratch)
        shutil.copy2(manifest.root / "manifest.json", copy / "manifest.json")
        shutil.copytree(manifest.root / "delayed", copy / "delayed")
        _drain(copy, ref, v, batch)


def _drain(out: Path, ref: ReferenceRebuild, v: Verification, batch: int) -> None:
    clock = [ref.now_ms]
    tracker = open_delayed_index(out, clock=lambda: clock[0], strict=True, background=False)
    if tracker is None:
        return
    expected = ref.not_yet_due
    v.delayed_messages = tracker.number_of_delayed_messages
    try:
        if tracker.has_message_available():
            v.problems.append("recovered tracker has a message due at now")
        if expected:
            clock[0] = expected[-1][0]
        emitted: list[tuple[int, int]] = []
        last_at = -1
        at_of = {(l_, e): t for t, l_, e in expected}
        while True:
            rows = tracker.get_scheduled_messages(batch)
            if not len(rows):
                break
            pairs = [(int(r[0]), int(r[1])) for r in np.asarray(rows)]
            ats = [at_of.get(p, -1) for p in pairs]
            if min(ats) < last_at:
                v.problems.append(f"emitted {pairs[0]} (deliver-at {min(ats)}) after deliver-at {last_at}")
                break
            last_at = max(ats)
            emitted.extend(pairs)
        v.emitted = len(emitted)
        if sorted(emitted) != sorted((l_, e) for _, l_, e in expected):
            v.problems.append(f"tracker emitted {len(emitted)} messages, reference expects {len(expected)}")
    finally:
        tracker.close()
