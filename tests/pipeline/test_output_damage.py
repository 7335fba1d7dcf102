"""Damaged rebuild outputs never load as healthy, and a hostile manifest never reaches outside its output.

Real outputs (one topic, and many topics) are rebuilt once per module on local Spark and copied for
each case; each case damages its copy the way a disk, an operator or an adversary would and checks
every reader: ``read_cursors``, ``open_delayed_index``, ``publish_cursors``, ``cursorkit inspect``
and the next rebuild's clean-up.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cursorkit.errors import CorruptSnapshot, CursorkitError, DamagedStore, InvalidArgument
from cursorkit.pipeline import cluster
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.generate import generate
from cursorkit.pipeline.generate_topics import generate_topics
from cursorkit.pipeline.load import list_topics, open_delayed_index, read_cursors, read_manifest
from cursorkit.pipeline.publish import publish_cursors
from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
from cursorkit.stores import cursor_znode_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

CFG = RebuildConfig(min_index_count_per_bucket=300, max_indexes_per_segment=80, fsync=False, report=False)


@pytest.fixture(scope="module")
def one_topic(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-topic")
    logs = generate(
        root / "logs", messages=6_000, ledgers=4, keys=50, delayed_fraction=0.3, subscriptions=3, seed=3
    )
    rebuild(spark, logs.messages_path, logs.acks_path, root / "out", CFG)
    return root / "out"


@pytest.fixture(scope="module")
def many_topics(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many-topics")
    generate_topics(
        root / "logs", topics=3, messages=6_000, keys=30, delayed_fraction=0.3, subscriptions=2, seed=4
    )
    cluster.rebuild_topics(spark, root / "logs" / "messages", root / "logs" / "acks", root / "out", CFG)
    return root / "out"


def copy_of(out: Path, tmp_path: Path) -> Path:
    target = tmp_path / "out"
    shutil.copytree(out, target, symlinks=True)
    return target


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def cursor_log(store: Path) -> Path:
    return next(store.glob("cursor-*.log"))


# --- one topic ------------------------------------------------------------------------------------------


def test_a_flipped_byte_in_a_cursor_log_is_never_a_rewound_cursor(
    one_topic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(one_topic, tmp_path)
    healthy = read_cursors(out)
    assert healthy.damage == {} and len(healthy) == 3
    victim = sorted(healthy)[0]
    flip(cursor_log(out / "cursors" / victim), -10)  # inside the last checkpoint marker
    with pytest.raises(DamagedStore) as caught:
        read_cursors(out)
    assert set(caught.value.damage) == {victim}
    lost = caught.value.damage[victim]
    want = healthy[victim]
    assert "SHA-256" in lost and "where the rebuild wrote" in lost
    assert f"{want.mark_delete_position} and {len(want.individually_deleted):,} ranges" in lost
    assert victim in str(caught.value)
    partial = read_cursors(out, allow_damaged=True)
    assert set(partial.damage) == {victim} and set(partial) == set(healthy)
    assert partial.reports[victim].damaged
    for name in set(healthy) - {victim}:  # the rest is intact
        assert partial[name].mark_delete_position == healthy[name].mark_delete_position
        assert partial[name].individually_deleted == healthy[name].individually_deleted
    assert main(["inspect", str(out)]) == 1
    assert "DAMAGED" in capsys.readouterr().out


def test_an_output_written_before_files_were_listed_still_reports_store_damage(
    one_topic: Path, tmp_path: Path
) -> None:
    out = copy_of(one_topic, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["files"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    victim = sorted(manifest["subscriptions"])[1]
    flip(cursor_log(out / "cursors" / victim), -10)
    with pytest.raises(DamagedStore) as caught:
        read_cursors(out)
    assert list(caught.value.damage) == [victim]
    assert "SHA-256" not in caught.value.damage[victim]  # nothing to compare with: the report tells


def test_a_damaged_bucket_is_refused_before_anything_opens(one_topic: Path, tmp_path: Path) -> None:
    out = copy_of(one_topic, tmp_path)
    snap = next((out / "delayed" / "buckets").glob("bucket-*.snap"))
    flip(snap, snap.stat().st_size // 2)
    before = sorted(p.name for p in snap.parent.iterdir())
    with pytest.raises(DamagedStore, match="SHA-256") as caught:
        open_delayed_index(out, clock=lambda: 0)
    assert any(snap.name in k for k in caught.value.damage)
    assert sorted(p.name for p in snap.parent.iterdir()) == before  # nothing opened, nothing changed
    # Without the manifest's check, recovery finds the damage itself and still refuses.
    with pytest.raises(DamagedStore, match="replayed"):
        open_delayed_index(out, clock=lambda: 0, verify=False)
    tracker = open_delayed_index(out, clock=lambda: 0, verify=False, allow_damaged=True)
    assert tracker is not None
    try:
        assert tracker.recovery_report.replay_required
    finally:
        tracker.close()


def test_a_healthy_output_loads_and_reopens_when_nothing_changed(one_topic: Path, tmp_path: Path) -> None:
    out = copy_of(one_topic, tmp_path)
    tracker = open_delayed_index(out, clock=lambda: 0)
    assert tracker is not None
    try:
        assert not tracker.recovery_report.replay_required
    finally:
        tracker.close()
    assert read_cursors(out).damage == {}


# --- many topics ----------------------------------------------------------------------------------------


def test_one_damaged_topic_among_many_is_found_without_naming_it(
    many_topics: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(many_topics, tmp_path)
    topics = list_topics(out)
    assert main(["inspect", str(out)]) == 0
    capsys.readouterr()
    victim = sorted(topics)[1]
    store = next((out / topics[victim] / "cursors").iterdir())
    flip(cursor_log(store), -10)
    assert main(["inspect", str(out)]) == 1
    text = capsys.readouterr().out
    assert "DAMAGED" in text and victim in text and store.name in text
    assert main(["inspect", str(out), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["damaged"] is True and doc["damaged_topics"] == [victim]
    with pytest.raises(DamagedStore, match=store.name):
        read_cursors(out, topic=victim)
    for other in set(topics) - {victim}:
        assert read_cursors(out, topic=other).damage == {}


def test_swapped_topic_directories_are_refused_by_every_reader(
    many_topics: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(many_topics, tmp_path)
    topics = list_topics(out)
    a, b = sorted(topics)[:2]
    da, db = out / topics[a], out / topics[b]
    da.rename(da.with_name("swap"))
    db.rename(da)
    da.with_name("swap").rename(db)
    for topic in (a, b):
        with pytest.raises(DamagedStore, match="holds topic"):
            read_cursors(out, topic=topic)
        with pytest.raises(DamagedStore):
            open_delayed_index(out, topic=topic, clock=lambda: 0)
    assert main(["inspect", str(out)]) == 1
    text = capsys.readouterr().out
    assert a in text and b in text and "holds topic" in text


def test_a_hostile_run_in_the_manifest_deletes_nothing_outside(
    spark: SparkSession, many_topics: Path, tmp_path: Path
) -> None:
    out = copy_of(many_topics, tmp_path)
    victim = tmp_path / "victim" / "topics" / "t" / "a1"
    victim.mkdir(parents=True)
    (victim / "precious").write_text("keep me")
    manifest = json.loads((out / "manifest.json").read_text())
    runs_before = sorted(p.name for p in (out / "runs").iterdir())
    for run in ("../../victim", "../victim", "/tmp", "a/b", ".."):
        (out / "manifest.json").write_text(json.dumps(manifest | {"run": run}))
        with pytest.raises(InvalidArgument, match="does not check out"):
            cluster.rebuild_topics(spark, tmp_path / "no-logs", None, out, CFG)
        assert (victim / "precious").read_text() == "keep me"
        assert sorted(p.name for p in (out / "runs").iterdir()) == runs_before  # nothing removed
        with pytest.raises(CorruptSnapshot, match="run"):
            read_cursors(out, topic=sorted(manifest["topics"])[0])


def test_a_staged_link_is_removed_itself_never_what_it_points_to(
    spark: SparkSession, many_topics: Path, tmp_path: Path
) -> None:
    out = copy_of(many_topics, tmp_path)
    outside = tmp_path / "outside"
    (outside / "topics" / "t" / "a9").mkdir(parents=True)
    (outside / "topics" / "t" / "a9" / "file").write_text("keep me")
    (out / "runs" / "killed-run").symlink_to(outside, target_is_directory=True)
    from cursorkit.pipeline.output import open_output
    from cursorkit.pipeline.topics_output import remove_unreferenced

    remove_unreferenced(open_output(out), None)
    assert not (out / "runs" / "killed-run").exists()
    assert (outside / "topics" / "t" / "a9" / "file").read_text() == "keep me"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: {k: v for k, v in d.items() if k != "summary"}, "summary"),
        (lambda d: d | {"summary": "../../etc/passwd"}, "not a path inside"),
        (lambda d: d | {"topics": []}, "topics"),
        (lambda d: d | {"topics": {"t": {"dir": "runs/x/topics/t/a1", "files": []}}}, "is not under"),
        (lambda d: d | {"version": 9}, "version 9"),
        (lambda d: "[" * 100_000, "nested too deeply"),
        (lambda d: "{not json", "not JSON"),
    ],
)
def test_bad_root_manifests_are_one_typed_line(
    many_topics: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, error: str
) -> None:
    out = copy_of(many_topics, tmp_path)
    doc = change(json.loads((out / "manifest.json").read_text()))
    (out / "manifest.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(CursorkitError, match=error):
        cluster.read_topic_figures(out)
    assert main(["inspect", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


def test_a_summary_without_figures_is_reported_not_a_key_error(many_topics: Path, tmp_path: Path) -> None:
    out = copy_of(many_topics, tmp_path)
    doc = json.loads((out / "manifest.json").read_text())
    (out / doc["summary"]).write_text(json.dumps({"topics": {}}))
    with pytest.raises(CorruptSnapshot, match="no figures for topic"):
        cluster.read_topic_figures(out)


# --- publishing ---------------------------------------------------------------------------------------


def test_publish_leaves_damaged_cursors_out_unless_forced(
    zk_server: Any, zk_client: Any, one_topic: Path, tmp_path: Path
) -> None:
    out = copy_of(one_topic, tmp_path)
    m = read_manifest(out)
    victim = sorted(m.subscriptions)[0]
    flip(cursor_log(out / m.subscriptions[victim]), -10)
    topic = f"persistent://t/ns{uuid.uuid4().hex[:6]}/orders"
    done = publish_cursors(out, f"zk://{zk_server.hosts}", one_topic=topic)
    path = cursor_znode_path(topic, victim)
    assert list(done.damaged) == [path] and done.failed == {} and path not in done.published
    assert len(done.published) == len(m.subscriptions) - 1
    assert zk_client.exists(path) is None  # a rewound cursor never reaches ZooKeeper
    forced = publish_cursors(out, f"zk://{zk_server.hosts}", one_topic=topic, publish_damaged=True)
    assert list(forced.forced) == [path] and path in forced.published
    assert zk_client.exists(path) is not None
