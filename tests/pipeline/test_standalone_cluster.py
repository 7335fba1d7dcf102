"""The many-topic job through ``spark-submit`` on a real Spark standalone cluster on 127.0.0.1.

A master and a worker started by the test; the logs are read from and the output written to an S3
server on 127.0.0.1: the cluster recipe of docs/guides/spark-rebuild.md, with this venv's Python on
the worker.

The output equals, file for file, what the same job writes on the test session's ``local[2]``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

import cursorkit.pipeline.cli as cli
from cursorkit.pipeline import cluster
from cursorkit.pipeline.generate_topics import generate_topics
from cursorkit.pipeline.output import ObjectOutput
from cursorkit.pipeline.rebuild import RebuildConfig
from cursorkit.pipeline.scan import filesystem
from object_store import s3_server
from standalone import spark_submit, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OPTIONS = ["--min-index-count-per-bucket", "150", "--max-indexes-per-segment", "60"]
CFG = RebuildConfig(min_index_count_per_bucket=150, max_indexes_per_segment=60, report=False)
"""The local run compared with the cluster's: its stores, not its HTML report (the cluster run writes one)."""


@pytest.fixture(scope="module")
def s3_settings() -> Iterator[dict[str, str]]:
    with s3_server() as settings:
        yield settings


def _files(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {t: [f for f in e["files"] if f["path"] != "summary.json"] for t, e in doc["topics"].items()}


def test_spark_submit_on_a_standalone_cluster(
    spark: Any, s3_settings: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    generate_topics(
        logs,
        topics=5,
        messages=6_000,
        keys=30,
        delayed_fraction=0.3,
        subscriptions=3,
        seed=9,
        partitioned_fraction=0.4,
        partitions=2,
        rows_per_file=2_000,
    )
    for k, v in s3_settings.items():
        monkeypatch.setenv(k, v)
    fs, _ = filesystem("s3://cluster-run")
    fs.create_dir("cluster-run")
    pafs.copy_files(
        str(logs), "cluster-run/logs", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs
    )
    out = "s3://cluster-run/out"
    # The master's, worker's and executor's JVMs as the driver's (tests/conftest.py): C1 only, serial GC.
    jvm = os.environ.get("SPARK_SUBMIT_OPTS", "")
    daemons = {**s3_settings, "SPARK_DAEMON_JAVA_OPTS": jvm}
    with standalone_cluster(tmp_path / "cluster", cores=1, memory="1g", env=daemons) as master:
        done = spark_submit(
            master,
            [
                cli.__file__,
                "rebuild",
                "--messages",
                "s3://cluster-run/logs/messages",
                "--acks",
                "s3://cluster-run/logs/acks",
                "--out",
                out,
                *OPTIONS,
            ],
            conf={
                "spark.pyspark.python": sys.executable,
                "spark.sql.shuffle.partitions": "2",
                "spark.executor.memory": "768m",
                "spark.ui.enabled": "false",
                "spark.executor.extraJavaOptions": jvm,
            },
            env=s3_settings,
        )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "topics, riskiest first" in done.stdout
    remote = json.loads(ObjectOutput(out).read("manifest.json") or b"")
    summary = json.loads(ObjectOutput(out).read(remote["summary"]) or b"")
    assert summary["master"] == master
    local = cluster.rebuild_topics(spark, logs / "messages", logs / "acks", tmp_path / "local", CFG)
    local_doc = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert sorted(local.topics) == sorted(remote["topics"])
    assert _files(remote) == _files(local_doc)
