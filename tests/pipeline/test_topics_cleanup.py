"""A many-topic output's clean-up removes only what a manifest that checks out whole proves unreferenced.

The output is staged as a run stages it (topic directories under ``runs/<run>/topics/``, a stale
attempt beside each live one, a killed run) and committed with the real writer, ``commit_run``; no
Spark is needed, since the clean-up runs before Spark starts. Every bit of the manifest is flipped:
each flip is refused, and refused flips remove nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from cursorkit.errors import CorruptSnapshot, CursorkitError, InvalidArgument
from cursorkit.pipeline.cursors import cursor_dir_name
from cursorkit.pipeline.manifest import MANIFEST_FILE, TopicsManifest, parse_topics_manifest, topics_seal
from cursorkit.pipeline.output import list_files, open_output
from cursorkit.pipeline.rebuild_config import RebuildConfig
from cursorkit.pipeline.results import TopicsSummary
from cursorkit.pipeline.topics_output import check_out, commit_run, remove_unreferenced

RUN = "20260101T000000-0123abcd"
KILLED = "20251231T235959-0123abce"
TOPICS = ("persistent://public/default/orders", "persistent://public/default/Clicks-partition-0")
STAGED = [f"runs/{RUN}/topics/{cursor_dir_name(t)}" for t in TOPICS]
# Attempt ids one bit apart ('2' is 0x32, '3' is 0x33): a flipped digit names the stale sibling.
LIVE, STALE = "a102", "a103"


def build(out: Path) -> None:
    """A committed output: each topic's live attempt and a stale sibling, and a killed run's staging."""
    summary = TopicsSummary(run=RUN, out_dir=str(out), master="local[1]")
    for i, topic in enumerate(TOPICS):
        for attempt in (LIVE, STALE):
            d = out / "runs" / RUN / "topics" / cursor_dir_name(topic) / attempt
            (d / "cursors" / "sub").mkdir(parents=True)
            (d / "manifest.json").write_text(json.dumps({"topic": topic, "attempt": attempt}))
            (d / "cursors" / "sub" / "cursor-000000000001.log").write_bytes(bytes(range(i, 64)))
        rel = f"runs/{RUN}/topics/{cursor_dir_name(topic)}/{LIVE}"
        summary.topics[topic] = {"messages": 10 + i, "dir": rel, "files": list_files(out / rel)}
    killed = out / "runs" / KILLED / "topics" / "x" / "a7"
    killed.mkdir(parents=True)
    (killed / "summary.json").write_text("{}")
    commit_run(open_output(out), RUN, summary, RebuildConfig(fsync=False, report=False))


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, None for a directory."""
    found: dict[str, bytes | None] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(d, name), root)] = None
        for name in files:
            p = os.path.join(d, name)
            found[os.path.relpath(p, root)] = Path(p).read_bytes()
    return found


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("topics-cleanup") / "out"
    build(out)
    return out


def copy_of(template: Path, where: Path) -> Path:
    target = where / "out"
    shutil.copytree(template, target, symlinks=True)
    return target


def flipped(raw: bytes, bit: int) -> bytes:
    data = bytearray(raw)
    data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


def cleaned(template: Path, where: Path) -> dict[str, bytes | None]:
    """The tree the clean-up leaves behind the intact manifest."""
    out = copy_of(template, where)
    remove_unreferenced(open_output(out), None)
    return tree(out)


def test_the_intact_manifest_removes_the_stale_attempts_and_the_killed_run(
    template: Path, tmp_path: Path
) -> None:
    after = cleaned(template, tmp_path)
    assert f"runs/{KILLED}" not in after
    for topic in TOPICS:
        staged = f"runs/{RUN}/topics/{cursor_dir_name(topic)}"
        assert f"{staged}/{LIVE}/manifest.json" in after and f"{staged}/{STALE}" not in after
    doc = json.loads((template / MANIFEST_FILE).read_text())
    assert list(doc)[-1] == "seal" and doc["seal"] == topics_seal(doc)


