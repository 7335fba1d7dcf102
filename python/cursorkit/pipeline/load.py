"""Opening a rebuild's output with the library: its cursors and its shared delayed index."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store import CursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage
from cursorkit.delayed.properties import FileCursorProperties
from cursorkit.errors import CorruptSnapshot, InvalidArgument, UnsupportedVersion
from cursorkit.fsio import read_regular

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "Manifest",
    "fetch_topic",
    "list_topics",
    "open_delayed_index",
    "parse_manifest",
    "read_cursors",
    "read_manifest",
    "safe_relative",
    "topic_root",
]

MANIFEST_FILE = "manifest.json"
"""Written last into a rebuild's output: what it holds and where."""
MANIFEST_FORMAT = "cursorkit-rebuild"
"""The manifest's ``format`` value."""
MANIFEST_VERSION = 1
"""The manifest version this build writes and reads."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """``manifest.json`` of a rebuild's output."""

    root: Path
    topic: str
    now_ms: int
    subscriptions: dict[str, str]
    """Subscription name -> cursor store directory (relative to ``root``)."""
    delayed: dict[str, str] | None
    """``storage``, ``properties``, ``topic``, ``cursor`` of the shared delayed index, or None."""
    raw: dict[str, Any]

    def ledger_sizes(self) -> dict[int, int]:
        """Entries per ledger of the message log (from ``summary.json``)."""
        data = json.loads((self.root / "summary.json").read_text())
        return {int(k): int(v) for k, v in data["ledger_sizes"].items()}


TOPICS_FORMAT = "cursorkit-rebuild-topics"
"""The ``format`` of a many-topic output's root manifest (``cluster.TOPICS_MANIFEST_FORMAT``)."""


def list_topics(path: str | os.PathLike[str]) -> dict[str, str]:
    """Topic -> its directory (relative to ``path``) of a many-topic output; ``{}`` for a one-topic one."""
    root = Path(path)
    doc = _root_doc(root)
    if doc is None:
        return {}
    topics = _expect(root / MANIFEST_FILE, doc, "topics", dict)
    out: dict[str, str] = {}
    for name, entry in topics.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("dir"), str):
            raise CorruptSnapshot(f"{root / MANIFEST_FILE}: topics[{name!r}] has no dir string")
        out[name] = entry["dir"]
    return out


def _root_doc(root: Path) -> dict[str, Any] | None:
    """The root manifest of a many-topic output, or None when ``root`` holds a one-topic output."""
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise InvalidArgument(f"{root} is not a rebuild's output (no {MANIFEST_FILE})")
    try:
        doc = json.loads(read_regular(path, MAX_MANIFEST_BYTES))
    except (OSError, RecursionError, json.JSONDecodeError, UnicodeDecodeError):
        return None  # parse_manifest reports it
    if not isinstance(doc, dict) or doc.get("format") != TOPICS_FORMAT:
        return None
    version = doc.get("version")
    if isinstance(version, bool) or version != MANIFEST_VERSION:
        raise UnsupportedVersion(f"{path}: manifest version {version!r}; this build reads {MANIFEST_VERSION}")
    return doc


def topic_root(path: str | os.PathLike[str], topic: str | None) -> Path:
    """The directory holding ``topic``'s output: ``path`` itself for a one-topic output."""
    root = Path(path)
    topics = list_topics(root)
    if not topics:
        return root
    if topic is None:
        shown = ", ".join(sorted(topics)[:5]) + (", …" if len(topics) > 5 else "")
        raise InvalidArgument(f"{root} holds {len(topics)} topics ({shown}); name one with topic=")
    if topic not in topics:
        raise InvalidArgument(f"{root} has no topic {topic!r}")
    return inside(root, topics[topic], f"topics[{topic!r}]")


def read_manifest(path: str | os.PathLike[str], topic: str | None = None) -> Manifest:
    """The manifest of the rebuild output at ``path`` (``InvalidArgument`` if it is not one).

    For a many-topic output, ``topic`` names the topic (its directory has the one-topic layout).
    """
    root = topic_root(path, topic)
    if not (root / MANIFEST_FILE).is_file():
        raise InvalidArgument(f"{root} is not a rebuild's output (no {MANIFEST_FILE})")
    raw = parse_manifest(root / MANIFEST_FILE)
    return Manifest(
        root, raw["topic"], int(raw["now_ms"]), dict(raw["subscriptions"]), raw.get("delayed"), raw
    )


MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""Largest manifest read (one line per subscription: far below this)."""


def parse_manifest(path: Path) -> dict[str, Any]:
    """The manifest file at ``path``, checked for every key and type a reader uses.

    A manifest that is no regular file (a directory, a symlink loop), too large, too deeply nested
    or not JSON is an ``InvalidArgument``; one with wrong keys or types a ``CorruptSnapshot``.
    """
    try:
        raw = read_regular(path, MAX_MANIFEST_BYTES)
        doc = json.loads(raw)
    except OSError as e:
        raise InvalidArgument(f"{path}: cannot read the manifest ({e.strerror or e})") from e
    except RecursionError as e:
        raise InvalidArgument(f"{path}: JSON nested too deeply for a {MANIFEST_FORMAT} manifest") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"{path} is not JSON ({e}); expected a {MANIFEST_FORMAT} manifest") from e
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise InvalidArgument(
            f'{path} is not a {MANIFEST_FORMAT} manifest (no "format": {MANIFEST_FORMAT!r})'
        )
    version = doc.get("version")
    if isinstance(version, bool) or version != MANIFEST_VERSION:
        raise UnsupportedVersion(f"{path}: manifest version {version!r}; this build reads {MANIFEST_VERSION}")
    _expect(path, doc, "topic", str)
    _expect(path, doc, "now_ms", int)
    subs = _expect(path, doc, "subscriptions", dict)
    for name, rel in subs.items():
        if not isinstance(rel, str):
            raise CorruptSnapshot(f"{path}: subscriptions[{name!r}] must be a path string, got {rel!r}")
    delayed = doc.get("delayed")
    if delayed is not None:
        if not isinstance(delayed, dict):
            raise CorruptSnapshot(f'{path}: "delayed" must be an object or null')
        for key in ("storage", "properties", "topic", "cursor"):
            _expect(path, delayed, key, str, where="delayed.")
    elif "delayed" not in doc:
        raise CorruptSnapshot(f'{path}: "delayed" is missing')
    return doc


def safe_relative(rel: str, what: str) -> str:
    """``rel`` if it is a relative path without ``..`` (``CorruptSnapshot`` otherwise)."""
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts or "\x00" in rel:
        raise CorruptSnapshot(f"{what}: {rel!r} is not a path inside the output directory")
    return rel


def fetch_topic(out: str, topic: str, into: str | os.PathLike[str]) -> Path:
    """Downloads one topic of a many-topic output on an object store into the local ``into``.

    Only the files the root manifest lists are fetched, each checked against its size and SHA-256
    (``CorruptSnapshot`` on a mismatch); the result is a one-topic output directory that
    :func:`read_manifest`, :func:`read_cursors` and :func:`open_delayed_index` open.
    """
    import hashlib

    from cursorkit.pipeline.output import open_output

    output = open_output(out)
    raw = output.read(MANIFEST_FILE)
    if raw is None:
        raise InvalidArgument(f"{out} is not a rebuild's output (no {MANIFEST_FILE})")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise CorruptSnapshot(f"{out}/{MANIFEST_FILE} is not JSON ({e})") from e
    topics = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(topics, dict) or doc.get("format") != TOPICS_FORMAT:
        raise InvalidArgument(f"{out} is not a many-topic rebuild's output")
    entry = topics.get(topic)
    if not isinstance(entry, dict):
        raise InvalidArgument(f"{out} has no topic {topic!r}")
    base = safe_relative(_text(entry.get("dir")), f"topics[{topic!r}].dir")
    root = Path(into)
    for f in entry.get("files", []):
        if not isinstance(f, dict):
            raise CorruptSnapshot(f"{out}/{MANIFEST_FILE}: topics[{topic!r}].files holds {f!r}")
        rel = safe_relative(_text(f.get("path")), f"topics[{topic!r}].files")
        data = output.read(f"{base}/{rel}")
        if data is None or len(data) != f.get("bytes") or hashlib.sha256(data).hexdigest() != f.get("sha256"):
            raise CorruptSnapshot(
                f"{out}/{base}/{rel}: missing, or its size or SHA-256 is not the manifest's"
            )
        target = root.joinpath(*PurePosixPath(rel).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def inside(root: Path, rel: str, what: str) -> Path:
    """``root / rel`` for a path a manifest names, refused unless it stays inside ``root``.

    Absolute paths, ``..`` and symlinks that lead out are ``CorruptSnapshot``: a reader never
    follows a manifest to create, change or delete files elsewhere.
    """
    target = root.joinpath(*PurePosixPath(safe_relative(rel, what)).parts)
    try:
        if not target.resolve().is_relative_to(root.resolve()):
            raise CorruptSnapshot(f"{what}: {rel!r} leads outside the output directory (a symlink)")
    except (OSError, RuntimeError) as e:
        raise CorruptSnapshot(f"{what}: {rel!r} cannot be resolved ({e})") from e
    return target


def _expect(path: Path, doc: Mapping[str, Any], key: str, kind: type, *, where: str = "") -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CorruptSnapshot(f"{path}: {where}{key} must be a {kind.__name__}, got {value!r}")
    return value


def read_cursors(
    path: str | os.PathLike[str], ledger_sizes: Mapping[int, int] | None = None, topic: str | None = None
) -> dict[str, Cursor]:
    """Every subscription's cursor, recovered from its ``CursorStore`` (``topic``: see ``read_manifest``)."""
    m = read_manifest(path, topic)
    sizes = dict(ledger_sizes) if ledger_sizes is not None else m.ledger_sizes()
    out: dict[str, Cursor] = {}
    for name, rel in m.subscriptions.items():
        store = CursorStore.open(inside(m.root, rel, f"subscriptions[{name!r}]"))
        try:
            out[name] = store.recover(ledger_sizes=sizes)
        finally:
            store.close()
    return out


def open_delayed_index(
    path: str | os.PathLike[str], topic: str | None = None, **settings: Any
) -> BucketDelayedDeliveryTracker | None:
    """The topic's delayed index recovered from the output (``settings`` go to the tracker), or None.

    The storage and properties are opened in place: the tracker's later seals, merges and deletions
    write there, as a broker's would. ``topic``: see ``read_manifest``.
    """
    m = read_manifest(path, topic)
    if m.delayed is None:
        return None
    storage = FileBucketSnapshotStorage(inside(m.root, m.delayed["storage"], "delayed.storage"))
    props = FileCursorProperties(inside(m.root, m.delayed["properties"], "delayed.properties"))
    settings.setdefault("topic", m.delayed["topic"])
    settings.setdefault("cursor", m.delayed["cursor"])
    return BucketDelayedDeliveryTracker.recover(storage=storage, cursor_properties=props, **settings)
