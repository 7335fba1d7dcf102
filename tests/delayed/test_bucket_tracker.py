"""The bucket tracker's rules, one scenario each: sealing, segments, loads, merges, deletion, recovery."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from bucket_tracker_setup import fill, open_storage, tracker
from cursorkit import Position
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    DelayedDeliveryCollector,
    FileBucketSnapshotStorage,
    MemoryCursorProperties,
)
from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, PROPERTY_PREFIX
from cursorkit.errors import InvalidArgument, InvalidInputType, InvalidPosition, TrackerClosed
from cursorkit.proto import delayed_bucket_pb2 as pb
from manual_clock import Clock


def bucket_props(t: BucketDelayedDeliveryTracker) -> dict[str, str]:
    return {k: v for k, v in t.cursor_properties.items() if k.startswith(PROPERTY_PREFIX)}


def drain(t: BucketDelayedDeliveryTracker, clock: Clock, until: int) -> list[tuple[int, int, int]]:
    """Every message delivered while the clock steps to ``until``, with the time it came out."""
    out: list[tuple[int, int, int]] = []
    while clock.now <= until:
        for ledger, entry in t.get_scheduled_messages(1000).tolist():
            out.append((clock.now, ledger, entry))
        clock.now += 1
    return out


def test_seals_only_at_a_ledger_boundary_after_the_minimum(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 12, 1000)  # 12 >= 10, but ledger 1 is still open
    assert t.immutable_buckets == []
    assert t.add_message(2, 0, 5000)  # the next ledger seals [1, 1]
    (b,) = t.immutable_buckets
    assert (b.start_ledger_id, b.end_ledger_id) == (1, 1)
    assert b.number_bucket_delayed_messages == 12
    # 12 indexes 10 ms apart, at most 4 per segment and 100 ms per step: 4 + 4 + 4
    assert b.last_segment_entry_id == 3 and b.current_segment_entry_id == 1
    assert b.first_schedule_timestamps == [1000, 1040, 1080]
    assert t.mutable_bucket_range == (2, 2)
    assert not b.created  # the snapshot write is a job
    t.maintenance()
    assert b.created
    assert bucket_props(t) == {f"{PROPERTY_PREFIX}_1_1": str(b.bucket_id)}
    meta = t.storage.get_bucket_snapshot_metadata(b.bucket_id)
    assert [m.min_schedule_timestamp for m in meta.metadata_list] == [1000, 1040, 1080]
    assert [m.max_schedule_timestamp for m in meta.metadata_list] == [1030, 1070, 1110]
    assert t.number_of_delayed_messages == 13
    t.close()


def test_late_adds_to_sealed_ranges_go_to_the_shared_queue(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    assert t.add_message(3, 0, 2000)  # seals [1, 1]
    assert t.add_message(1, 50, 900)  # covered by the bucket: shared queue, not the tail
    assert t.add_message(2, 0, 950)  # below the tail's end: shared queue as well
    assert t.mutable_bucket_range == (3, 3)
    clock.now = 2000
    got = [tuple(r) for r in t.get_scheduled_messages(100).tolist()]
    assert sorted(got) == got and (1, 50) in got and (2, 0) in got and (3, 0) in got
    assert t.number_of_delayed_messages == 0
    t.close()


def test_delivery_is_in_time_order_across_buckets_and_segment_loads(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock, max_indexes_per_segment=3)
    rng = np.random.default_rng(7)
    expected: dict[tuple[int, int], int] = {}
    for ledger in range(1, 6):
        ats = rng.integers(100, 2000, size=11)
        for e, at in enumerate(ats.tolist()):
            assert t.add_message(ledger, e, at)
            expected[(ledger, e)] = at
    t.maintenance()
    assert len(t.immutable_buckets) == 4
    out = drain(t, clock, 2100)
    assert {(led, e) for _, led, e in out} == set(expected)
    for when, ledger, entry in out:  # never early, never later than the tick after it fell due
        assert expected[(ledger, entry)] - 1 <= when <= expected[(ledger, entry)]
    assert t.counters().segment_loads > 0
    t.maintenance()
    assert t.immutable_buckets == [] and bucket_props(t) == {}
    assert t.storage.list_bucket_snapshots() == []  # consumed buckets are deleted
    t.close()


def test_batches_keep_exact_time_order(tmp_path: Path) -> None:
    """Buckets interleave in time; each batch must be the next indexes in global (at, l, e) order."""
    clock = Clock()
    t = tracker(tmp_path, clock, max_indexes_per_segment=2)
    at = {(ledger, e): 1000 + 3 * e + ledger for ledger in (1, 2, 3) for e in range(10)}
    for (ledger, e), when in at.items():
        t.add_message(ledger, e, when)
    t.add_message(4, 0, 10_000)
    t.maintenance()
    assert len(t.immutable_buckets) == 3
    clock.now = 5000
    order = sorted(at, key=lambda p: (at[p], p))
    seen: list[tuple[int, int]] = []
    while batch := [tuple(r) for r in t.get_scheduled_messages(3).tolist()]:
        assert batch == sorted(order[len(seen) : len(seen) + 3])
        seen.extend(batch)
    assert len(seen) == 30
    t.close()


def test_merge_when_over_max_buckets(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock, max_num_buckets=2, max_indexes_per_segment=2)
    for ledger in range(1, 5):
        fill(t, ledger, 10, 1000 + ledger)
    t.add_message(5, 0, 9000)
    t.maintenance()
    buckets = t.immutable_buckets
    assert len(buckets) <= 2
    assert t.counters().merges >= 1
    assert buckets[0].start_ledger_id == 1 and buckets[-1].end_ledger_id == 4
    props = bucket_props(t)
    assert set(props.values()) == {str(b.bucket_id) for b in buckets}
    assert sorted(t.storage.list_bucket_snapshots()) == sorted(b.bucket_id for b in buckets if b.bucket_id)
    assert t.op_stats.count("merge", "succeed") >= 1
    out = drain(t, clock, 9000)
    assert len(out) == 41 and len({(led, e) for _, led, e in out}) == 41
    t.close()


def test_recovery_skips_expired_segments_and_restores_contains(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 12, 1000)  # segments [1000..1030], [1040..1070], [1080..1110]
    t.add_message(2, 0, 5000)
    t.close()
    clock.now = 1050  # the first segment is wholly due
    r = tracker(tmp_path, clock)
    rep = r.recovery_report
    assert len(rep.recovered) == 1 and not rep.damaged
    (b,) = r.immutable_buckets
    assert b.current_segment_entry_id == 2
    assert r.number_of_delayed_messages == 8  # the tail (2:0) was not persisted
    assert not r.contains_message(1, 0) and r.contains_message(1, 4) and r.contains_message(1, 11)
    got = [tuple(x) for x in r.get_scheduled_messages(100).tolist()]
    assert got == [(1, 4), (1, 5)]  # 1040 and 1050 are due at 1051
    clock.now = 2000
    assert len(r.get_scheduled_messages(100)) == 6
    r.close()
    clock.now = 10_000
    r2 = tracker(tmp_path, clock)
    assert r2.recovery_report.recovered == [] and r2.number_of_delayed_messages == 0
    r2.close()


def test_wholly_expired_buckets_are_dropped_and_missing_ones_replayed(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    fill(t, 2, 10, 5000)
    t.add_message(3, 0, 9000)
    t.close()
    ids = sorted(b.bucket_id for b in t.immutable_buckets if b.bucket_id is not None)
    with open_storage(tmp_path) as s:
        s.delete_bucket_snapshot(ids[1])  # bucket [2, 2] vanished behind its property
    clock.now = 2000
    r = tracker(tmp_path, clock)
    rep = r.recovery_report
    assert rep.expired == [ids[0]] and rep.missing == [f"{PROPERTY_PREFIX}_2_2"]
    assert bucket_props(r) == {} and r.storage.list_bucket_snapshots() == []
    assert rep.replay_required and r.take_replay_ranges() == [(2, 2)]  # its messages are still owed
    fill(r, 2, 10, 5000)  # the dispatcher's re-read of ledger 2 from the cursor
    assert sorted((ledger, entry) for _, ledger, entry in drain(r, clock, 6000)) == [
        (2, e) for e in range(10)
    ]
    r.close()


def test_enclosed_ranges_lose_whatever_the_key_order(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    fill(t, 2, 10, 1000)
    t.add_message(3, 0, 9000)
    t.close()
    a, b = (x.bucket_id for x in t.immutable_buckets)
    assert a is not None and b is not None
    # A merge wrote [1, 2] and crashed before its property swap removed the sources... and then a
    # property pointing at a merged snapshot is what survives: the sources are stale.
    with open_storage(tmp_path) as s:
        merged_meta = s.get_bucket_snapshot_metadata(a)
        segs = s.get_bucket_snapshot_segment(a, 1, len(merged_meta.metadata_list))
        merged = s.create_bucket_snapshot(
            merged_meta, segs, f"{PROPERTY_PREFIX}_1_2", "topic", "subscription"
        )
    t.cursor_properties[f"{PROPERTY_PREFIX}_1_2"] = str(merged)
    r = tracker(tmp_path, clock)
    assert sorted(r.recovery_report.stale) == sorted([a, b])
    assert [(x.start_ledger_id, x.end_ledger_id) for x in r.immutable_buckets] == [(1, 2)]
    assert r.storage.list_bucket_snapshots() == [merged]
    r.close()


def test_an_unrecorded_snapshot_is_adopted_and_an_overlapping_one_deleted(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    t.add_message(2, 0, 9000)
    t.close()
    (b,) = t.immutable_buckets
    assert b.bucket_id is not None
    del t.cursor_properties[b.key]  # the crash hit between snapshot write and property write
    with open_storage(tmp_path) as s:
        other = s.create_bucket_snapshot(
            s.get_bucket_snapshot_metadata(b.bucket_id),
            s.get_bucket_snapshot_segment(b.bucket_id, 1, 3),
            f"{PROPERTY_PREFIX}_1_1",
            "another-topic",
            "subscription",
        )
    r = tracker(tmp_path, clock)
    assert r.recovery_report.adopted == [b.bucket_id]
    assert bucket_props(r) == {b.key: str(b.bucket_id)}
    assert r.number_of_delayed_messages == 10
    assert other in r.storage.list_bucket_snapshots()  # another topic's snapshot is left alone
    r.close()


def test_corrupt_snapshot_is_reported_and_the_rest_recovered(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    fill(t, 2, 10, 1000)
    t.add_message(3, 0, 9000)
    t.close()
    victim = t.immutable_buckets[0].bucket_id
    target = tmp_path / "snaps" / f"bucket-{victim:020d}.snap"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    r = tracker(tmp_path, clock)
    rep = r.recovery_report
    assert rep.replay_required and len(rep.damaged) == 1 and len(rep.recovered) == 1
    assert r.number_of_delayed_messages == 10
    for e in range(10):  # the dispatcher's replay re-adds what was lost
        r.add_message(1, e, 1000 + e * 10)
    assert r.number_of_delayed_messages == 20
    r.close()


def test_persisted_tail_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock, persist_mutable_tail=True)
    fill(t, 1, 5, 1000)
    t.close()
    assert MUTABLE_TAIL_PROPERTY in t.cursor_properties
    r = tracker(tmp_path, clock, persist_mutable_tail=True)
    assert r.recovery_report.tail_messages == 5 and r.number_of_delayed_messages == 5
    assert r.mutable_bucket_range == (1, 1)
    clock.now = 2000
    assert len(r.get_scheduled_messages(100)) == 5
    r.close()  # an empty tail removes the property and its snapshot
    assert MUTABLE_TAIL_PROPERTY not in r.cursor_properties
    with open_storage(tmp_path) as s:
        assert s.list_bucket_snapshots() == []


@pytest.mark.parametrize("how", ["deleted", "flipped"])
def test_a_lost_tail_is_replayed_from_the_last_sealed_bucket(tmp_path: Path, how: str) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock, persist_mutable_tail=True)
    fill(t, 1, 10, 1000)
    fill(t, 2, 10, 1000)
    t.add_message(3, 0, 9000)
    t.maintenance()
    sealed_end = max(b.end_ledger_id for b in t.immutable_buckets)
    fill(t, 4, 5, 1000)
    t.close()
    tail = int(t.cursor_properties[MUTABLE_TAIL_PROPERTY])
    target = tmp_path / "snaps" / f"bucket-{tail:020d}.snap"
    if how == "deleted":
        target.unlink()
    else:
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        target.write_bytes(bytes(raw))
    r = tracker(tmp_path, clock, persist_mutable_tail=True)
    assert r.recovery_report.replay_required and r.recovery_report.tail_messages == 0
    ranges = r.take_replay_ranges()
    assert len(ranges) == 1 and ranges[0][0] <= min(sealed_end + 1, 4) and ranges[0][1] >= 4
    r.close()


def test_trim_below_mark_delete(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    fill(t, 2, 10, 1000)
    t.add_message(3, 0, 9000)
    t.maintenance()
    assert t.trim(Position(2, 4)) == 15
    t.maintenance()
    assert [b.start_ledger_id for b in t.immutable_buckets] == [2]
    assert t.number_of_delayed_messages == 6
    assert not t.add_message(2, 3, 5000)  # acked already: dispatch (and be filtered) now
    assert t.counters().rejected_acked == 1
    assert len(bucket_props(t)) == 1
    t.close()


def test_clear_deletes_everything(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, clock)
    fill(t, 1, 10, 1000)
    t.add_message(2, 0, 2000)
    t.clear()
    assert t.number_of_delayed_messages == 0 and t.immutable_buckets == []
    assert bucket_props(t) == {} and t.storage.list_bucket_snapshots() == []
    assert t.get_scheduled_messages(10).shape == (0, 2)
    t.close()


def test_expired_add_untracks_and_counts(tmp_path: Path) -> None:
    clock = Clock(100)
    t = tracker(tmp_path, clock)
    assert t.add_message(1, 0, 500)
    assert t.add_message(1, 0, 600)  # duplicate: first deliver-at wins
    assert t.number_of_delayed_messages == 1
    assert not t.add_message(1, 0, 50)  # re-read after it fell due: untracked, dispatch now
    assert t.number_of_delayed_messages == 0 and not t.contains_message(1, 0)
    assert not t.add_message(1, 1, -5)
    assert not t.add_message(1, 2, 101)  # within the tick
    c = t.counters()
    assert (c.added, c.duplicates, c.rejected_due) == (1, 1, 3)
    t.close()


def test_bad_input_is_typed_and_changes_nothing(tmp_path: Path) -> None:
    t = tracker(tmp_path, Clock())
    with pytest.raises(InvalidPosition):
        t.add_message(-1, 0, 10)
    with pytest.raises(InvalidPosition):
        t.add_message(1, 2**32, 10)
    with pytest.raises(InvalidInputType):
        t.add_message(1, 0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        t.add_message(1, 0, 2**63)
    with pytest.raises(InvalidArgument):
        t.get_scheduled_messages(-1)
    with pytest.raises(InvalidArgument):
        t.add_many([1, 1], [0], [5, 5])
    with pytest.raises(InvalidPosition):
        t.add_many([1, 1], [0, -3], [50, 50])
    with pytest.raises(InvalidArgument):
        tracker(tmp_path / "x", Clock(), max_indexes_per_segment=0)
    with pytest.raises(InvalidInputType):
        BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(tmp_path / "y"),
            {},
            clock=lambda: "now",  # type: ignore[arg-type,return-value]
            background=False,
        )
    assert t.number_of_delayed_messages == 0
    t.close()
    with pytest.raises(TrackerClosed):
        t.add_message(1, 0, 10)


def test_add_many_matches_add_message(tmp_path: Path) -> None:
    clock = Clock(0)
    a = tracker(tmp_path / "a", clock)
    b = tracker(tmp_path / "b", clock)
    rng = np.random.default_rng(3)
    ls = np.repeat(np.arange(1, 6), 14)
    es = np.tile(np.arange(14), 5)
    ts = rng.integers(-5, 3000, size=len(ls))
    mask = a.add_many(ls, es, ts)
    expected = [b.add_message(int(x), int(e), int(t)) for x, e, t in zip(ls, es, ts, strict=True)]
    assert mask.tolist() == expected
    a.maintenance()
    b.maintenance()
    assert [(x.start_ledger_id, x.end_ledger_id) for x in a.immutable_buckets] == [
        (x.start_ledger_id, x.end_ledger_id) for x in b.immutable_buckets
    ]
    clock.now = 5000
    assert a.get_scheduled_messages(1000).tolist() == b.get_scheduled_messages(1000).tolist()
    a.close()
    b.close()


class SlowStorage(FileBucketSnapshotStorage):
    """A real file storage whose creates take a while (a slow disk)."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(path)
        self.delay = delay
        self.started = threading.Event()

    def create_bucket_snapshot(
        self,
        metadata: pb.SnapshotMetadata,
        segments: Sequence[bytes],
        bucket_key: str,
        topic: str,
        cursor: str,
    ) -> int:
        self.started.set()
        time.sleep(self.delay)
        return super().create_bucket_snapshot(metadata, segments, bucket_key, topic, cursor)


