"""The many-topic rebuild reading its logs from and writing its output to an S3 server on 127.0.0.1.

moto's standalone server speaks the S3 HTTP API; pyarrow's S3 client talks to it on the driver and
in the Spark workers. The stores a run writes there equal, file for file and byte for byte, what the
same run writes to a local directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from cursorkit.errors import DamagedStore, InvalidArgument
from cursorkit.pipeline import cluster
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.generate_topics import generate_topics
from cursorkit.pipeline.load import fetch_topic, read_cursors, read_manifest
from cursorkit.pipeline.output import LEASE_FILE, ObjectOutput
from cursorkit.pipeline.rebuild import RebuildConfig
from cursorkit.pipeline.scan import filesystem
from object_store import s3_server

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CFG = RebuildConfig(min_index_count_per_bucket=150, max_indexes_per_segment=60)
STATE_ONLY = dataclasses.replace(CFG, report=False)
"""For every run but the first test's remote one, which writes the HTML report to the store (3-4 s of
matplotlib a run): the others check stores, commits, leases and reads."""


@pytest.fixture(scope="module")
def s3(spark: Any) -> Iterator[str]:
    """The server, its settings in this process and in the Spark workers; yields the bucket URI."""
    with s3_server() as settings:
        old = {k: os.environ.get(k) for k in settings}
        os.environ.update(settings)
        env = spark.sparkContext.environment
        env.update(settings)
        try:
            fs, _ = filesystem("s3://cursorkit")
            fs.create_dir("cursorkit")
            yield "s3://cursorkit"
        finally:
            for k, v in old.items():
                env.pop(k, None)
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.fixture(scope="module")
def logs(s3: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Six named topics' logs (two partitioned), locally and uploaded under ``<bucket>/logs``."""
    root = tmp_path_factory.mktemp("s3-logs")
    generate_topics(
        root,
        topics=6,
        messages=9_000,
        keys=40,
        delayed_fraction=0.3,
        subscriptions=3,
        seed=5,
        partitioned_fraction=0.34,
        partitions=2,
        rows_per_file=2_500,
    )
    fs, base = filesystem(s3)
    pafs.copy_files(
        str(root), f"{base}/logs", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs
    )
    return root, f"{s3}/logs"


def _entries(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each topic's files but ``summary.json`` (it names the run's staging directory)."""
    return {t: [f for f in e["files"] if f["path"] != "summary.json"] for t, e in doc["topics"].items()}


def _summary(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    doc.pop("out_dir")
    return doc


def test_object_store_in_and_out_equals_local(
    spark: Any, s3: str, logs: tuple[Path, str], tmp_path: Path
) -> None:
    local_logs, remote_logs = logs
    local = cluster.rebuild_topics(
        spark, local_logs / "messages", local_logs / "acks", tmp_path / "local", STATE_ONLY
    )
    out = f"{s3}/out"
    remote = cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, CFG)
    assert sorted(remote.topics) == sorted(local.topics) and any("-partition-" in t for t in remote.topics)
    output = ObjectOutput(out)
    doc = json.loads(output.read("manifest.json") or b"")
    local_doc = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert _entries(doc) == _entries(local_doc)  # every file: same path, size and SHA-256
    assert LEASE_FILE not in output.names()  # released
    # One topic back from the store, opened with the library.
    topic = max(remote.topics, key=lambda t: remote.topics[t]["messages"])
    fetched = fetch_topic(out, topic, tmp_path / "fetched")
    m = read_manifest(fetched)
    assert m.topic == topic
    local_dir = tmp_path / "local" / local_doc["topics"][topic]["dir"]
    assert _summary(fetched / "summary.json") == _summary(local_dir / "summary.json")
    cursors = read_cursors(fetched)
    assert set(cursors) == set(m.subscriptions)


def test_rerun_replaces_and_cleans(spark: Any, s3: str, logs: tuple[Path, str]) -> None:
    _, remote_logs = logs
    out = f"{s3}/again"
    first = cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, STATE_ONLY)
    output = ObjectOutput(out)
    output.write("runs/killed-run/topics/x/a1/junk", b"left by a killed run", sync=True)
    second = cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, STATE_ONLY)
    assert output.names("runs") == [second.run] and first.run != second.run
    doc = json.loads(output.read("manifest.json") or b"")
    assert doc["run"] == second.run


def test_a_held_lease_refuses_a_second_run(spark: Any, s3: str, logs: tuple[Path, str]) -> None:
    _, remote_logs = logs
    out = f"{s3}/leased"
    output = ObjectOutput(out, lease_seconds=60)
    output.write(LEASE_FILE, json.dumps({"run": "other", "host": "h", "expires": 4e9}).encode(), sync=True)
    with pytest.raises(InvalidArgument, match="holds its lease"):
        cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, STATE_ONLY)
    assert output.names() == [LEASE_FILE]  # nothing staged
    output.write(LEASE_FILE, json.dumps({"run": "other", "host": "h", "expires": 1.0}).encode(), sync=True)
    summary = cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, STATE_ONLY)
    assert summary.topics and LEASE_FILE not in output.names()


def test_fetch_checks_every_file_and_inspect_reads_the_store(
    spark: Any, s3: str, logs: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, remote_logs = logs
    out = f"{s3}/inspected"
    summary = cluster.rebuild_topics(spark, f"{remote_logs}/messages", f"{remote_logs}/acks", out, STATE_ONLY)
    assert main(["inspect", out]) == 0
    table = capsys.readouterr().out
    assert f"{len(summary.topics)} topics, damaged first, then riskiest" in table
    topic = sorted(summary.topics)[0]
    assert main(["inspect", out, "--topic", topic]) == 0
    text = capsys.readouterr().out
    assert topic in text and f"{out}/runs/" in text and tempfile.gettempdir() not in text
    # A flipped byte in a stored file: the download refuses it, inspect finds it unasked.
    output = ObjectOutput(out)
    entry = json.loads(output.read("manifest.json") or b"")["topics"][topic]
    victim = f"{entry['dir']}/{entry['files'][0]['path']}"
    data = bytearray(output.read(victim) or b"")
    data[len(data) // 2] ^= 0xFF
    output.write(victim, bytes(data), sync=True)
    with pytest.raises(DamagedStore, match="SHA-256"):
        fetch_topic(out, topic, tmp_path / "bad")
    assert main(["inspect", out]) == 1
    text = capsys.readouterr().out
    assert "DAMAGED" in text and topic in text and entry["files"][0]["path"] in text
    assert main(["inspect", out, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["damaged_topics"] == [topic]
