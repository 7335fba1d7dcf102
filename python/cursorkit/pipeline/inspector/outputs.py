"""Inspecting a rebuild output: its manifest, delayed index and every cursor store."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path

from cursorkit.ackstate.store.file.log import META_FILE
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
from cursorkit.pipeline.manifest import (
    MANIFEST_FILE,
    FileEntry,
    check_files,
    inside,
    local_digest,
    parse_files,
    parse_manifest,
)

# -- rebuild outputs -------------------------------------------------------------------------------------


def inspect_rebuild(
    root: Path,
    *,
    verify: bool,
    sample: int,
    files: tuple[FileEntry, ...] | None = None,
    topic: str | None = None,
) -> RebuildOutputSummary:
    """A rebuild output: its manifest, its files, its delayed index and every subscription's cursor store.

    ``files`` (a many-topic root manifest's list for this topic; default: the output's own list) are
    checked for size and SHA-256; ``topic`` is the topic the root manifest says this directory holds.
    """
    manifest = parse_manifest(root / MANIFEST_FILE)
    problems: list[str] = []
    if topic is not None and manifest["topic"] != topic:
        problems.append(f"{MANIFEST_FILE}: holds topic {manifest['topic']!r}, not {topic!r}")
    if files is None and "files" in manifest:
        files = parse_files(manifest["files"], f"{root / MANIFEST_FILE}: files")
    if files is not None:
        bad = check_files(files, local_digest(root))
        problems.extend(f"{path}: {why}" for path, why in bad.items())
    delayed = manifest["delayed"]
    delayed_summary: BucketStoreSummary | None = None
    delayed_topic = delayed_cursor = None
    if delayed is not None:
        delayed_topic, delayed_cursor = delayed["topic"], delayed["cursor"]
        storage = _part(root, delayed["storage"], "delayed.storage", problems)
        props = _part(root, delayed["properties"], "delayed.properties", problems)
        if props is not None and not _probe(props, Path.is_file, "delayed.properties", problems):
            props = None
        if storage is not None and not _probe(storage, Path.is_dir, "delayed.storage", problems):
            storage = None
        if storage is not None:
            try:
                delayed_summary = inspect_bucket_store(storage, props, verify=verify)
            except OSError as e:
                problems.append(f"delayed.storage: {storage} cannot be read ({e.strerror or e})")
        if delayed_summary is not None:
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
        what = f"subscriptions[{name!r}]"
        where = _part(root, rel, what, problems)
        if where is None or not _probe(where, Path.is_dir, what, problems):
            continue
        try:
            if not any(p.name == META_FILE or fnmatch.fnmatch(p.name, CURSOR_LOG) for p in where.iterdir()):
                problems.append(f"{what}: {where} is not a cursor store")
                continue
            subs[name] = inspect_cursor_store(where, sample=sample)
        except OSError as e:
            problems.append(f"{what}: {where} cannot be read ({e.strerror or e})")
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


def _probe(where: Path, test: Callable[[Path], bool], what: str, problems: list[str]) -> bool:
    """``test(where)`` (``Path.is_dir``, ``Path.is_file``); False with a problem when it fails or errs."""
    try:
        if test(where):
            return True
        problems.append(f"{what}: {where} is missing")
    except OSError as e:  # a permission, a path the OS refuses: damage of this part only
        problems.append(f"{what}: {where} cannot be read ({e.strerror or e})")
    return False


def _part(root: Path, rel: str, what: str, problems: list[str]) -> Path | None:
    """A path the manifest names, if it stays inside the output directory (else a problem)."""
    try:
        return inside(root, rel, what)
    except CorruptSnapshot as e:
        problems.append(str(e))
        return None