def test_a_slow_snapshot_write_does_not_hold_up_adds_or_delivery(tmp_path: Path) -> None:
    clock = Clock()
    storage = SlowStorage(tmp_path / "snaps", delay=0.5)
    t = BucketDelayedDeliveryTracker(
        storage, MemoryCursorProperties(), clock=clock, tick_time_ms=1, min_index_count_per_bucket=10
    )
    fill(t, 1, 10, 1000)
    t0 = time.perf_counter()
    assert t.add_message(2, 0, 5000)  # seals; the write runs on the worker thread
    assert storage.started.wait(2)
    for e in range(1, 200):
        t.add_message(2, e, 5000 + e)
    clock.now = 1010  # the tick is 1 ms: 1000 and 1010 are due
    assert [tuple(r) for r in t.get_scheduled_messages(10).tolist()] == [(1, 0), (1, 1)]
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.4, f"adds waited for the snapshot write ({elapsed:.3f} s)"
    assert not t.immutable_buckets[0].created
    t.maintenance()
    assert t.immutable_buckets[0].created
    t.close()


def test_metrics_use_pip_195_names(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    collector = DelayedDeliveryCollector(registry)
    clock = Clock()
    t = tracker(tmp_path, clock)
    collector.track(t, topic="persistent://t/n/a", subscription="s")
    fill(t, 1, 10, 1000)
    t.add_message(2, 0, 5000)
    t.maintenance()
    labels = {"topic": "persistent://t/n/a", "subscription": "s"}

    def value(name: str, **extra: str) -> float | None:
        return registry.get_sample_value(name, {**labels, **extra})

    assert value("pulsar_subscription_delayed") == 11
    assert value("pulsar_delayed_message_index_bucket_total") == 2
    assert value("pulsar_delayed_message_index_loaded") == 5  # segment 1 (4) + the tail (1)
    assert (value("pulsar_delayed_message_index_bucket_snapshot_size_bytes") or 0) > 0
    assert (value("pulsar_delayed_message_index_size_bytes") or 0) > 0
    assert value("pulsar_delayed_message_index_bucket_op_count_total", state="succeed", type="create") == 1
    assert value("pulsar_delayed_message_index_bucket_op_count_total", state="all", type="merge") == 0
    assert value("pulsar_delayed_message_index_bucket_op_latency_ms_count", type="create") == 1
    assert value("pulsar_delayed_message_index_bucket_op_latency_ms_bucket", type="create", le="+Inf") == 1
    t.close()


def test_adds_wait_when_the_snapshot_worker_falls_too_far_behind(tmp_path: Path) -> None:
    """``max_pending_snapshots`` bounds the sealed-but-unwritten buckets held in memory."""
    clock = Clock()
    storage = SlowStorage(tmp_path / "snaps", delay=0.2)
    t = BucketDelayedDeliveryTracker(
        storage,
        MemoryCursorProperties(),
        clock=clock,
        tick_time_ms=1,
        min_index_count_per_bucket=10,
        max_pending_snapshots=0,
    )
    fill(t, 1, 10, 1000)
    assert t.add_message(2, 0, 5000)  # seals; the write starts on the worker
    assert storage.started.wait(2)
    assert not t.immutable_buckets[0].created
    assert t.add_message(2, 1, 5001)  # waits for the write: nothing may be pending
    assert t.immutable_buckets[0].created
    t.close()
