"""The rebuild job on a real local Spark: outputs equal the single-process reference; bad input is refused.

One generated topic of ~100k messages with 3 subscriptions is rebuilt once per module and checked
through the library's loaders; the bad-input cases run on tiny hand-written logs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorkit._core import Position
from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.pipeline import ack_fold, schema
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.generate import GenerateSummary, generate
from cursorkit.pipeline.inspector import inspect_path
from cursorkit.pipeline.load import open_delayed_index, read_cursors, read_manifest
from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
from cursorkit.pipeline.reference import ReferenceRebuild, rebuild_reference
from cursorkit.pipeline.results import RebuildSummary
from cursorkit.pipeline.verify import verify_rebuild

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SMALL = RebuildConfig(min_index_count_per_bucket=3000, max_indexes_per_segment=400, fsync=False)


@pytest.fixture(scope="module")
def topic(tmp_path_factory: pytest.TempPathFactory) -> GenerateSummary:
    root = tmp_path_factory.mktemp("topic")
    return generate(
        root / "logs",
        messages=100_000,
        ledgers=25,
        keys=3000,
        delayed_fraction=0.3,
        subscriptions=3,
        seed=11,
        rows_per_file=30_000,
    )


@pytest.fixture(scope="module")
def rebuilt(spark: SparkSession, topic: GenerateSummary) -> tuple[Path, RebuildSummary]:
    out = topic.messages_path.parent.parent / "out"
    summary = rebuild(spark, topic.messages_path, topic.acks_path, out, SMALL)
    return out, summary


@pytest.fixture(scope="module")
def reference(topic: GenerateSummary) -> ReferenceRebuild:
    return rebuild_reference(
        topic.messages_path, topic.acks_path, min_index_count_per_bucket=SMALL.min_index_count_per_bucket
    )


def test_outputs_equal_the_single_process_rebuild(
    rebuilt: tuple[Path, RebuildSummary], reference: ReferenceRebuild
) -> None:
    out, summary = rebuilt
    check = verify_rebuild(out, reference)
    assert check.problems == []
    assert check.cursors == 3
    assert check.buckets == len(reference.buckets) == len(summary.buckets) > 3
    # The recovered tracker emitted every not-yet-due message, one at a time, in deliver-at order.
    assert check.emitted == check.delayed_messages == len(reference.not_yet_due) > 10_000
    # The reference is not trivially equal: cursors hold holes and partial batches.
    assert sum(len(c.individually_deleted) for c in reference.cursors.values()) > 1000
    assert any(c.batch_count for c in reference.cursors.values())
    assert summary.now_ms == topic_now(out)


def leftovers(directory: Path) -> list[str]:
    """Hidden entries a run left beside its output, other than its lock file."""
    return [p.name for p in directory.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")]


def topic_now(out: Path) -> int:
    return read_manifest(out).now_ms


def test_summary_counts_what_was_read(rebuilt: tuple[Path, RebuildSummary], topic: GenerateSummary) -> None:
    out, summary = rebuilt
    assert summary.inputs["messages"] == topic.messages
    assert summary.inputs["acks"] == topic.acks
    assert summary.inputs["ledgers"] == topic.ledgers
    assert summary.inputs["delayed"] == topic.delayed
    indexed = sum(b.messages for b in summary.buckets)
    assert (
        indexed
        + summary.rules["delayed_due"]
        + summary.rules["delayed_beyond_max_delay"]
        + summary.rules["delayed_acked"]
        == topic.delayed
    )
    assert sum(summary.ledger_sizes.values()) == topic.messages
    for load in summary.key_load:
        assert sum(load.messages) == topic.messages
    data = json.loads((out / "summary.json").read_text())
    assert data["inputs"] == summary.inputs
    assert [s["name"] for s in data["stages"]][:3] == ["read", "index messages", "fold acks"]
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "sub-1" in html
    assert pq.read_table(out / "stats" / "cursors.parquet").num_rows == 3
    # Nothing half-written is left next to the output.
    assert leftovers(out.parent) == []


def test_cursor_stats_compare_persisted_forms(rebuilt: tuple[Path, RebuildSummary]) -> None:
    out, summary = rebuilt
    cursors = read_cursors(out)
    for row in summary.cursors:
        c = cursors[row.subscription]
        assert row.mark_delete == str(c.mark_delete_position)
        assert row.ranges == len(c.individually_deleted)
        assert row.redeliver_ours == 0
        if row.ranges > 10_000:  # Pulsar's default keeps the first 10,000 ranges only
            assert not row.persistable_pulsar and row.redeliver_pulsar > 0
        else:
            assert row.persistable_pulsar and row.redeliver_pulsar == 0


def test_rebuild_does_not_depend_on_partitioning(
    spark: SparkSession,
    rebuilt: tuple[Path, RebuildSummary],
    topic: GenerateSummary,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many small input splits fold to byte-identical stores and snapshots.

    The second run also takes the other batch-size path (a join of the batch-index acks instead of a
    broadcast of the batch entries).
    """
    out, _ = rebuilt
    monkeypatch.setattr(ack_fold, "BROADCAST_BATCH_ENTRIES", -1)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")
    try:
        again = tmp_path / "again"
        rebuild(spark, topic.messages_path, topic.acks_path, again, SMALL)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    for rel in ("delayed/cursor.properties", "cursors/sub-0/store.meta"):
        assert (again / rel).read_bytes() == (out / rel).read_bytes()
    snaps = sorted(p.name for p in (out / "delayed" / "buckets").glob("bucket-*.snap"))
    assert snaps == sorted(p.name for p in (again / "delayed" / "buckets").glob("bucket-*.snap"))
    for name in snaps:
        assert (again / "delayed" / "buckets" / name).read_bytes() == (
            out / "delayed" / "buckets" / name
        ).read_bytes()
    first, second = read_cursors(out), read_cursors(again)
    assert sorted(first) == sorted(second)
    for name, c in first.items():
        d = second[name]
        assert c.mark_delete_position == d.mark_delete_position
        assert c.individually_deleted == d.individually_deleted
        assert c.batches() == d.batches()


