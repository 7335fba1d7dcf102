"""``cursorkit inspect PATH``: what a bucket snapshot store, a cursor store or a rebuild output holds.

The kind of ``PATH`` is told from its content: ``manifest.json`` (a ``cursorkit rebuild`` output),
``store.meta`` / ``cursor-*.log`` (a :class:`~cursorkit.ackstate.store.CursorStore`) or
``next-bucket-id`` / ``bucket-*.snap`` (a :class:`~cursorkit.delayed.storage.file.FileBucketSnapshotStorage`).
:func:`inspect_path` reads it through the library's own stores, so every figure is what recovery would
see, and damage is reported per part (a corrupt bucket, an unrecoverable cursor store) instead of
raised, so the rest is still summarised. :func:`render` turns a summary into rich tables.

Nothing is modified, with two exceptions the stores make on open: the bucket store drops temp files an
interrupted write left (as its ``start`` always does), and so does ``FileCursorProperties`` for its
own file. ``CursorStore.open`` would also delete superseded log generations and a leftover metadata
temp file, so a cursor store holding anything beyond ``store.meta`` and one log is opened as a copy.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Literal

from cursorkit.ackstate.store.file.log import META_FILE
from cursorkit.delayed.storage.file import NEXT_ID_FILE
from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.pipeline.inspector.buckets import _orphans_and_missing, inspect_bucket_store  # noqa: F401 - where tests find it
from cursorkit.pipeline.inspector.cursors import inspect_cursor_store
from cursorkit.pipeline.inspector.outputs import inspect_rebuild
from cursorkit.pipeline.inspector.render import render
from cursorkit.pipeline.inspector.summaries import (
    BUCKET_FILE,
    CURSOR_LOG,
    PROPERTIES_FILE,
    BatchSummary,
    BucketStoreSummary,
    BucketSummary,
    CursorStoreSummary,
    InspectSummary,
    PropertiesSummary,
    PropertyRef,
    RangeSummary,
    RebuildOutputSummary,
    SegmentSummary,
)
from cursorkit.pipeline.load import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "BatchSummary",
    "BucketStoreSummary",
    "BucketSummary",
    "CursorStoreSummary",
    "InspectSummary",
    "PropertiesSummary",
    "PropertyRef",
    "RangeSummary",
    "RebuildOutputSummary",
    "SegmentSummary",
    "inspect_path",
    "render",
]


# -- detection -----------------------------------------------------------------------------------------


def _kind_of(root: Path) -> Literal["rebuild", "cursor", "bucket"]:
    """Which kind of directory ``root`` is, from the files it holds."""
    try:
        if not root.is_dir():
            what = "does not exist" if not root.exists() else "is not a directory"
            raise InvalidArgument(
                f"{root} {what}; expected a bucket store, a cursor store or a rebuild output"
            )
        names = [p.name for p in root.iterdir()]
    except OSError as e:
        raise InvalidArgument(f"{root}: cannot read the directory ({e.strerror or e})") from e
    kinds: list[Literal["rebuild", "cursor", "bucket"]] = []
    if MANIFEST_FILE in names:
        kinds.append("rebuild")
    if META_FILE in names or fnmatch.filter(names, CURSOR_LOG):
        kinds.append("cursor")
    if NEXT_ID_FILE in names or fnmatch.filter(names, BUCKET_FILE):
        kinds.append("bucket")
    if len(kinds) == 1:
        return kinds[0]
    expected = (
        f"a bucket snapshot store ({NEXT_ID_FILE} or {BUCKET_FILE}), a cursor store "
        f"({META_FILE} or {CURSOR_LOG}) or a rebuild output ({MANIFEST_FILE})"
    )
    if not kinds:
        raise InvalidArgument(f"{root} is not a cursorkit directory; expected {expected}")
    raise InvalidArgument(
        f"{root} holds the files of more than one kind ({', '.join(kinds)}); expected {expected}"
    )


def inspect_path(
    path: str | os.PathLike[str],
    *,
    properties: str | os.PathLike[str] | None = None,
    verify: bool = True,
    sample: int = 20,
) -> InspectSummary:
    """Summarises a bucket store, a cursor store or a rebuild output directory, reading it only.

    Args:
        path: The directory; its kind is told from its content.
        properties: A ``FileCursorProperties`` file to check a bucket store against. Without it,
            ``cursor.properties`` next to the store (or inside it) is used when there is one; a
            rebuild output uses the file its manifest names.
        verify: Also read back every segment record of every bucket (checksum, decode, counts and
            deliver-at bounds against the metadata); without it only headers and metadata are read.
        sample: How many acknowledged ranges and partial batches of a cursor to list.

    Raises:
        InvalidArgument: ``path`` is none of the three kinds (the message says what was expected), or
            ``properties`` is given for another kind or does not exist.
        InvalidInputType: an argument of the wrong type.
        UnsupportedVersion: a manifest of a version this build does not read.
        CorruptSnapshot: a manifest that is not of the expected shape.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputType(f"path must be a str or path, got {type(path).__name__}")
    if properties is not None and not isinstance(properties, str | os.PathLike):
        raise InvalidInputType(f"properties must be a str or path, got {type(properties).__name__}")
    if not isinstance(verify, bool):
        raise InvalidInputType(f"verify must be a bool, got {type(verify).__name__}")
    if isinstance(sample, bool) or not isinstance(sample, int):
        raise InvalidInputType(f"sample must be an int, got {type(sample).__name__}")
    if sample < 0:
        raise InvalidArgument(f"sample must be >= 0, got {sample}")
    root = Path(path)
    kind = _kind_of(root)
    if properties is not None and kind != "bucket":
        raise InvalidArgument(f"properties applies to a bucket store only; {root} is a {kind} directory")
    if kind == "rebuild":
        return inspect_rebuild(root, verify=verify, sample=sample)
    if kind == "cursor":
        return inspect_cursor_store(root, sample=sample)
    props: Path | None
    if properties is not None:
        props = Path(properties)
        if not props.is_file():
            raise InvalidArgument(f"properties file {props} does not exist")
    else:
        props = _find_properties(root)
    return inspect_bucket_store(root, props, verify=verify)


def _find_properties(root: Path) -> Path | None:
    for candidate in (root.parent / PROPERTIES_FILE, root / PROPERTIES_FILE):
        if candidate.is_file():
            return candidate
    return None