def test_the_issue_reproduction_a_format_one_bit_off_removes_nothing(template: Path, tmp_path: Path) -> None:
    """Issue 44 item 6: "cursorkit-rebuild-topics" one bit off used to name no run, and runs/ went."""
    out = copy_of(template, tmp_path)
    raw = (out / MANIFEST_FILE).read_bytes()
    at = raw.index(b'"cursorkit-rebuild-topics"') + len(b'"cursorkit-rebuild-topi')
    damaged = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]  # "...-topibs"
    assert json.loads(damaged)["format"] == "cursorkit-rebuild-topibs"  # still JSON
    (out / MANIFEST_FILE).write_bytes(damaged)
    before = tree(out)
    output = open_output(out)
    check_out(output)  # the output is still a rebuild's: the next run goes on to clean up
    with pytest.raises(InvalidArgument, match="does not check out.*nothing was removed"):
        remove_unreferenced(output, None)
    assert tree(out) == before


@pytest.mark.parametrize("where", ["key", "value"])
def test_every_bit_of_the_format_key_and_value_removes_nothing(
    template: Path, tmp_path: Path, where: str
) -> None:
    out = copy_of(template, tmp_path)
    raw = (out / MANIFEST_FILE).read_bytes()
    start = raw.index(b'"format"' if where == "key" else b'"cursorkit-rebuild-topics"') + 1
    end = raw.index(b'"', start)
    before = tree(out)
    for bit in range(start * 8, end * 8):
        (out / MANIFEST_FILE).write_bytes(flipped(raw, bit))
        with pytest.raises(InvalidArgument, match="nothing was removed"):
            remove_unreferenced(open_output(out), None)
    (out / MANIFEST_FILE).write_bytes(raw)
    assert tree(out) == before


def test_every_single_bit_flip_is_refused_or_reads_the_same(template: Path) -> None:
    """Exhaustive over the manifest's bits, as the clean-up reads it.

    The Hypothesis test below runs the whole clean-up on a sample of them.
    """
    raw = (template / MANIFEST_FILE).read_bytes()
    original = parse_topics_manifest(raw, "original")
    accepted = 0
    for bit in range(len(raw) * 8):
        try:
            got = parse_topics_manifest(flipped(raw, bit), "flipped")
        except CursorkitError:
            continue
        accepted += 1
        assert got == original, bit
    assert accepted == 0  # the seal: no flip of this manifest reads as a manifest at all


@settings(max_examples=150)
@given(data=st.data())
def test_after_any_bit_flip_clean_up_removes_nothing_or_exactly_what_it_did(
    template: Path, data: st.DataObject
) -> None:
    raw = (template / MANIFEST_FILE).read_bytes()
    bit = data.draw(st.integers(0, len(raw) * 8 - 1), label="bit")
    with tempfile.TemporaryDirectory() as tmp:
        out = copy_of(template, Path(tmp))
        (out / MANIFEST_FILE).write_bytes(flipped(raw, bit))
        before = tree(out)
        try:
            remove_unreferenced(open_output(out), None)
        except InvalidArgument:
            assert tree(out) == before  # refused: nothing removed
            return
        same: TopicsManifest = parse_topics_manifest(flipped(raw, bit), "flipped")
        assert same == parse_topics_manifest(raw, "original")
        (out / MANIFEST_FILE).write_bytes(raw)
        Path(tmp, "again").mkdir()
        assert tree(out) == cleaned(template, Path(tmp, "again"))


# --- what a manifest must be to be trusted --------------------------------------------------------------


def _rewrite(out: Path, change: dict[str, object], *, seal: bool) -> None:
    doc = json.loads((out / MANIFEST_FILE).read_text())
    doc.pop("seal")
    doc.update(change)
    if seal:
        doc["seal"] = topics_seal(doc)
    (out / MANIFEST_FILE).write_text(json.dumps(doc, indent=1))


def _topic_entry(out: Path, **change: object) -> dict[str, object]:
    doc = json.loads((out / MANIFEST_FILE).read_text())
    topics: dict[str, dict[str, object]] = doc["topics"]
    topic = TOPICS[0]
    return {"topics": topics | {topic: topics[topic] | change}}


