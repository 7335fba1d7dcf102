"""Damaged bucket snapshots: reported, kept for inspection, replayed from the cursor; the rest delivers.

Two ways in: a segment that turns out damaged when it is lazily loaded long after recovery, and
metadata that Pulsar's own (proto2, ``required``-checking) parser would refuse.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bucket_tracker_setup import fill, open_storage, tracker
from cursorkit.delayed import DelayedDeliveryCollector, FileBucketSnapshotStorage
from cursorkit.delayed.bucket import DAMAGED_PROPERTY_PREFIX, PROPERTY_PREFIX
from cursorkit.delayed.storage.format import encode_bucket
from cursorkit.errors import CorruptSnapshot
from cursorkit.fsio import atomic_write
from cursorkit.proto import delayed_bucket_pb2 as pb
from cursorkit.proto.strict import parse
from manual_clock import Clock


def damage_segment(tmp_path: Path, bucket_id: int, segment: int) -> None:
    """Flips one byte inside segment ``segment`` of a bucket file (its checksum then fails)."""
    with open_storage(tmp_path) as s:
        blob = s.get_bucket_snapshot_segment(bucket_id, segment, segment)[0]
    target = tmp_path / "snaps" / f"bucket-{bucket_id:020d}.snap"
    raw = bytearray(target.read_bytes())
    at = raw.index(blob)
    raw[at + len(blob) // 2] ^= 0x01
    target.write_bytes(bytes(raw))


def two_buckets(tmp_path: Path, clock: Clock) -> tuple[int, int]:
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)  # bucket [1,1]: segments of 4, 4, 2 indexes
    fill(t, 2, 10, 1005)  # bucket [2,2], interleaved in time with the first
    t.add_message(3, 0, 9000)
    t.close()
    ids = [b.bucket_id for b in t.immutable_buckets]
    assert None not in ids
    return ids[0], ids[1]  # type: ignore[return-value]


def test_a_damaged_later_segment_is_reported_and_the_other_bucket_keeps_delivering(tmp_path: Path) -> None:
    clock = Clock()
    first, second = two_buckets(tmp_path, clock)
    damage_segment(tmp_path, first, 2)
    r = tracker(tmp_path, clock)
    assert not r.recovery_report.damaged  # segment 2 is not read at recovery
    clock.now = 10_000
    got = []
    while r.has_message_available():
        batch = r.get_scheduled_messages(3).tolist()
        assert batch, "has_message_available() said yes, the get returned nothing"
        got += batch
    # Bucket 1 delivered its first segment (entries 0-3), then lost the rest; bucket 2 all of it.
    assert sorted(got) == [[1, e] for e in range(4)] + [[2, e] for e in range(10)]
    assert r.number_of_delayed_messages == 0 and r.next_delivery_time() is None
    assert len(r.recovery_report.damaged) == 1 and "segment 2" in r.recovery_report.damaged[0]
    assert r.counters().damaged == 1
    registry = CollectorRegistry()
    DelayedDeliveryCollector(registry).track(r, topic="t", subscription="s")
    labels = {"topic": "t", "subscription": "s"}
    assert registry.get_sample_value("cursorkit_delayed_index_damaged_buckets_total", labels) == 1
    assert r.take_replay_ranges() == [(1, 1)] and r.take_replay_ranges() == []
    assert not r.contains_message(1, 5)  # untracked: the dispatcher's re-read adds it anew
    clock.now = 500
    assert r.add_message(1, 5, 1050)
    r.maintenance()
    assert f"{DAMAGED_PROPERTY_PREFIX}{first}" in r.cursor_properties
    assert r.recovery_report.quarantined == [first]
    r.close()
    with open_storage(tmp_path) as s:
        assert first in s.list_bucket_snapshots()  # kept for inspection
    again = tracker(tmp_path, clock)
    assert again.recovery_report.quarantined == [first]
    assert again.discard_damaged() == [first]
    assert not any(k.startswith(DAMAGED_PROPERTY_PREFIX) for k in again.cursor_properties)
    again.close()
    with open_storage(tmp_path) as s:
        assert first not in s.list_bucket_snapshots()


def write_raw_bucket(tmp_path: Path, meta: pb.SnapshotMetadata, segments: list[bytes], key: str) -> int:
    """A bucket file whose metadata may lack required fields (the storage's writer refuses those)."""
    with FileBucketSnapshotStorage(tmp_path / "snaps") as s:
        bucket_id = s._allocate_id()
        texts = (key.encode(), b"topic", b"subscription")
        records = [meta.SerializePartialToString(), *segments]
        atomic_write(s._file_for(bucket_id), encode_bucket(bucket_id, texts, records))
    return bucket_id


@pytest.mark.parametrize("field", ["min_schedule_timestamp", "max_schedule_timestamp"])
def test_metadata_without_a_required_field_is_damaged_not_due(tmp_path: Path, field: str) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    t.add_message(2, 0, 9000)
    t.close()
    (b,) = t.immutable_buckets
    assert b.bucket_id is not None
    with open_storage(tmp_path) as s:
        meta = s.get_bucket_snapshot_metadata(b.bucket_id)
        segs = s.get_bucket_snapshot_segment(b.bucket_id, 1, len(meta.metadata_list))
        s.delete_bucket_snapshot(b.bucket_id)  # replaced by the damaged copy below
    meta.metadata_list[0].ClearField(field)
    with pytest.raises(Exception, match=field):
        parse(pb.SnapshotMetadata, meta.SerializePartialToString())
    key = f"{PROPERTY_PREFIX}_1_1"
    bad = write_raw_bucket(tmp_path, meta, segs, key)
    t.cursor_properties[key] = str(bad)
    with open_storage(tmp_path) as s, pytest.raises(CorruptSnapshot, match=field):
        s.get_bucket_snapshot_metadata(bad)
    r = tracker(tmp_path, clock)
    rep = r.recovery_report
    assert rep.expired == [] and rep.recovered == []
    assert len(rep.damaged) == 1 and field in rep.damaged[0]
    assert rep.quarantined == [bad] and r.take_replay_ranges() == [(1, 1)]
    assert r.number_of_delayed_messages == 0 and not r.has_message_available()
    r.close()
    with open_storage(tmp_path) as s:
        assert bad in s.list_bucket_snapshots()  # never deleted


def test_a_failed_load_keeps_the_next_time_from_metadata_and_is_retried(tmp_path: Path) -> None:
    clock = Clock()
    first, _ = two_buckets(tmp_path, clock)
    r = tracker(tmp_path, clock)
    path = tmp_path / "snaps" / f"bucket-{first:020d}.snap"
    aside = path.with_suffix(".aside")
    path.rename(aside)
    path.mkdir()  # opening the bucket now fails with an OSError (EISDIR): a transient read fault
    clock.now = 1030  # segment 1 of bucket [1,1] is 1000..1030, of [2,2] 1005..1035
    got = r.get_scheduled_messages(100).tolist()
    assert sorted(got) == [[1, 0], [1, 1], [1, 2], [1, 3], [2, 0], [2, 1], [2, 2]]
    assert r.op_stats.count("load", "failed") >= 1
    # Bucket [1,1]'s next segment starts at 1040 (metadata): nothing later may leave before it.
    assert r.next_delivery_time() == 1035
    clock.now = 1040
    assert r.has_message_available()
    assert r.get_scheduled_messages(100).tolist() == [[2, 3]]  # 1035: before anything unloaded
    assert r.next_delivery_time() == 1040 and r.has_message_available()
    assert r.get_scheduled_messages(100).tolist() == []  # (1,4)@1040 cannot be read yet: wait for it
    path.rmdir()
    aside.rename(path)
    assert r.get_scheduled_messages(100).tolist() == [[1, 4]]
    assert r.next_delivery_time() == 1045 and not r.recovery_report.damaged
    r.close()
