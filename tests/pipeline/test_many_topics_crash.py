"""Many-topic runs killed (SIGKILL) at each point of the commit protocol, and from outside mid-job.

Each kill hits a copy of one committed output (built once). After every kill the output committed
before it is still readable, every file it lists matching its size and SHA-256 (or, killed after the
commit, the new one is); the next run succeeds and removes everything the killed run staged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cursorkit.pipeline import cluster
from cursorkit.pipeline.generate_topics import generate_topics
from cursorkit.pipeline.load import list_topics, read_cursors
from cursorkit.pipeline.rebuild import RebuildConfig

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = Path(__file__).parents[1] / "support" / "topics_crash_child.py"
CFG = RebuildConfig(min_index_count_per_bucket=150, max_indexes_per_segment=60)
RERUN = dataclasses.replace(CFG, report=False)
"""The run after each kill, checked for its clean-up and commit: the committed output and the killed
runs write the HTML report (3-4 s of matplotlib a run), so the reruns leave it out."""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash-logs")
    generate_topics(
        root,
        topics=4,
        messages=5_000,
        keys=30,
        delayed_fraction=0.3,
        subscriptions=2,
        seed=3,
        partitioned_fraction=0.25,
        partitions=2,
    )
    return root


@pytest.fixture(scope="module")
def committed(spark: Any, logs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One committed output of ``logs`` and its run, built once: each test kills a run over a copy of it."""
    out = tmp_path_factory.mktemp("committed") / "out"
    return out, cluster.rebuild_topics(spark, logs / "messages", logs / "acks", out, CFG).run


def _verified(out: Path) -> dict[str, Any]:
    """The committed manifest, after checking every file it lists and opening every topic's cursors."""
    doc: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    for entry in doc["topics"].values():
        for f in entry["files"]:
            data = (out / entry["dir"] / f["path"]).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"])
    for topic in list_topics(out):
        read_cursors(out, topic=topic)
    return doc


def _child(logs: Path, out: Path, point: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(logs / "messages"), str(logs / "acks"), str(out), point],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _reap(proc: subprocess.Popen[str]) -> int:
    code = proc.wait(300)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # its JVM, if still there
    return code


@pytest.mark.parametrize("point", ["staged", "summary", "manifest", "outside"])
def test_killed_run_then_rerun(
    spark: Any, logs: Path, committed: tuple[Path, str], tmp_path: Path, point: str
) -> None:
    out = tmp_path / "out"
    shutil.copytree(committed[0], out)
    first_run = committed[1]
    before = _verified(out)
    if point == "outside":  # SIGKILL to the whole process group once topics are being staged
        proc = _child(logs, out, "none")
        deadline = time.monotonic() + 240
        while not any(p.name != first_run for p in (out / "runs").iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, "the child never staged"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        _reap(proc)
    else:
        proc = _child(logs, out, point)
        assert _reap(proc) == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    runs = {p.name for p in (out / "runs").iterdir()}
    assert len(runs) == 2 and first_run in runs  # the killed run left its staging behind
    after = _verified(out)
    if point == "manifest":
        assert after["run"] != first_run  # committed before the kill: the new output is live
    else:
        assert after == before  # the earlier output is untouched
    again = cluster.rebuild_topics(spark, logs / "messages", logs / "acks", out, RERUN)
    assert {p.name for p in (out / "runs").iterdir()} == {again.run}
    assert _verified(out)["run"] == again.run
