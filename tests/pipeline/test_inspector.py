"""``cursorkit inspect``: real stores built with the library, read back, damaged, checked against models."""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from rich.console import Console

from cursorkit._core import Position
from cursorkit.ackstate import Cursor, CursorStore
from cursorkit.ackstate.store.file.log import META_FILE
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, SegmentArrays, bucket_key
from cursorkit.delayed.snapshot import cut, encode
from cursorkit.delayed.storage.file import NEXT_ID_FILE, FileBucketSnapshotStorage
from cursorkit.errors import CorruptSnapshot, InvalidArgument, InvalidInputType, UnsupportedVersion
from cursorkit.pipeline.inspector import (
    BucketStoreSummary,
    CursorStoreSummary,
    RebuildOutputSummary,
    SegmentSummary,
    _orphans_and_missing,
    inspect_path,
    render,
)

TOPIC = "persistent://public/default/orders"
SUB = "orders-sub"
T0 = 1_700_000_000_000


def indexes(n: int, ledgers: tuple[int, ...], *, step: int = 1000) -> tuple[np.ndarray, ...]:
    """``n`` sorted indexes spread over ``ledgers``, one every ``step`` ms."""
    ts = T0 + np.arange(n, dtype=np.int64) * step
    ls = np.array([ledgers[i % len(ledgers)] for i in range(n)], dtype=np.int64)
    es = np.arange(n, dtype=np.int64)
    return ts, ls, es


def cut_small(ts: np.ndarray, ls: np.ndarray, es: np.ndarray) -> SegmentArrays:
    return cut(ts, ls, es, max_time_step_ms=10_000, max_indexes_per_segment=4)


def store_bucket(
    storage: FileBucketSnapshotStorage, segs: SegmentArrays, key: str, *, topic: str = TOPIC
) -> int:
    meta, blobs = encode(segs)
    return storage.create_bucket_snapshot(meta, blobs, key, topic, SUB)


def expected_segments(segs: SegmentArrays) -> tuple[SegmentSummary, ...]:
    """The model: each segment's count, deliver-at bounds and ledgers, straight from the columns."""
    out = []
    for i in range(len(segs)):
        ts, ls, _ = segs.segment(i)
        out.append(
            SegmentSummary(
                segment=i + 1,
                min_deliver_at=min(int(t) for t in ts),
                max_deliver_at=max(int(t) for t in ts),
                messages=len(ts),
                ledgers=len({int(x) for x in ls}),
            )
        )
    return tuple(out)


def build_bucket_store(root: Path) -> tuple[dict[int, SegmentArrays], dict[str, int]]:
    """Two buckets in ``root``; returns their segments by id and their keys."""
    made: dict[int, SegmentArrays] = {}
    keys: dict[str, int] = {}
    with FileBucketSnapshotStorage(root, fsync=False) as storage:
        for ledgers in ((3, 4), (5, 5, 6)):
            segs = cut_small(*indexes(10, ledgers))
            key = bucket_key(min(ledgers), max(ledgers))
            bid = store_bucket(storage, segs, key)
            made[bid] = segs
            keys[key] = bid
    return made, keys


def bucket_file(root: Path, bucket_id: int) -> Path:
    return root / f"bucket-{bucket_id:020d}.snap"


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: to show inspection wrote nothing."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- bucket stores -------------------------------------------------------------------------------------


