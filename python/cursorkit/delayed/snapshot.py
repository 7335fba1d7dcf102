"""Bucket snapshots: sorted indexes cut into segments, encoded as PIP-195's messages, and back.

The per-index work (cutting, encoding, bitmaps, decoding) is Rust; this module only assembles the
``SnapshotMetadata`` message, whose size is one entry per segment and ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cursorkit import _core
from cursorkit.delayed.bucket import Int64Array, SegmentArrays
from cursorkit.proto import delayed_bucket_pb2 as pb


def cut(
    timestamps: Int64Array,
    ledger_ids: Int64Array,
    entry_ids: Int64Array,
    *,
    max_time_step_ms: int,
    max_indexes_per_segment: int,
) -> SegmentArrays:
    """Sorted indexes cut into segments by PIP-195's rule (time step, then index count)."""
    ends = _core.cut_segments(timestamps, max_time_step_ms, max_indexes_per_segment)
    return SegmentArrays(timestamps, ledger_ids, entry_ids, ends)


def encode(segments: SegmentArrays) -> tuple[pb.SnapshotMetadata, list[bytes]]:
    """The metadata message and the encoded ``SnapshotSegment`` of every segment."""
    meta = pb.SnapshotMetadata()
    blobs: list[bytes] = []
    for i in range(len(segments)):
        ts, ls, es = segments.segment(i)
        blobs.append(_core.encode_segment(ts, ls, es))
        m = meta.metadata_list.add()
        m.min_schedule_timestamp = int(ts[0])
        m.max_schedule_timestamp = int(ts[-1])
        for ledger, bitmap in _core.segment_bitmaps(ls, es):
            m.delayed_index_bit_map[ledger] = bitmap
    return meta, blobs


def decode(blobs: Sequence[bytes]) -> SegmentArrays:
    """Consecutive encoded segments as one set of sorted columns (raises ``CorruptSnapshot``)."""
    parts = [_core.decode_segment(b) for b in blobs]
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return SegmentArrays(empty, empty, empty, empty)
    ends = np.cumsum([len(p[0]) for p in parts], dtype=np.int64)
    return SegmentArrays(
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        ends,
    )


def first_timestamps(segments: SegmentArrays) -> list[int]:
    """Earliest deliver-at of each segment."""
    starts = np.concatenate([[0], segments.ends[:-1]]).astype(np.int64)
    return [int(t) for t in segments.timestamps[starts]] if len(segments) else []
