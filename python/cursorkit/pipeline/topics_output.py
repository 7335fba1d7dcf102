"""A many-topic output's commit: the run's summary and report, then the root manifest that names it.

A run stages its topics under ``runs/``; the root ``manifest.json`` written last, sealed with the
SHA-256 of its content, is the commit. What no committed manifest names (killed runs, other
attempts) is removed, and only that: a manifest that does not check out whole removes nothing.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from cursorkit.errors import CorruptSnapshot, CursorkitError, InvalidArgument
from cursorkit.pipeline.manifest import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    SEAL_KEY,
    TOPICS_FORMAT,
    TopicsManifest,
    check_manifest,
    load_json,
    parse_topics_manifest,
    topics_seal,
)
from cursorkit.pipeline.output import LEASE_FILE, RUNS_DIR, Output
from cursorkit.pipeline.rebuild_config import RebuildConfig
from cursorkit.pipeline.results import TopicsSummary
from cursorkit.pipeline.topic_risk import risk_order

__all__ = ["TOPICS_MANIFEST_FORMAT", "check_out", "commit_run", "committed", "remove_unreferenced"]

TOPICS_MANIFEST_FORMAT = TOPICS_FORMAT
"""The ``format`` of a many-topic output's root manifest."""
TOPICS_MANIFEST_VERSION = 1


def check_out(out: Output) -> None:
    """Refuses an ``out`` that is a file, or a non-empty directory that is not a rebuild's output."""
    kind = out.kind()
    if kind == "file":
        raise InvalidArgument(f"--out {out.uri} exists and is not a directory")
    if kind == "dir":
        others = [n for n in out.names() if n not in (RUNS_DIR, LEASE_FILE)]
        if others and MANIFEST_FILE not in others:
            raise InvalidArgument(f"--out {out.uri} is a non-empty directory that is not a rebuild's output")


def commit_run(out: Output, run: str, summary: TopicsSummary, cfg: RebuildConfig) -> None:
    """Writes the run's summary and report, then the root manifest: the commit point."""
    doc = summary.to_json()
    out.write(f"{RUNS_DIR}/{run}/summary.json", json.dumps(doc, indent=1).encode(), sync=cfg.fsync)
    report = None
    if cfg.report:
        from cursorkit.pipeline.cluster_report import detail_reader, render_cluster_html

        dirs = {t: str(f["dir"]) for t, f in summary.topics.items()}
        html = render_cluster_html(doc, risk_order(summary.topics), detail_reader(out.read, dirs))
        report = f"{RUNS_DIR}/{run}/report.html"
        out.write(report, html.encode(), sync=cfg.fsync)
    manifest = {
        "format": TOPICS_MANIFEST_FORMAT,
        "version": TOPICS_MANIFEST_VERSION,
        "run": run,
        "summary": f"{RUNS_DIR}/{run}/summary.json",
        "report": report,
        "topics": {t: {"dir": f["dir"], "files": f["files"]} for t, f in sorted(summary.topics.items())},
    }
    manifest[SEAL_KEY] = topics_seal(manifest)
    out.write(MANIFEST_FILE, json.dumps(manifest, indent=1).encode(), sync=cfg.fsync)


def remove_unreferenced(out: Output, keep: TopicsSummary | None) -> None:
    """Removes staged directories no manifest names: other runs, and other attempts of this one.

    Only entries listed under ``runs/`` are removed, and only those a valid manifest proves
    unreferenced: ``keep`` (the run just committed), else the committed manifest, checked whole
    (:func:`committed`). One that does not check out removes nothing and stops the run, since what
    it names cannot be told apart from what is safe to delete.
    """
    if RUNS_DIR not in out.names():
        return
    if keep is not None:
        run, live = keep.run, {str(t["dir"]) for t in keep.topics.values()}
    else:
        run, live = committed(out)
    runs = out.names(RUNS_DIR)
    for other in runs:
        if other != run:
            out.remove(f"{RUNS_DIR}/{other}")
    if run not in runs:
        return
    topics = f"{RUNS_DIR}/{run}/topics"
    for topic_dir in out.names(topics):
        for attempt in out.names(f"{topics}/{topic_dir}"):
            if f"{topics}/{topic_dir}/{attempt}" not in live:
                out.remove(f"{topics}/{topic_dir}/{attempt}")


def committed(out: Output) -> tuple[str, set[str]]:
    """The run and topic directories the committed manifest names (``""`` and none: nothing committed).

    No ``manifest.json`` means no run ever committed, so everything staged is a killed run's; a
    one-topic manifest names nothing under ``runs/``. Any other manifest must check out whole
    (:func:`~cursorkit.pipeline.manifest.parse_topics_manifest`: exact format and keys, the
    layout's paths, its seal) and every directory it names must be there; otherwise
    ``InvalidArgument``, saying that nothing was removed.
    """
    where = f"{out.uri}/{MANIFEST_FILE}"
    try:
        if MANIFEST_FILE not in out.names():
            return "", set()
        raw = out.read(MANIFEST_FILE)
        if raw is None:
            raise CorruptSnapshot(f"{where} is not a regular file")
        doc = load_json(raw, where, f"a {TOPICS_FORMAT} manifest")
        if isinstance(doc, dict) and doc.get("format") == MANIFEST_FORMAT:
            _names_nothing_staged(check_manifest(doc, where), where)  # a one-topic output
            return "", set()
        manifest = parse_topics_manifest(raw, where)
        _check_staged(out, manifest, where)
    except (CursorkitError, OSError) as e:
        raise InvalidArgument(
            f"--out {out.uri}: its {MANIFEST_FILE} does not check out ({e}); nothing was removed. "
            f"Rebuild into another --out, or move the damaged output aside"
        ) from None
    return manifest.run, {e.dir for e in manifest.topics.values()}


def _check_staged(out: Output, manifest: TopicsManifest, where: str) -> None:
    """``CorruptSnapshot`` unless the run and every topic directory the manifest names are on disk."""
    if manifest.run not in out.names(RUNS_DIR):
        raise CorruptSnapshot(f"{where} names run {manifest.run!r}, which is not under {RUNS_DIR}/")
    listed: dict[str, list[str]] = {}
    for topic, entry in sorted(manifest.topics.items()):
        parent, _, attempt = entry.dir.rpartition("/")
        if parent not in listed:
            listed[parent] = out.names(parent)
        if attempt not in listed[parent]:
            raise CorruptSnapshot(f"{where} names {entry.dir} for topic {topic!r}, which is missing")


def _names_nothing_staged(doc: dict[str, Any], where: str) -> None:
    """``CorruptSnapshot`` if a one-topic manifest names a path under ``runs/`` (none ever does)."""
    delayed = doc["delayed"] or {}
    paths = [*doc["subscriptions"].values(), delayed.get("storage"), delayed.get("properties")]
    paths += [f.get("path") for f in doc.get("files", []) if isinstance(f, dict)]
    staged = [p for p in paths if isinstance(p, str) and PurePosixPath(p).parts[:1] == (RUNS_DIR,)]
    if staged:
        raise CorruptSnapshot(f"{where}: a one-topic manifest naming {staged[0]!r}, under {RUNS_DIR}/")
