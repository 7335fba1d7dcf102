"""A delayed bucket's snapshot as the tracker cuts it, and the owner fields tests store it under."""

from __future__ import annotations

from pyroaring import BitMap

from cursorkit.proto import delayed_bucket_pb2 as pb

KEY = "#pulsar.internal.delayed.bucket_3_7"
TOPIC = "persistent://public/default/orders"
CURSOR = "orders-sub"


def make_bucket(
    segments: int, per_segment: int = 4, seed: int = 0
) -> tuple[pb.SnapshotMetadata, list[bytes]]:
    """A bucket as the tracker cuts it: segments in time order, per-ledger roaring bitmaps per segment."""
    meta = pb.SnapshotMetadata()
    out: list[bytes] = []
    ts = 1_000_000 + seed
    for s in range(segments):
        seg = pb.SnapshotSegment()
        entries: dict[int, list[int]] = {}
        first = ts
        for i in range(per_segment):
            ledger, entry = 3 + (i + s) % 3, s * per_segment + i + seed
            seg.indexes.add(timestamp=ts, ledger_id=ledger, entry_id=entry)
            entries.setdefault(ledger, []).append(entry)
            ts += 7
        sm = meta.metadata_list.add(min_schedule_timestamp=first, max_schedule_timestamp=ts - 7)
        for ledger, es in entries.items():
            sm.delayed_index_bit_map[ledger] = BitMap(es).serialize()
        out.append(seg.SerializeToString())
    return meta, out
