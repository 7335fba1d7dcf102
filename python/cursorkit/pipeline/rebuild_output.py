"""A one-topic rebuild's output directory: its manifest, stats and summary, and how it is published.

The finished directory is renamed over ``--out`` (an older output moved aside, then removed).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cursorkit.ackstate import Cursor
from cursorkit.errors import InvalidArgument
from cursorkit.fsio import atomic_write, fsync_dir
from cursorkit.pipeline.cursors import cursor_dir_name
from cursorkit.pipeline.delayed_buckets import SHARED_CURSOR
from cursorkit.pipeline.load import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION
from cursorkit.pipeline.output import list_files
from cursorkit.pipeline.results import RebuildSummary

if TYPE_CHECKING:
    from cursorkit.pipeline.rebuild_config import RebuildConfig

__all__ = ["check_out", "replace_output", "topic_manifest", "write_summary"]


def check_out(out: Path) -> None:
    """Refuses an ``out`` that exists and is not a rebuild's output (nothing else is ever replaced)."""
    if out.exists():
        if not out.is_dir():
            raise InvalidArgument(f"--out {out} exists and is not a directory")
        if any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
            raise InvalidArgument(f"--out {out} is a non-empty directory that is not a rebuild's output")


def replace_output(tmp: Path, out: Path) -> None:
    """Renames the finished ``tmp`` over ``out`` (an older output is moved aside, then removed)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        if old is not None:  # put the previous output back
            old.rename(out)
        raise
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def topic_manifest(
    cfg: RebuildConfig, now: int, cursors: Mapping[str, Cursor], delayed: bool
) -> dict[str, Any]:
    """The output's ``manifest.json`` without its file list (``write_summary`` adds it)."""
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "topic": cfg.topic,
        "now_ms": now,
        "delayed": {
            "storage": "delayed/buckets",
            "properties": "delayed/cursor.properties",
            "topic": cfg.topic,
            "cursor": SHARED_CURSOR,
        }
        if delayed
        else None,
        "subscriptions": {name: f"cursors/{cursor_dir_name(name)}" for name in cursors},
        "segments": {
            "min_index_count_per_bucket": cfg.min_index_count_per_bucket,
            "max_time_step_per_segment_ms": cfg.max_time_step_per_segment_ms,
            "max_indexes_per_segment": cfg.max_indexes_per_segment,
        },
    }
    return manifest


def write_summary(tmp: Path, summary: RebuildSummary, manifest: dict[str, Any], cfg: RebuildConfig) -> None:
    """The stats tables, ``summary.json``, the report if asked for, and last the manifest."""
    stats = tmp / "stats"
    stats.mkdir(exist_ok=True)
    if summary.cursors:
        pq.write_table(pa.Table.from_pylist([asdict(c) for c in summary.cursors]), stats / "cursors.parquet")
    if summary.buckets:
        pq.write_table(pa.Table.from_pylist([asdict(b) for b in summary.buckets]), stats / "buckets.parquet")
    atomic_write(tmp / "summary.json", json.dumps(summary.to_json(), indent=1).encode(), sync=cfg.fsync)
    if cfg.report:
        from cursorkit.pipeline.report import write_report

        write_report(summary, tmp / "report.html")
    # Last: the files the output vouches for (every file but the manifest), then the manifest itself.
    manifest = manifest | {"files": list_files(tmp)}
    atomic_write(tmp / MANIFEST_FILE, json.dumps(manifest, indent=1).encode(), sync=cfg.fsync)
    fsync_dir(tmp)