def _renamed_topic(out: Path) -> dict[str, object]:
    doc = json.loads((out / MANIFEST_FILE).read_text())
    topics: dict[str, object] = doc["topics"]
    entry = topics.pop(TOPICS[0])
    return {"topics": topics | {TOPICS[0].replace("orders", "ordess"): entry}}


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda out: {"run": KILLED}, "is not under runs/|not the run's"),
        (lambda out: {"summary": f"runs/{RUN}/summary.jsoo"}, "not the run's"),
        (lambda out: {"report": f"runs/{RUN}/other.html"}, "not the run's"),
        (lambda out: {"extra": 1}, "unknown key 'extra'"),
        (
            lambda out: _topic_entry(out, dir=f"{STAGED[0]}/a999"),
            "missing",
        ),
        (
            lambda out: _topic_entry(out, dir=f"{STAGED[1]}/{LIVE}"),
            "staged",
        ),
        (lambda out: _topic_entry(out, dir=f"{STAGED[0]}/b1"), "staged"),
        (lambda out: _topic_entry(out, note="x"), "unknown key 'note'"),
        (_renamed_topic, "staged"),
    ],
)
@pytest.mark.parametrize("seal", [True, False], ids=["sealed", "unsealed-0.2"])
def test_a_manifest_is_trusted_only_whole(
    template: Path, tmp_path: Path, change: Callable[[Path], dict[str, object]], error: str, seal: bool
) -> None:
    out = copy_of(template, tmp_path)
    _rewrite(out, change(out), seal=seal)
    before = tree(out)
    with pytest.raises(InvalidArgument, match=error):
        remove_unreferenced(open_output(out), None)
    assert tree(out) == before


def test_a_manifest_written_before_the_seal_is_still_trusted(template: Path, tmp_path: Path) -> None:
    out = copy_of(template, tmp_path)
    _rewrite(out, {}, seal=False)  # the 0.2 layout: no seal
    remove_unreferenced(open_output(out), None)
    assert f"runs/{KILLED}" not in tree(out)


def test_a_changed_seal_or_content_is_refused_by_readers_too(template: Path, tmp_path: Path) -> None:
    out = copy_of(template, tmp_path)
    doc = json.loads((out / MANIFEST_FILE).read_text())
    doc["topics"][TOPICS[1]]["files"][0]["bytes"] += 1
    with pytest.raises(CorruptSnapshot, match="seal does not match"):
        parse_topics_manifest(json.dumps(doc).encode(), "m")


@pytest.mark.parametrize(
    ("manifest", "removed"),
    [
        (None, True),  # nothing ever committed: everything staged is a killed run's
        ({"format": "cursorkit-rebuild", "version": 1, "topic": "t", "now_ms": 0, "subscriptions": {}}, True),
        ({"format": "cursorkit-rebuild", "version": 1, "topic": "t"}, False),  # one-topic, but damaged
        (  # one-topic, naming a staged directory: no real one does
            {
                "format": "cursorkit-rebuild",
                "version": 1,
                "topic": "t",
                "now_ms": 0,
                "subscriptions": {"s": STAGED[0]},
            },
            False,
        ),
        ({"format": "cursorkit-rebuild-topic", "version": 1}, False),
        ({"version": 1}, False),
        ([], False),
        ("{not json", False),
        ("dir", False),  # manifest.json is a directory
    ],
)
def test_what_other_root_manifests_prove(
    template: Path, tmp_path: Path, manifest: object, removed: bool
) -> None:
    out = copy_of(template, tmp_path)
    (out / MANIFEST_FILE).unlink()
    if manifest == "dir":
        (out / MANIFEST_FILE).mkdir()
    elif isinstance(manifest, str):
        (out / MANIFEST_FILE).write_text(manifest)
    elif manifest is not None:
        doc = manifest if not isinstance(manifest, dict) else manifest | {"delayed": None}
        (out / MANIFEST_FILE).write_text(json.dumps(doc))
    before = tree(out)
    if removed:
        remove_unreferenced(open_output(out), None)
        assert not (out / "runs").exists() or not any((out / "runs").iterdir())
    else:
        with pytest.raises(InvalidArgument, match="nothing was removed"):
            remove_unreferenced(open_output(out), None)
        assert tree(out) == before
