"""Paths a manifest names that no file system holds are damage of that part, never a bare ``OSError``.

A one-topic output is built with the library's own cursor store; its manifest then names a
subscription (or the delayed index) by a 5,000-character path, a path past ``PATH_MAX``, or text
with no bytes (a lone surrogate). ``inspect_path`` reports the part as a problem and inspects the
rest; ``read_cursors`` and ``open_delayed_index`` raise ``cursorkit.errors`` types.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cursorkit.ackstate import Cursor, CursorStore
from cursorkit.errors import CorruptSnapshot, CursorkitError, DamagedStore
from cursorkit.pipeline.cursors import cursor_dir_name
from cursorkit.pipeline.inspector import RebuildOutputSummary, inspect_path
from cursorkit.pipeline.load import fetch_topic, open_delayed_index, read_cursors
from cursorkit.pipeline.manifest import inside, safe_relative, topics_seal
from cursorkit.pipeline.output import list_files, open_output
from cursorkit.pipeline.rebuild_config import RebuildConfig
from cursorkit.pipeline.results import TopicsSummary
from cursorkit.pipeline.topics_output import commit_run

BAD_PATHS = {
    "a 5,000-character name": "cursors/" + "x" * 5_000,
    "a 256-byte name": "cursors/" + "é" * 128,
    "a path past PATH_MAX": "a/" * 3_000 + "b",
    "a lone surrogate": "cursors/\ud800",
}


def output(root: Path, subscriptions: dict[str, str], delayed: dict[str, str] | None = None) -> Path:
    """A one-topic output holding one healthy cursor store, ``cursors/good``."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "cursors" / "good").exists():
        with CursorStore.create(root / "cursors" / "good", name="good") as store:
            store.flush(Cursor(name="good"))
    manifest = {
        "format": "cursorkit-rebuild",
        "version": 1,
        "topic": "t",
        "now_ms": 0,
        "subscriptions": {"good": "cursors/good"} | subscriptions,
        "delayed": delayed,
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.mark.parametrize("rel", BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_inspect_reports_an_unusable_subscription_path_as_damage(tmp_path: Path, rel: str) -> None:
    out = output(tmp_path / "out", {"bad": rel})
    summary = inspect_path(out)
    assert isinstance(summary, RebuildOutputSummary)
    assert summary.damaged and sorted(summary.subscriptions) == ["good"]
    (problem,) = summary.problems
    assert problem.startswith("subscriptions['bad']:") and len(problem) < 300  # quoted short
    with pytest.raises(DamagedStore) as e:
        read_cursors(out, ledger_sizes={})
    assert set(e.value.damage) == {"bad"}


@pytest.mark.parametrize("rel", BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_an_unusable_delayed_index_path_is_typed(tmp_path: Path, rel: str) -> None:
    delayed = {"storage": rel, "properties": rel + "p", "topic": "t", "cursor": "c"}
    out = output(tmp_path / "out", {}, delayed)
    summary = inspect_path(out)
    assert isinstance(summary, RebuildOutputSummary) and summary.damaged
    assert [p.split(":")[0] for p in summary.problems] == ["delayed.storage", "delayed.properties"]
    with pytest.raises(CorruptSnapshot):
        open_delayed_index(out, clock=lambda: 0, verify=False)


def test_the_issue_reproduction_a_5000_character_subscription_path(tmp_path: Path) -> None:
    """Issue 44 item 7: inspect_path raised OSError (ENAMETOOLONG) here."""
    out = output(tmp_path / "out", {"s": "cursors/" + "s" * 5_000})
    summary = inspect_path(out)
    assert isinstance(summary, RebuildOutputSummary)
    assert "longer than 255 bytes" in summary.problems[0]


def test_a_subscription_directory_that_cannot_be_read_is_damage(tmp_path: Path) -> None:
    """Not only names: an OSError probing a part (here EACCES on its parent) is that part's damage."""
    out = output(tmp_path / "out", {"locked": "locked/s"})
    (out / "locked" / "s").mkdir(parents=True)
    (out / "locked").chmod(0)
    try:
        try:
            (out / "locked" / "s").is_dir()
        except PermissionError:
            pass
        else:
            pytest.skip("running as a user that permissions do not stop (root)")
        summary = inspect_path(out)
        assert isinstance(summary, RebuildOutputSummary)
        assert any(p.startswith("subscriptions['locked']") for p in summary.problems)
    finally:
        (out / "locked").chmod(0o755)


@pytest.mark.parametrize("rel", BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_path_checks_are_typed(tmp_path: Path, rel: str) -> None:
    with pytest.raises(CursorkitError):
        inside(tmp_path, rel, "x")
    if rel.count("/") < 100:  # each name is checked alone; the whole length needs its root
        with pytest.raises(CorruptSnapshot):
            safe_relative(rel, "x")
    assert safe_relative("cursors/" + "x" * 255, "x")  # the longest name a file system holds


def test_fetching_a_topic_whose_manifest_lists_an_unusable_path_is_damage(tmp_path: Path) -> None:
    """``fetch_topic`` turns the files a root manifest lists into local paths: each is checked first."""
    out = tmp_path / "out"
    topic = "persistent://public/default/orders"
    rel = f"runs/r1/topics/{cursor_dir_name(topic)}/a1"
    output(out / rel, {})
    summary = TopicsSummary(run="r1", out_dir=str(out), master="local[1]")
    summary.topics[topic] = {"messages": 1, "dir": rel, "files": list_files(out / rel)}
    commit_run(open_output(out), "r1", summary, RebuildConfig(fsync=False, report=False))
    doc = json.loads((out / "manifest.json").read_text())
    deep_path = "a/" * 3_000 + "b"
    deep = {"path": deep_path, "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    doc["topics"][topic]["files"].append(deep)
    doc["seal"] = topics_seal(doc)
    (out / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(DamagedStore) as e:
        fetch_topic(str(out), topic, tmp_path / "fetched")
    assert set(e.value.damage) == {deep_path}
    assert "longer than 4095 bytes" in e.value.damage[deep_path]