def test_recovered_index_is_a_working_tracker(rebuilt: tuple[Path, RebuildSummary], tmp_path: Path) -> None:
    out, summary = rebuilt
    # Work on a copy: the tracker writes to its storage as a broker's would.
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    now = summary.now_ms
    clock = [now]
    b0 = summary.buckets[0]
    entry = _some_entry(copy, b0.bucket_id)
    tracker = open_delayed_index(copy, clock=lambda: clock[0], strict=True, background=False)
    assert tracker is not None
    try:
        first = min(b.first_deliver_at for b in summary.buckets)
        assert tracker.contains_message(b0.start_ledger_id, entry)
        assert not tracker.has_message_available()
        clock[0] = first
        rows = tracker.get_scheduled_messages(10)
        assert len(rows) >= 1
    finally:
        tracker.close()


def _some_entry(out: Path, bucket_id: int) -> int:
    from cursorkit.delayed import FileBucketSnapshotStorage, snapshot

    with FileBucketSnapshotStorage(out / "delayed" / "buckets") as storage:
        seg = snapshot.decode(storage.get_bucket_snapshot_segment(bucket_id, 1, 1))
        ledger = int(seg.ledger_ids.min())
        return int(seg.entry_ids[seg.ledger_ids == ledger][0])


def test_inspect_reads_the_output(
    rebuilt: tuple[Path, RebuildSummary], capsys: pytest.CaptureFixture[str]
) -> None:
    out, summary = rebuilt
    s = inspect_path(out)
    assert not s.damaged
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sub-2" in text and "#pulsar.internal.delayed.bucket_" in text
    assert len(summary.buckets) > 0


# --- the CLI --------------------------------------------------------------------------------------