def test_bucket_store_figures(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    made, keys = build_bucket_store(root)
    before = tree(tmp_path)
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    assert tree(tmp_path) == before
    assert summary.error is None and not summary.damaged and summary.properties is None
    assert [b.bucket_id for b in summary.buckets] == sorted(made)
    for b in summary.buckets:
        segs = made[b.bucket_id]
        assert b.segments == expected_segments(segs)
        assert b.messages == len(segs.timestamps)
        assert b.first_deliver_at == int(segs.timestamps[0])
        assert b.last_deliver_at == int(segs.timestamps[-1])
        assert b.length_bytes == bucket_file(root, b.bucket_id).stat().st_size
        assert (b.topic, b.cursor) == (TOPIC, SUB)
        assert b.bucket_key is not None and keys[b.bucket_key] == b.bucket_id
        assert b.verified and b.error is None
    assert [(b.start_ledger_id, b.end_ledger_id) for b in summary.buckets] == [(3, 4), (5, 6)]
    assert summary.messages == 20
    assert summary.length_bytes == sum(bucket_file(root, i).stat().st_size for i in made)


def test_empty_bucket_store(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    with FileBucketSnapshotStorage(root, fsync=False) as storage:
        bid = store_bucket(storage, cut_small(*indexes(3, (1,))), bucket_key(1, 1))
        storage.delete_bucket_snapshot(bid)
    assert (root / NEXT_ID_FILE).exists()
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    assert summary.buckets == () and not summary.damaged and summary.messages == 0


def test_properties_next_to_the_store_are_cross_referenced(tmp_path: Path) -> None:
    root = tmp_path / "delayed" / "buckets"
    made, keys = build_bucket_store(root)
    first, second = sorted(made)
    with FileBucketSnapshotStorage(root, fsync=False) as storage:
        tail = store_bucket(storage, cut_small(*indexes(2, (9,))), bucket_key(9, 9))
    props = FileCursorProperties(tmp_path / "delayed" / "cursor.properties")
    props.apply(
        {
            bucket_key(3, 4): str(first),  # fine
            bucket_key(7, 8): "99",  # missing snapshot
            bucket_key(10, 11): str(second),  # the snapshot says it is bucket_5_6
            "#pulsar.internal.delayed.bucket_12_x": "5",  # malformed key
            bucket_key(13, 14): "abc",  # not an id
            MUTABLE_TAIL_PROPERTY: str(tail),
            "unrelated": "1",
        }
    )
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    p = summary.properties
    assert p is not None and p.error is None
    assert p.path == str(tmp_path / "delayed" / "cursor.properties")
    problems = {r.key: r.problem for r in p.references}
    assert problems[bucket_key(3, 4)] is None
    assert problems[MUTABLE_TAIL_PROPERTY] is None
    assert "does not hold" in str(problems[bucket_key(7, 8)])
    assert "bucket_5_6" in str(problems[bucket_key(10, 11)])
    assert "<prefix>_<start>_<end>" in str(problems["#pulsar.internal.delayed.bucket_12_x"])
    assert "not a snapshot id" in str(problems[bucket_key(13, 14)])
    assert {r.key: r.kind for r in p.references}[MUTABLE_TAIL_PROPERTY] == "mutable_tail"
    assert p.other_keys == 1
    assert p.orphans == ()  # every stored id is named by some property (even a mismatched one)
    assert p.missing == (99,)
    assert p.damaged and summary.damaged
    assert not any(b.damaged for b in summary.buckets)


def test_orphan_snapshots_and_explicit_properties(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    made, keys = build_bucket_store(root)
    first, second = sorted(made)
    elsewhere = tmp_path / "elsewhere" / "props.bin"
    FileCursorProperties(elsewhere)[bucket_key(3, 4)] = str(first)
    summary = inspect_path(root, properties=elsewhere)
    assert isinstance(summary, BucketStoreSummary)
    assert summary.properties is not None
    assert summary.properties.orphans == (second,)
    assert summary.properties.missing == ()
    assert not summary.damaged  # a leaked snapshot is reported, not damage
    with pytest.raises(InvalidArgument, match="does not exist"):
        inspect_path(root, properties=tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_damaged_properties_file_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    build_bucket_store(root)
    props = tmp_path / "cursor.properties"
    FileCursorProperties(props)["a"] = "1"
    flip(props, 14)
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    assert summary.properties is not None and summary.properties.error is not None
    assert "checksum" in summary.properties.error
    assert summary.damaged and len(summary.buckets) == 2


@pytest.mark.parametrize("where", ["header", "metadata", "segment", "footer"])
def test_a_flipped_byte_is_reported_per_bucket(tmp_path: Path, where: str) -> None:
    root = tmp_path / "buckets"
    made, _ = build_bucket_store(root)
    victim, other = sorted(made)
    path = bucket_file(root, victim)
    size = path.stat().st_size
    with FileBucketSnapshotStorage(root, fsync=False) as storage:
        meta_len = len(storage.get_bucket_snapshot_metadata(victim).SerializeToString(deterministic=True))
    header_end = 8 + 2 + 2 + 4 + 8 + 3 * 4 + len(bucket_key(3, 4)) + len(TOPIC) + len(SUB) + 4
    offset = {
        "header": 30,
        "metadata": header_end + 2,
        "segment": header_end + meta_len + 4 + 3,
        "footer": size - 10,
    }[where]
    flip(path, offset)
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    damaged = {b.bucket_id: b for b in summary.buckets}
    assert summary.damaged_buckets == (victim,)
    bad = damaged[victim]
    assert bad.error is not None and str(path) in bad.error
    assert bad.length_bytes == size
    assert not bad.verified
    good = damaged[other]
    assert good.error is None and good.messages == len(made[other].timestamps)
    assert summary.damaged
    if where == "segment":
        # Header and metadata still verify; only reading the segments back finds the damage.
        assert bad.segments == expected_segments(made[victim])
        assert "segment 1 record fails its checksum" in bad.error
        shallow = inspect_path(root, verify=False)
        assert isinstance(shallow, BucketStoreSummary)
        assert not shallow.damaged
    text = render(summary)
    assert "DAMAGED" in text and "1 damaged" in text


@pytest.mark.parametrize("link", ["loop", "dangling", "directory", "outside"])
def test_links_in_a_bucket_store_are_damage_never_an_os_error(tmp_path: Path, link: str) -> None:
    root = tmp_path / "buckets"
    made, _ = build_bucket_store(root)
    victim = bucket_file(root, 9)
    if link == "loop":
        victim.symlink_to(victim.name)
    elif link == "dangling":
        victim.symlink_to("nowhere")
    elif link == "directory":
        victim.mkdir()
    else:
        (tmp_path / "elsewhere.snap").write_bytes(bucket_file(root, min(made)).read_bytes())
        victim.symlink_to(tmp_path / "elsewhere.snap")
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary) and summary.damaged
    bad = [b for b in summary.buckets if b.bucket_id == 9]
    assert len(bad) == 1 and bad[0].error is not None
    assert all(b.error is None for b in summary.buckets if b.bucket_id != 9)


def test_a_store_that_does_not_open_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    build_bucket_store(root)
    (root / NEXT_ID_FILE).unlink()
    summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    assert summary.error is not None and "ids could be reused" in summary.error
    assert summary.buckets == () and summary.damaged
    assert not (root / NEXT_ID_FILE).exists()


# -- cursor stores --------------------------------------------------------------------------------------


def make_cursor() -> Cursor:
    c = Cursor(Position(3, -1), name="sub-a")
    for ledger, entry in [(3, 0), (3, 1), (3, 5), (3, 6), (3, 7), (4, 2), (6, 0), (6, 1)]:
        c.ack(Position(ledger, entry))
    c.ack_batch_index(Position(3, 9), 1, 8)
    c.ack_batch_index(Position(3, 9), 4, 8)
    c.ack_batch_index(Position(5, 3), 0, 3)
    c.properties["seen"] = 7
    return c


def build_cursor_store(root: Path, cursor: Cursor) -> None:
    with CursorStore.create(root, name=cursor.name) as store:
        store.flush(cursor)


def test_cursor_store_figures(tmp_path: Path) -> None:
    root = tmp_path / "sub-a"
    cursor = make_cursor()
    build_cursor_store(root, cursor)
    before = tree(tmp_path)
    summary = inspect_path(root)
    assert isinstance(summary, CursorStoreSummary)
    assert tree(tmp_path) == before
    assert summary.error is None and not summary.damaged and not summary.inspected_copy
    assert summary.name == "sub-a" and summary.generation == 1 and summary.sequence == 1
    log = next(root.glob("cursor-*.log"))
    assert summary.log_bytes == log.stat().st_size
    assert summary.live_bytes + summary.dead_bytes == summary.log_bytes
    st_ = summary.stats
    assert st_ is not None
    want = cursor.stats()
    assert st_.mark_delete_position == Position(3, 1) == want.mark_delete_position
    assert st_.non_contiguous_deleted_ranges == 3 == want.non_contiguous_deleted_ranges
    assert st_.individually_acked_entries == 6 == want.individually_acked_entries
    assert st_.partial_batches == 2 == want.partial_batches
    assert st_.compact_bytes == want.compact_bytes
    assert summary.acked_ledgers == 3
    assert [str(r) for r in summary.ranges] == ["(3:4, 3:7]", "(4:1, 4:2]", "(6:-1, 6:1]"]
    assert [(str(b.position), b.batch_size, b.acked) for b in summary.batches] == [
        ("3:9", 8, 2),
        ("5:3", 3, 1),
    ]
    assert dict(summary.properties) == {"seen": 7}
    assert summary.recovery is not None and summary.recovery.log_file == str(log)
    text = render(summary)
    for needle in ("sub-a", "3:1", "(3:4, 3:7]", "3:9", "seen=7", "ok"):
        assert needle in text


def test_sample_limits_ranges_and_batches(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    summary = inspect_path(root, sample=1)
    assert isinstance(summary, CursorStoreSummary)
    assert len(summary.ranges) == 1 and len(summary.batches) == 1
    assert summary.stats is not None and summary.stats.non_contiguous_deleted_ranges == 3
    assert "first 1 of 3" in render(summary)


def test_torn_tail_is_damage_and_nothing_is_written(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    log = next(root.glob("cursor-*.log"))
    with log.open("ab") as f:
        f.write(b"CK\x02\x00\xff\x00")  # a record header whose payload never arrived
    before = tree(tmp_path)
    summary = inspect_path(root)
    assert isinstance(summary, CursorStoreSummary)
    assert tree(tmp_path) == before
    assert summary.damaged and summary.recovery is not None
    assert summary.recovery.torn_tail_bytes == 6
    assert summary.stats is not None and summary.stats.individually_acked_entries == 6
    assert "torn tail" in render(summary)


def test_stale_files_are_kept_by_inspecting_a_copy(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    log = next(root.glob("cursor-*.log"))
    stale = root / "cursor-000000000000.log"
    stale.write_bytes(log.read_bytes()[:20])
    (root / f"{META_FILE}.tmp").write_bytes(b"leftover")
    before = tree(tmp_path)
    summary = inspect_path(root)
    assert isinstance(summary, CursorStoreSummary)
    assert tree(tmp_path) == before  # CursorStore.open in place would have deleted both
    assert summary.inspected_copy and not summary.damaged
    assert summary.recovery is not None
    assert summary.recovery.log_file == str(log)
    assert set(summary.recovery.stale_files_removed) == {stale.name, f"{META_FILE}.tmp"}
    assert summary.path == str(root)
    assert "cursorkit-inspect-" not in repr(summary)
    assert f"{META_FILE}.tmp" in render(summary)


def test_unrecoverable_cursor_store_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "cursor-000000000001.log").write_bytes(b"not a log at all")
    summary = inspect_path(root)
    assert isinstance(summary, CursorStoreSummary)
    assert summary.error is not None and "nothing recoverable" in summary.error
    assert summary.damaged and summary.stats is None
    assert "DAMAGED" in render(summary)


def test_a_locked_cursor_store_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    with CursorStore.open(root):
        summary = inspect_path(root)
    assert isinstance(summary, CursorStoreSummary)
    assert summary.error is not None and "open elsewhere" in summary.error


# -- detection --------------------------------------------------------------------------------------------


def test_unknown_directories_are_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(InvalidArgument, match="expected a bucket snapshot store"):
        inspect_path(tmp_path / "plain")
    with pytest.raises(InvalidArgument, match="does not exist"):
        inspect_path(tmp_path / "missing")
    with pytest.raises(InvalidArgument, match="is not a directory"):
        inspect_path(tmp_path / "plain" / "notes.txt")
    mixed = tmp_path / "mixed"
    build_bucket_store(mixed)
    (mixed / META_FILE).write_bytes(b"")
    with pytest.raises(InvalidArgument, match="more than one kind"):
        inspect_path(mixed)
    assert not (tmp_path / "missing").exists()


def test_argument_checks(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    with pytest.raises(InvalidInputType):
        inspect_path(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="sample"):
        inspect_path(root, sample=-1)
    with pytest.raises(InvalidArgument, match="bucket store only"):
        inspect_path(root, properties=root / META_FILE)
    summary = inspect_path(root)
    with pytest.raises(InvalidInputType):
        render("summary")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        render(summary, max_rows=0)


# -- rebuild outputs ---------------------------------------------------------------------------------------


def build_rebuild_output(root: Path, **overrides: object) -> dict[str, object]:
    made, keys = build_bucket_store(root / "delayed" / "buckets")
    FileCursorProperties(root / "delayed" / "cursor.properties").apply({k: str(v) for k, v in keys.items()})
    build_cursor_store(root / "cursors" / "sub-a", make_cursor())
    other = Cursor(Position(8, 4), name="sub-b")
    build_cursor_store(root / "cursors" / "sub-b", other)
    manifest: dict[str, object] = {
        "format": "cursorkit-rebuild",
        "version": 1,
        "topic": TOPIC,
        "now_ms": T0 + 5_000,
        "delayed": {
            "storage": "delayed/buckets",
            "properties": "delayed/cursor.properties",
            "topic": TOPIC,
            "cursor": SUB,
        },
        "subscriptions": {"sub-a": "cursors/sub-a", "sub-b": "cursors/sub-b"},
    }
    manifest.update(overrides)
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def test_rebuild_output_summarises_every_part(tmp_path: Path) -> None:
    root = tmp_path / "out"
    build_rebuild_output(root)
    before = tree(root)
    summary = inspect_path(root)
    assert isinstance(summary, RebuildOutputSummary)
    assert tree(root) == before
    assert summary.problems == () and not summary.damaged
    assert (summary.topic, summary.now_ms) == (TOPIC, T0 + 5_000)
    assert (summary.delayed_topic, summary.delayed_cursor) == (TOPIC, SUB)
    assert summary.delayed is not None and summary.delayed.messages == 20
    assert summary.delayed.properties is not None
    assert summary.delayed.properties.orphans == () and summary.delayed.properties.missing == ()
    assert sorted(summary.subscriptions) == ["sub-a", "sub-b"]
    a, b = summary.subscriptions["sub-a"], summary.subscriptions["sub-b"]
    assert a.stats is not None and a.stats.individually_acked_entries == 6
    assert b.stats is not None and b.stats.mark_delete_position == Position(8, 4)
    text = render(summary)
    for needle in ("Rebuild output", "Delayed index", "Subscriptions", "sub-a", "sub-b", "8:4", "3..4"):
        assert needle in text


def test_rebuild_output_problems(tmp_path: Path) -> None:
    root = tmp_path / "out"
    build_rebuild_output(
        root,
        subscriptions={
            "sub-a": "cursors/sub-a",
            "gone": "cursors/gone",
            "up": "../elsewhere",
            "odd": "delayed",
        },
        delayed={"storage": "delayed/buckets", "properties": "delayed/none", "topic": "other", "cursor": SUB},
    )
    summary = inspect_path(root)
    assert isinstance(summary, RebuildOutputSummary)
    joined = "\n".join(summary.problems)
    assert "subscriptions['gone']" in joined and "is missing" in joined
    assert "subscriptions['up']" in joined and "not a path inside" in joined
    assert "subscriptions['odd']" in joined and "is not a cursor store" in joined
    assert "delayed.properties" in joined
    assert "belongs to topic" in joined
    assert sorted(summary.subscriptions) == ["sub-a"]
    assert summary.delayed is not None and summary.delayed.properties is None
    assert summary.damaged
    assert "problem" in render(summary)


def test_rebuild_output_without_delayed_index(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    build_cursor_store(root / "cursors" / "s", Cursor(name="s"))
    manifest = {"format": "cursorkit-rebuild", "version": 1, "topic": TOPIC, "now_ms": 0, "delayed": None}
    manifest["subscriptions"] = {"s": "cursors/s"}
    (root / "manifest.json").write_text(json.dumps(manifest))
    summary = inspect_path(root)
    assert isinstance(summary, RebuildOutputSummary)
    assert summary.delayed is None and summary.delayed_topic is None and not summary.damaged
    assert "none" in render(summary)


def test_bad_manifests(tmp_path: Path) -> None:
    root = tmp_path / "out"
    manifest = build_rebuild_output(root)
    path = root / "manifest.json"
    cases: list[tuple[object, type[Exception], str]] = [
        ("{not json", InvalidArgument, "not JSON"),
        ({**manifest, "format": "something-else"}, InvalidArgument, "not a cursorkit-rebuild manifest"),
        ([1, 2], InvalidArgument, "not a cursorkit-rebuild manifest"),
        ({**manifest, "version": 2}, UnsupportedVersion, "version 2"),
        ({**manifest, "version": True}, UnsupportedVersion, "version True"),
        ({**manifest, "now_ms": "soon"}, CorruptSnapshot, "now_ms"),
        ({**manifest, "subscriptions": {"a": 3}}, CorruptSnapshot, "subscriptions"),
        ({**manifest, "delayed": {"storage": "x"}}, CorruptSnapshot, "delayed.properties"),
        ({k: v for k, v in manifest.items() if k != "delayed"}, CorruptSnapshot, "delayed"),
    ]
    for doc, error, message in cases:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        with pytest.raises(error, match=message):
            inspect_path(root)


# -- rendering ---------------------------------------------------------------------------------------------


def test_render_prints_to_a_console_and_returns_text(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    build_bucket_store(root)
    summary = inspect_path(root)
    sink = io.StringIO()
    console = Console(file=sink, width=100, color_system=None)
    text = render(summary, console=console)
    assert sink.getvalue() == text
    assert "Bucket snapshot store" in text and "Buckets" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    narrow = render(summary, max_rows=1)
    assert "1 more not shown" in narrow


# -- properties against models ----------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(st.integers(0, 50_000), st.integers(1, 6), st.integers(0, 40)),
        min_size=1,
        max_size=60,
        unique_by=lambda t: (t[1], t[2]),
    ),
    st.integers(1, 8),
    st.integers(1, 20_000),
)
@settings(max_examples=40)
def test_bucket_summary_matches_model(rows: list[tuple[int, int, int]], per_segment: int, step: int) -> None:
    rows.sort()
    ts = np.array([r[0] for r in rows], dtype=np.int64) + T0
    ls = np.array([r[1] for r in rows], dtype=np.int64)
    es = np.array([r[2] for r in rows], dtype=np.int64)
    segs = cut(ts, ls, es, max_time_step_ms=step, max_indexes_per_segment=per_segment)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "b"
        with FileBucketSnapshotStorage(root, fsync=False) as storage:
            bid = store_bucket(storage, segs, bucket_key(int(ls.min()), int(ls.max())))
        summary = inspect_path(root)
    assert isinstance(summary, BucketStoreSummary)
    (bucket,) = summary.buckets
    assert bucket.bucket_id == bid and bucket.error is None
    assert bucket.segments == expected_segments(segs)
    assert bucket.messages == len(rows)
    assert bucket.first_deliver_at == T0 + rows[0][0]
    assert bucket.last_deliver_at == T0 + max(r[0] for r in rows)


def model_cursor(acks: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], list[tuple[int, int, int]]]:
    """Mark-delete (from 1:-1, rolling within ledger 1 only) and the acked runs after it."""
    acked = set(acks)
    md = -1
    while (1, md + 1) in acked:
        md += 1
    rest = sorted(p for p in acked if p > (1, md))
    runs: list[tuple[int, int, int]] = []
    for ledger, entry in rest:
        if runs and runs[-1][0] == ledger and runs[-1][2] == entry - 1:
            runs[-1] = (ledger, runs[-1][1], entry)
        else:
            runs.append((ledger, entry, entry))
    return (1, md), runs


@given(st.sets(st.tuples(st.integers(1, 4), st.integers(0, 30)), max_size=60))
@settings(max_examples=40)
def test_cursor_summary_matches_model(acks: set[tuple[int, int]]) -> None:
    cursor = Cursor(Position(1, -1), name="m")
    for ledger, entry in sorted(acks, key=lambda p: (p[1] * 7 + p[0]) % 11):
        cursor.ack(Position(ledger, entry))
    (md_ledger, md_entry), runs = model_cursor(acks)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "c"
        build_cursor_store(root, cursor)
        summary = inspect_path(root, sample=1000)
    assert isinstance(summary, CursorStoreSummary)
    assert summary.stats is not None and not summary.damaged
    assert summary.stats.mark_delete_position == Position(md_ledger, md_entry)
    assert summary.stats.non_contiguous_deleted_ranges == len(runs)
    assert summary.stats.individually_acked_entries == sum(e - s + 1 for _, s, e in runs)
    assert summary.acked_ledgers == len({ledger for ledger, _, _ in runs})
    assert [str(r) for r in summary.ranges] == [f"({lg}:{s - 1}, {lg}:{e}]" for lg, s, e in runs]


@given(st.sets(st.integers(0, 40)), st.sets(st.integers(0, 40)))
def test_orphans_and_missing_model(stored: set[int], named: set[int]) -> None:
    orphans, missing = _orphans_and_missing(stored, named)
    assert orphans == tuple(i for i in range(41) if i in stored and i not in named)
    assert missing == tuple(i for i in range(41) if i in named and i not in stored)


def test_the_copy_is_removed_after_inspection(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_cursor_store(root, make_cursor())
    (root / f"{META_FILE}.tmp").write_bytes(b"x")
    tmpdir = Path(tempfile.gettempdir())
    before = {p.name for p in tmpdir.iterdir() if p.name.startswith("cursorkit-inspect-")}
    inspect_path(root)
    after = {p.name for p in tmpdir.iterdir() if p.name.startswith("cursorkit-inspect-")}
    assert after == before
    assert os.path.exists(root / f"{META_FILE}.tmp")
