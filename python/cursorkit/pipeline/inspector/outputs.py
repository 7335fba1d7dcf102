"""Inspecting a rebuild output: its manifest, delayed index and every cursor store."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from cursorkit.ackstate.store import META_FILE
from cursorkit.errors import (
    CorruptSnapshot,
)
from cursorkit.pipeline.inspector.buckets import inspect_bucket_store
from cursorkit.pipeline.inspector.cursors import inspect_cursor_store
from cursorkit.pipeline.inspector.summaries import (
    CURSOR_LOG,
    BucketStoreSummary,
    CursorStoreSummary,
    RebuildOutputSummary,
)
from cursorkit.pipeline.load import MANIFEST_FILE, inside, parse_manifest

# -- rebuild outputs -------------------------------------------------------------------------------------


def inspect_rebuild(root: Path, *, verify: bool, sample: int) -> RebuildOutputSummary:
    """A rebuild output: its manifest, its delayed index and every subscription's cursor store."""
    manifest = parse_manifest(root / MANIFEST_FILE)
    problems: list[str] = []
    delayed = manifest["delayed"]
    delayed_summary: BucketStoreSummary | None = None
    delayed_topic = delayed_cursor = None
    if delayed is not None:
        delayed_topic, delayed_cursor = delayed["topic"], delayed["cursor"]
        storage = _part(root, delayed["storage"], "delayed.storage", problems)
        props = _part(root, delayed["properties"], "delayed.properties", problems)
        if props is not None and not props.is_file():
            problems.append(f"delayed.properties: {props} is missing")
            props = None
        if storage is not None and not storage.is_dir():
            problems.append(f"delayed.storage: {storage} is missing")
            storage = None
        if storage is not None:
            delayed_summary = inspect_bucket_store(storage, props, verify=verify)
            for b in delayed_summary.buckets:
                for what, got, want in (
                    ("topic", b.topic, delayed_topic),
                    ("cursor", b.cursor, delayed_cursor),
                ):
                    if got is not None and got != want:
                        problems.append(
                            f"bucket snapshot {b.bucket_id} belongs to {what} {got!r}, not {want!r}"
                        )
    subs: dict[str, CursorStoreSummary] = {}
    for name, rel in manifest["subscriptions"].items():
        where = _part(root, rel, f"subscriptions[{name!r}]", problems)
        if where is None:
            continue
        if not where.is_dir():
            problems.append(f"subscriptions[{name!r}]: {where} is missing")
            continue
        if not any(p.name == META_FILE or fnmatch.fnmatch(p.name, CURSOR_LOG) for p in where.iterdir()):
            problems.append(f"subscriptions[{name!r}]: {where} is not a cursor store")
            continue
        subs[name] = inspect_cursor_store(where, sample=sample)
    return RebuildOutputSummary(
        path=str(root),
        topic=manifest["topic"],
        now_ms=manifest["now_ms"],
        delayed_topic=delayed_topic,
        delayed_cursor=delayed_cursor,
        delayed=delayed_summary,
        subscriptions=subs,
        problems=tuple(problems),
    )


def _part(root: Path, rel: str, what: str, problems: list[str]) -> Path | None:
    """A path the manifest names, if it stays inside the output directory (else a problem)."""
    try:
        return inside(root, rel, what)
    except CorruptSnapshot as e:
        problems.append(str(e))
        return None