def test_cli_generate_and_rebuild(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert spark is not None  # the session the CLI's getOrCreate picks up
    logs = tmp_path / "logs"
    rc = main(
        [
            "generate",
            "--out",
            str(logs),
            "--messages",
            "5000",
            "--ledgers",
            "4",
            "--keys",
            "50",
            "--subscriptions",
            "2",
        ]
    )
    assert rc == 0
    out = tmp_path / "out"
    rc = main(
        [
            "rebuild",
            "--messages",
            str(logs / "messages"),
            "--acks",
            str(logs / "acks"),
            "--out",
            str(out),
            "--min-index-count-per-bucket",
            "200",
            "--conf",
            "spark.sql.shuffle.partitions=2",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "sub-1" in text and "report" in text
    m = read_manifest(out)
    assert set(m.subscriptions) == {"sub-0", "sub-1"}
    # A rerun replaces the earlier output (it is a rebuild's output).
    assert main(["rebuild", "--messages", str(logs / "messages"), "--out", str(out), "--no-report"]) == 0
    assert read_manifest(out).subscriptions == {}
    assert not (out / "report.html").exists()


def test_cli_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["rebuild", "--messages", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "InvalidInput" in err and "no such file" in err
    assert main(["rebuild", "--messages", "x", "--out", "y", "--conf", "novalue"]) == 2


# --- bad input ------------------------------------------------------------------------------------


def _messages(n: int = 40, **cols: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ledger_id": [7] * (n // 2) + [9] * (n - n // 2),
        "entry_id": list(range(n // 2)) + list(range(n - n // 2)),
        "publish_time": [1_700_000_000_000 + i for i in range(n)],
        "deliver_at": [1_700_000_000_000 + 3_600_000 + i if i % 2 else None for i in range(n)],
        "key": [f"k{i % 5}" for i in range(n)],
    }
    base.update(cols)
    return base


def _write(path: Path, data: dict[str, Any], schema_: pa.Schema | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(data, schema=schema_), path / "part-0.parquet")
    return path


def _acks(rows: list[tuple[str, int, int, int | None, str, int]]) -> dict[str, Any]:
    names = ["subscription", "ledger_id", "entry_id", "batch_index", "ack_type", "ack_time"]
    cols = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    return cols


ACK_SCHEMA = pa.schema([(c.name, c.type) for c in schema.ACK_COLUMNS])


def _rebuild_fails(spark: SparkSession, tmp_path: Path, msgs: Path, acks: Path | None = None) -> InvalidInput:
    out = tmp_path / "out"
    with pytest.raises(InvalidInput) as err:
        rebuild(spark, msgs, acks, out, SMALL)
    assert not out.exists()
    assert leftovers(tmp_path) == []
    return err.value


def test_missing_column_is_named(spark: SparkSession, tmp_path: Path) -> None:
    data = _messages()
    del data["publish_time"]
    e = _rebuild_fails(spark, tmp_path, _write(tmp_path / "m", data))
    assert e.column == "publish_time" and "missing column 'publish_time'" in str(e)


def test_mistyped_column_is_named_with_a_sample(spark: SparkSession, tmp_path: Path) -> None:
    data = _messages(entry_id=[str(i) for i in range(40)])
    e = _rebuild_fails(spark, tmp_path, _write(tmp_path / "m", data))
    assert e.column == "entry_id" and "expected an integer" in str(e)
    assert e.row is not None and e.row["ledger_id"] == 7


def test_null_id_is_named_with_its_row(spark: SparkSession, tmp_path: Path) -> None:
    entries: list[int | None] = list(range(20)) + list(range(20))
    entries[25] = None
    e = _rebuild_fails(spark, tmp_path, _write(tmp_path / "m", _messages(entry_id=entries)))
    assert e.column == "entry_id" and "is null" in str(e)
    assert e.row is not None and e.row["ledger_id"] == 9 and e.row["entry_id"] is None


@pytest.mark.parametrize("split", [False, True])
def test_duplicate_position_is_refused(spark: SparkSession, tmp_path: Path, split: bool) -> None:
    m = tmp_path / "m"
    if split:  # the two copies in different files (different Spark tasks)
        _write(m, _messages())
        extra = _messages(n=2)
        pq.write_table(pa.table({k: v[:1] for k, v in extra.items()}), m / "part-1.parquet")
    else:
        entries = list(range(20)) + list(range(19)) + [3]
        _write(m, _messages(entry_id=entries))
    e = _rebuild_fails(spark, tmp_path, m)
    assert "repeats a position" in str(e)
    assert e.row is not None and "entry_id" in e.row


def test_gap_in_a_ledger_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    entries = list(range(20)) + [i if i < 10 else i + 1 for i in range(20)]
    e = _rebuild_fails(spark, tmp_path, _write(tmp_path / "m", _messages(entry_id=entries)))
    assert "entry 10 is missing" in str(e) and e.row == {"ledger_id": 9, "entry_id": 10}


def test_deliver_at_in_microseconds_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    at: list[int | None] = [None] * 40
    at[5] = 1_700_000_000_000_000
    e = _rebuild_fails(spark, tmp_path, _write(tmp_path / "m", _messages(deliver_at=at)))
    assert e.column == "deliver_at" and "year 3000" in str(e)
    assert e.row is not None and e.row["deliver_at"] == 1_700_000_000_000_000


def test_bad_ack_type_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    m = _write(tmp_path / "m", _messages())
    a = _write(
        tmp_path / "a", _acks([("s", 7, 1, None, "individual", 1), ("s", 7, 2, None, "skip", 2)]), ACK_SCHEMA
    )
    e = _rebuild_fails(spark, tmp_path, m, a)
    assert e.column == "ack_type" and e.row is not None and e.row["ack_type"] == "skip"


def test_rules_are_counted_not_raised(spark: SparkSession, tmp_path: Path) -> None:
    now = 1_700_000_000_000 + 39
    at: list[int | None] = [None] * 40
    at[1] = now - 5  # already due
    at[2] = now + 60_000  # indexed
    at[3] = now + 10 * 365 * 24 * 3_600_000  # beyond the max delay
    at[4] = now + 120_000  # acked by the only subscription: dropped from the index
    m = _write(tmp_path / "m", _messages(deliver_at=at))
    a = _write(
        tmp_path / "a",
        _acks(
            [
                ("s", 7, 4, None, "individual", now - 1),
                ("s", 7, 999, None, "individual", now - 1),  # unknown position
                ("s", 8, 0, None, "individual", now - 1),  # unknown ledger
                ("s", 7, 5, None, "individual", now + 1),  # after now
            ]
        ),
        ACK_SCHEMA,
    )
    out = tmp_path / "out"
    summary = rebuild(spark, m, a, out, RebuildConfig(now_ms=now, fsync=False))
    assert summary.rules == {
        "delayed_due": 1,
        "delayed_beyond_max_delay": 1,
        "acks_unknown_position": 2,
        "acks_after_now": 1,
        "delayed_acked": 1,
    }
    assert [b.messages for b in summary.buckets] == [1]
    cursors = read_cursors(out)
    assert cursors["s"].is_acked(Position(7, 4)) and not cursors["s"].is_acked(Position(7, 5))
    tracker = open_delayed_index(out, clock=lambda: now, strict=True, background=False)
    assert tracker is not None
    try:
        assert tracker.number_of_delayed_messages == 1 and tracker.contains_message(7, 2)
    finally:
        tracker.close()


def test_nack_rows_become_the_stores_redelivery_counts(spark: SparkSession, tmp_path: Path) -> None:
    """Beyond Pulsar: nack rows count redeliveries of what is still unacknowledged, in the rebuilt store."""
    from cursorkit.ackstate import CursorStore
    from cursorkit.pipeline.cursors import cursor_dir_name

    now = 1_700_000_000_000 + 39
    m = _write(tmp_path / "m", _messages())
    a = _write(
        tmp_path / "a",
        _acks(
            [
                ("s", 7, 3, None, "nack", now - 9),
                ("s", 7, 3, None, "Nack", now - 8),
                ("s", 7, 4, None, "nack", now - 9),
                ("s", 7, 4, None, "individual", now - 1),  # acknowledged at last: no count kept
                ("s", 9, 0, 2, "nack", now - 9),  # a batch index is ignored: the entry counts
                ("s", 9, 1, None, "nack", now + 1),  # after now: skipped, as acks are
                ("t", 7, 0, None, "individual", now - 1),
            ]
        ),
        ACK_SCHEMA,
    )
    out = tmp_path / "out"
    rebuild(spark, m, a, out, RebuildConfig(now_ms=now, fsync=False))
    with CursorStore.open(out / "cursors" / cursor_dir_name("s")) as store:
        assert not store.redelivery_report.damaged
        runs = store.redelivery_counts.runs()
    assert runs == [(Position(7, 3), Position(7, 3), 2), (Position(9, 0), Position(9, 0), 1)]
    assert not (out / "cursors" / cursor_dir_name("t") / "redeliveries").exists()
    assert read_cursors(out)["s"].is_acked(Position(7, 4))


def test_failed_rerun_keeps_the_previous_output(spark: SparkSession, tmp_path: Path) -> None:
    m = _write(tmp_path / "m", _messages())
    out = tmp_path / "out"
    rebuild(spark, m, None, out, SMALL)
    before = sorted(os.listdir(out))
    bad = _write(tmp_path / "bad", _messages(entry_id=[None] * 40))
    with pytest.raises(InvalidInput):
        rebuild(spark, bad, None, out, SMALL)
    assert sorted(os.listdir(out)) == before
    assert read_manifest(out).now_ms == 1_700_000_000_039
    assert leftovers(tmp_path) == []


def test_refuses_to_replace_a_directory_it_did_not_write(spark: SparkSession, tmp_path: Path) -> None:
    m = _write(tmp_path / "m", _messages())
    out = tmp_path / "precious"
    out.mkdir()
    (out / "data.txt").write_text("keep me")
    with pytest.raises(InvalidArgument):
        rebuild(spark, m, None, out, SMALL)
    assert (out / "data.txt").read_text() == "keep me"


def test_csv_and_json_logs_are_read(spark: SparkSession, tmp_path: Path) -> None:
    data = _messages()
    table = pa.table(data)
    import pyarrow.csv as pcsv

    pcsv.write_csv(table, tmp_path / "m.csv")
    (tmp_path / "m.json").write_text(
        "\n".join(json.dumps(dict(zip(data, row, strict=True))) for row in zip(*data.values(), strict=True))
    )
    a = rebuild(spark, tmp_path / "m.csv", None, tmp_path / "o1", SMALL)
    b = rebuild(spark, tmp_path / "m.json", None, tmp_path / "o2", SMALL)
    assert a.ledger_sizes == b.ledger_sizes == {7: 20, 9: 20}
    assert [x.messages for x in a.buckets] == [x.messages for x in b.buckets] == [20]
    assert a.now_ms == b.now_ms == 1_700_000_000_039


def test_leftovers_of_a_killed_run_are_removed(spark: SparkSession, tmp_path: Path) -> None:
    m = _write(tmp_path / "m", _messages())
    dead = tmp_path / ".out.rebuild-0123456789ab"
    (dead / "delayed").mkdir(parents=True)
    (dead / "manifest.json").write_text("{}")
    old = tmp_path / ".out.old-0123456789ab"
    old.mkdir()
    rebuild(spark, m, None, tmp_path / "out", SMALL)
    assert leftovers(tmp_path) == []
    assert read_manifest(tmp_path / "out").subscriptions == {}


def test_two_rebuilds_never_write_one_output(spark: SparkSession, tmp_path: Path) -> None:
    import fcntl

    m = _write(tmp_path / "m", _messages())
    fd = os.open(tmp_path / ".out.lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(InvalidArgument, match="another rebuild"):
            rebuild(spark, m, None, tmp_path / "out", SMALL)
    finally:
        os.close(fd)
    assert not (tmp_path / "out").exists()
    rebuild(spark, m, None, tmp_path / "out", SMALL)
