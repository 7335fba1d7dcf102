"""ObjectStoreBucketSnapshotStorage on moto's S3 server: round trips, ranged reads, damage, ids, recovery."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bucket_builder import CURSOR, KEY, TOPIC, make_bucket
from cursorkit.delayed import BucketDelayedDeliveryTracker, MemoryCursorProperties
from cursorkit.delayed.storage.format import bucket_name
from cursorkit.delayed.storage.objects import ObjectStoreBucketSnapshotStorage
from cursorkit.errors import BucketNotFound, CorruptSnapshot, InvalidArgument, StoreUnavailable
from cursorkit.stores import ObjectStore
from object_store import s3_prefix


@pytest.fixture
def objects(s3_endpoint: dict[str, str]) -> ObjectStore:
    return s3_prefix(s3_endpoint, "delayed")


@pytest.fixture
def storage(objects: ObjectStore) -> Iterator[ObjectStoreBucketSnapshotStorage]:
    with ObjectStoreBucketSnapshotStorage(objects) as s:
        yield s


def test_round_trip_and_ranged_reads(storage: ObjectStoreBucketSnapshotStorage) -> None:
    meta, segments = make_bucket(5)
    bid = storage.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    assert storage.get_bucket_snapshot_metadata(bid) == meta
    assert storage.get_bucket_snapshot_segment(bid, 1, 5) == segments
    assert storage.get_bucket_snapshot_segment(bid, 2, 3) == segments[1:3]
    assert storage.get_bucket_snapshot_segment(bid, 4, 99) == segments[3:]
    assert storage.get_bucket_snapshot_segment(bid, 6, 9) == []
    info = storage.bucket_info(bid)
    assert (info.bucket_key, info.topic, info.cursor, info.segments) == (KEY, TOPIC, CURSOR, 5)
    assert storage.get_bucket_snapshot_length(bid) == info.length_bytes
    assert storage.list_bucket_snapshots() == [bid]
    with pytest.raises(InvalidArgument):
        storage.get_bucket_snapshot_segment(bid, 0, 1)
    storage.delete_bucket_snapshot(bid)
    storage.delete_bucket_snapshot(bid)  # idempotent
    with pytest.raises(BucketNotFound):
        storage.get_bucket_snapshot_metadata(bid)
    with pytest.raises(BucketNotFound):
        storage.get_bucket_snapshot_length(bid)


def test_a_fresh_reader_checks_everything_a_cached_one_skips(objects: ObjectStore) -> None:
    """Every byte flipped and every cut of a stored bucket is found by a reader that never saw it."""
    with ObjectStoreBucketSnapshotStorage(objects) as writer:
        meta, segments = make_bucket(2, per_segment=2)
        bid = writer.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    key = f"bucket-{bid:020d}.snap"
    good = objects.get(key)
    cases = [good[:cut] for cut in range(0, len(good), 7)]
    for at in range(0, len(good), 3):
        flipped = bytearray(good)
        flipped[at] ^= 0x01
        cases.append(bytes(flipped))
    for damaged in cases:
        objects.put(key, damaged)
        with ObjectStoreBucketSnapshotStorage(objects) as reader:
            try:
                meta_read = reader.get_bucket_snapshot_metadata(bid)
                got = (meta_read, reader.get_bucket_snapshot_segment(bid, 1, 2))
            except CorruptSnapshot:
                continue
            assert got == (meta, segments), "damage went unnoticed"


def test_ids_are_never_reused_by_an_owner(objects: ObjectStore) -> None:
    meta, segments = make_bucket(1)
    with ObjectStoreBucketSnapshotStorage(objects, owner_epoch=3) as s:
        first = [s.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR) for _ in range(3)]
        s.delete_bucket_snapshot(first[-1])
    with ObjectStoreBucketSnapshotStorage(objects, owner_epoch=3) as again:
        nxt = again.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    with ObjectStoreBucketSnapshotStorage(objects, owner_epoch=4) as newer:
        other = newer.create_bucket_snapshot(meta, segments, KEY, TOPIC, CURSOR)
    assert first == sorted(first) and nxt > first[1] and all(i >> 40 == 3 for i in [*first, nxt])
    assert other >> 40 == 4 and len({*first, nxt, other}) == 5
    with pytest.raises(InvalidArgument):
        ObjectStoreBucketSnapshotStorage(objects, owner_epoch=0)


def _tracker(
    objects: ObjectStore, props: MemoryCursorProperties, now: list[int]
) -> BucketDelayedDeliveryTracker:
    return BucketDelayedDeliveryTracker(
        ObjectStoreBucketSnapshotStorage(objects),
        props,
        clock=lambda: now[0],
        background=False,
        min_index_count_per_bucket=100,
        max_indexes_per_segment=30,
        tick_time_ms=1,
    )


def _five_ledgers(t: BucketDelayedDeliveryTracker, now: int) -> dict[tuple[int, int], int]:
    """120 delayed messages in each of ledgers 1-5, sealed into buckets; the topic's log of them."""
    log = {}
    for ledger in range(1, 6):
        for entry in range(120):
            at = now + 10_000 + (entry * 37 + ledger) % 5_000
            assert t.add_message(ledger, entry, at)
            log[(ledger, entry)] = at
    t.maintenance()
    assert len(t.immutable_buckets) > 1
    t.checkpoint_tail()
    t.close()
    return log


def _deliver_all(t: BucketDelayedDeliveryTracker) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    while t.has_message_available():
        got.extend(map(tuple, t.get_scheduled_messages(50).tolist()))
    return sorted(got)


def test_the_bucket_tracker_recovers_from_it_unchanged(objects: ObjectStore) -> None:
    now = [1_000_000]
    props = MemoryCursorProperties()
    log = _five_ledgers(_tracker(objects, props, now), now[0])
    second = _tracker(objects, props, now)
    assert not second.recovery_report.damaged and not second.recovery_report.replay_required
    now[0] += 20_000
    assert _deliver_all(second) == sorted(log)
    second.close()


def test_a_snapshot_deleted_before_recovery_is_replayed_and_delivered(objects: ObjectStore) -> None:
    now = [1_000_000]
    props = MemoryCursorProperties()
    first = _tracker(objects, props, now)
    log = _five_ledgers(first, now[0])
    victim = first.immutable_buckets[0]
    assert victim.bucket_id is not None
    objects.delete(bucket_name(victim.bucket_id))  # gone from S3 behind its property
    second = _tracker(objects, props, now)
    report = second.recovery_report
    assert report.missing == [victim.key] and report.replay_required and not report.damaged
    replay = second.take_replay_ranges()
    assert replay == [(victim.start_ledger_id, victim.end_ledger_id)]
    for (ledger, entry), at in log.items():  # the dispatcher re-reads those ledgers from the cursor
        if any(lo <= ledger <= hi for lo, hi in replay):
            assert not second.contains_message(ledger, entry)
            assert second.add_message(ledger, entry, at)
    now[0] += 20_000
    assert _deliver_all(second) == sorted(log)  # the lost bucket's messages too
    second.close()


def test_a_store_that_does_not_answer_is_unavailable_not_damage(s3_endpoint: dict[str, str]) -> None:
    dead = ObjectStore(
        "s3://nowhere/x",
        endpoint="http://127.0.0.1:9",
        access_key="a",
        secret_key="b",
        connect_timeout=0.5,
        request_timeout=0.5,
    )
    with pytest.raises(StoreUnavailable):
        ObjectStoreBucketSnapshotStorage(dead).start()
