"""The manifests of a rebuild's output: their formats, their checks, and the files they vouch for.

A one-topic output has one ``manifest.json`` (``cursorkit-rebuild``); a many-topic output has a root
``manifest.json`` (``cursorkit-rebuild-topics``) naming each topic's directory, which has the
one-topic layout. Both list the files they vouch for with size and SHA-256.

Everything read back from a manifest is checked before use: values used as paths must be relative
paths without ``..`` (or single names, like a run id), and a path is joined to its root only through
:func:`inside`, which refuses symlinks that lead out. A reader or a later rebuild never follows a
manifest to read, write or delete a file outside the output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cursorkit.errors import CorruptSnapshot, CursorkitError, InvalidArgument, UnsupportedVersion
from cursorkit.fsio import read_regular

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "MAX_MANIFEST_BYTES",
    "RUNS_DIR",
    "SEAL_KEY",
    "TOPICS_FORMAT",
    "TOPICS_KEYS",
    "FileEntry",
    "TopicEntry",
    "TopicsManifest",
    "check_files",
    "check_manifest",
    "inside",
    "is_topics_doc",
    "load_json",
    "local_digest",
    "parse_files",
    "parse_manifest",
    "parse_topics_manifest",
    "read_topics_manifest",
    "safe_name",
    "safe_relative",
    "topics_seal",
]

MANIFEST_FILE = "manifest.json"
"""Written last into a rebuild's output: what it holds and where."""
MANIFEST_FORMAT = "cursorkit-rebuild"
"""A one-topic manifest's ``format`` value."""
TOPICS_FORMAT = "cursorkit-rebuild-topics"
"""A many-topic output's root manifest ``format`` value."""
MANIFEST_VERSION = 1
"""The manifest version this build writes and reads (both kinds)."""
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""Largest manifest read (one entry per file: far below this)."""
RUNS_DIR = "runs"
"""Where a many-topic output's runs stage their topics: ``runs/<run>/topics/<topic>/<attempt>``."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_NAME = 255
"""Longest path component, in bytes (``NAME_MAX``): a longer one is no name a file system holds."""
_MAX_PATH = 4095
"""Longest path handed to the OS, in bytes (``PATH_MAX`` less its NUL): a longer one is ``ENAMETOOLONG``."""


def safe_relative(rel: str, what: str) -> str:
    """``rel`` if it is a relative path without ``..`` whose names a file system can hold.

    ``CorruptSnapshot`` otherwise: an absolute path, ``..``, a NUL or backslash, a component over
    255 bytes, or text that has no bytes on disk (a lone surrogate).
    """
    if not isinstance(rel, str):
        raise CorruptSnapshot(f"{what}: {rel!r} is not a path inside the output directory")
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts or "\x00" in rel or "\\" in rel:
        raise CorruptSnapshot(f"{what}: {rel!r} is not a path inside the output directory")
    try:
        longest = max(len(os.fsencode(part)) for part in pure.parts)
    except UnicodeEncodeError:
        raise CorruptSnapshot(f"{what}: {_short(rel)} is not a file name (no bytes encode it)") from None
    if longest > _MAX_NAME:
        raise CorruptSnapshot(f"{what}: {_short(rel)} has a name longer than {_MAX_NAME} bytes")
    return rel


def _short(text: str) -> str:
    """``text`` quoted for a message, cut to 80 characters (a hostile value may be megabytes long)."""
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}… ({len(text):,} characters)"


def safe_name(name: object, what: str) -> str:
    """``name`` if it is one path component (no separator, not ``.`` or ``..``), else ``CorruptSnapshot``."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME
    ):
        raise CorruptSnapshot(f"{what}: {name!r} is not a single file name")
    return name


def inside(root: Path, rel: str, what: str) -> Path:
    """``root / rel`` for a path a manifest names, refused unless it stays inside ``root``.

    Absolute paths, ``..``, symlinks that lead out and names no file system holds (a component
    over 255 bytes, a path over 4,095) are ``CorruptSnapshot``: a reader never follows a manifest
    to create, change or delete files elsewhere, and never meets ``ENAMETOOLONG`` on its way.
    """
    target = root.joinpath(*PurePosixPath(safe_relative(rel, what)).parts)
    if len(os.fsencode(target)) > _MAX_PATH:
        raise CorruptSnapshot(f"{what}: {_short(rel)} makes a path longer than {_MAX_PATH} bytes")
    try:
        if not target.resolve().is_relative_to(root.resolve()):
            raise CorruptSnapshot(f"{what}: {rel!r} leads outside the output directory (a symlink)")
    except (OSError, RuntimeError) as e:
        raise CorruptSnapshot(f"{what}: {rel!r} cannot be resolved ({e})") from e
    return target


def load_json(raw: bytes, where: str, expected: str) -> Any:
    """``raw`` parsed as JSON; ``InvalidArgument`` naming ``where`` and the ``expected`` kind if it is not."""
    try:
        return json.loads(raw)
    except RecursionError as e:
        raise InvalidArgument(f"{where}: JSON nested too deeply for {expected}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"{where} is not JSON ({e}); expected {expected}") from e


def _expect(where: str, doc: Mapping[str, Any], key: str, kind: type, *, prefix: str = "") -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CorruptSnapshot(f"{where}: {prefix}{key} must be a {kind.__name__}, got {value!r}")
    return value


def _check_version(where: str, doc: Mapping[str, Any]) -> None:
    version = doc.get("version")
    if isinstance(version, bool) or version != MANIFEST_VERSION:
        raise UnsupportedVersion(
            f"{where}: manifest version {version!r}; this build reads {MANIFEST_VERSION}"
        )


# --- the files a manifest vouches for ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file a manifest vouches for: its path (relative to the manifest's directory), size, SHA-256."""

    path: str
    bytes: int
    sha256: str


def parse_files(value: object, where: str) -> tuple[FileEntry, ...]:
    """A manifest's ``files`` list, every entry checked (``CorruptSnapshot`` naming the bad one)."""
    if not isinstance(value, list):
        raise CorruptSnapshot(f"{where} must be a list of files, got {type(value).__name__}")
    out: list[FileEntry] = []
    for i, f in enumerate(value):
        if not isinstance(f, dict):
            raise CorruptSnapshot(f"{where}[{i}] must be an object, got {f!r}")
        path = safe_relative(_expect(where, f, "path", str, prefix=f"[{i}]."), f"{where}[{i}].path")
        size = _expect(where, f, "bytes", int, prefix=f"[{i}].")
        digest = _expect(where, f, "sha256", str, prefix=f"[{i}].")
        if size < 0 or not _SHA256.fullmatch(digest):
            raise CorruptSnapshot(f"{where}[{i}]: {f!r} has no valid size and SHA-256")
        out.append(FileEntry(path, size, digest))
    return tuple(out)


def check_files(
    entries: Iterable[FileEntry],
    digest_of: Callable[[str], tuple[int, str] | None],
    *,
    under: Iterable[str] = ("",),
) -> dict[str, str]:
    """Checks each entry under one of the ``under`` prefixes: ``{path: what is wrong}`` (empty: all match).

    ``digest_of(path)`` gives a file's (size, SHA-256), or None when it is absent.
    """
    prefixes = tuple(p.rstrip("/") for p in under)
    problems: dict[str, str] = {}
    for e in entries:
        if not any(not p or e.path == p or e.path.startswith(p + "/") for p in prefixes):
            continue
        found = digest_of(e.path)
        if found is None:
            problems[e.path] = "missing"
        elif found[0] != e.bytes:
            problems[e.path] = f"{found[0]:,} bytes where the manifest says {e.bytes:,}"
        elif found[1] != e.sha256:
            problems[e.path] = "its SHA-256 is not the manifest's"
    return problems


def local_digest(root: Path) -> Callable[[str], tuple[int, str] | None]:
    """``check_files``' reader for files under ``root`` (regular files only; links are not followed)."""

    def digest(rel: str) -> tuple[int, str] | None:
        try:
            target = inside(root, rel, "file")
            if target.is_symlink() or not target.is_file():
                return None
            with target.open("rb") as f:
                return target.stat().st_size, hashlib.file_digest(f, "sha256").hexdigest()
        except (OSError, CorruptSnapshot):
            return None

    return digest


# --- the one-topic manifest ---------------------------------------------------------------------------


def parse_manifest(path: Path) -> dict[str, Any]:
    """The one-topic manifest file at ``path``, checked for every key and type a reader uses.

    The paths it names are checked where they are used (:func:`inside`), so an inspection can
    report a bad one as a problem of that part and go on with the rest.

    A manifest that is no regular file (a directory, a symlink loop), too large, too deeply nested
    or not JSON is an ``InvalidArgument``; one with wrong keys or types a ``CorruptSnapshot``.
    """
    try:
        raw = read_regular(path, MAX_MANIFEST_BYTES)
    except OSError as e:
        raise InvalidArgument(f"{path}: cannot read the manifest ({e.strerror or e})") from e
    doc = load_json(raw, str(path), f"a {MANIFEST_FORMAT} manifest")
    return check_manifest(doc, str(path))


def check_manifest(doc: object, path: str) -> dict[str, Any]:
    """``doc``, a parsed one-topic manifest, checked as :func:`parse_manifest` checks it (same errors)."""
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise InvalidArgument(
            f'{path} is not a {MANIFEST_FORMAT} manifest (no "format": {MANIFEST_FORMAT!r})'
        )
    where = str(path)
    _check_version(where, doc)
    _expect(where, doc, "topic", str)
    _expect(where, doc, "now_ms", int)
    subs = _expect(where, doc, "subscriptions", dict)
    for name, rel in subs.items():
        if not isinstance(rel, str):
            raise CorruptSnapshot(f"{path}: subscriptions[{name!r}] must be a path string, got {rel!r}")
    delayed = doc.get("delayed")
    if delayed is not None:
        if not isinstance(delayed, dict):
            raise CorruptSnapshot(f'{path}: "delayed" must be an object or null')
        for key in ("storage", "properties", "topic", "cursor"):
            _expect(where, delayed, key, str, prefix="delayed.")
    elif "delayed" not in doc:
        raise CorruptSnapshot(f'{path}: "delayed" is missing')
    if "files" in doc:  # outputs written before files were listed have none
        parse_files(doc["files"], f"{path}: files")
    return doc


# --- the many-topic root manifest ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicEntry:
    """One topic of a many-topic output: its directory (the one-topic layout) and its files."""

    dir: str
    files: tuple[FileEntry, ...]


@dataclass(frozen=True, slots=True)
class TopicsManifest:
    """A many-topic output's root manifest, every value checked (paths stay under ``runs/<run>/``)."""

    run: str
    summary: str
    """``runs/<run>/summary.json``: the run's per-topic figures."""
    report: str | None
    topics: dict[str, TopicEntry]


def is_topics_doc(doc: object) -> bool:
    """Whether a parsed manifest claims to be a many-topic root manifest."""
    return isinstance(doc, dict) and doc.get("format") == TOPICS_FORMAT


TOPICS_KEYS = ("format", "version", "run", "summary", "report", "topics")
"""The keys of a many-topic root manifest, in the order written; ``seal`` follows them."""
SEAL_KEY = "seal"
_ENTRY_KEYS = frozenset({"dir", "files"})
_FILE_KEYS = frozenset({"path", "bytes", "sha256"})
_ATTEMPT = re.compile(r"a[0-9]{1,20}")


def topics_seal(doc: Mapping[str, Any]) -> str:
    """The SHA-256 of a many-topic manifest's content but its seal (keys sorted, compact, ASCII JSON).

    Written as the manifest's ``seal``: any change to what it says, down to one bit of a file's
    SHA-256 or of a key, no longer matches, so the manifest is refused rather than read differently.
    """
    body = {k: v for k, v in doc.items() if k != SEAL_KEY}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode("ascii")).hexdigest()


def parse_topics_manifest(raw: bytes, where: str) -> TopicsManifest:
    """A many-topic root manifest from its bytes, every key, type and path checked, and its seal.

    ``InvalidArgument`` when it is not JSON or not this format; ``UnsupportedVersion`` for another
    version; ``CorruptSnapshot`` for a missing, unknown or mistyped key or a path that is not the one
    this layout gives (a run that is not one name, a summary or report other than the run's, a
    directory other than ``runs/<run>/topics/<its topic's directory name>/a<attempt>``, a file entry
    without size and SHA-256), or a ``seal`` that does not match the rest. Manifests written before
    the seal (0.2) have none, and are checked for everything else.
    """
    doc = load_json(raw, where, f"a {TOPICS_FORMAT} manifest")
    if not is_topics_doc(doc):
        raise InvalidArgument(f'{where} is not a {TOPICS_FORMAT} manifest (no "format": {TOPICS_FORMAT!r})')
    _check_version(where, doc)
    _exact_keys(where, doc, frozenset(TOPICS_KEYS), optional=frozenset({SEAL_KEY}))
    run = safe_name(_expect(where, doc, "run", str), f"{where}: run")
    summary = safe_relative(_expect(where, doc, "summary", str), f"{where}: summary")
    _is(where, "summary", summary, f"{RUNS_DIR}/{run}/summary.json")
    report = doc.get("report")
    if report is not None:
        if not isinstance(report, str):
            raise CorruptSnapshot(f"{where}: report must be a path or null, got {report!r}")
        _is(where, "report", safe_relative(report, f"{where}: report"), f"{RUNS_DIR}/{run}/report.html")
    topics: dict[str, TopicEntry] = {}
    for name, entry in _expect(where, doc, "topics", dict).items():
        what = f"{where}: topics[{_short(name)}]"
        if not isinstance(entry, dict):
            raise CorruptSnapshot(f"{what} must be an object, got {entry!r}")
        _exact_keys(what, entry, _ENTRY_KEYS)
        rel = safe_relative(_expect(what, entry, "dir", str), f"{what}.dir")
        parts = PurePosixPath(rel).parts
        if len(parts) != 5 or parts[:3] != (RUNS_DIR, run, "topics"):
            raise CorruptSnapshot(
                f"{what}.dir: {rel!r} is not under {RUNS_DIR}/{run}/topics/<topic>/<attempt>"
            )
        if parts[3] != _topic_dir(name, what) or not _ATTEMPT.fullmatch(parts[4]):
            raise CorruptSnapshot(
                f"{what}.dir: {rel!r} is not {RUNS_DIR}/{run}/topics/{_topic_dir(name, what)}/a<attempt>, "
                f"where this topic is staged"
            )
        files = entry["files"]
        if isinstance(files, list):
            for i, f in enumerate(files):
                if isinstance(f, dict):
                    _exact_keys(f"{what}.files[{i}]", f, _FILE_KEYS)
        topics[name] = TopicEntry(rel, parse_files(files, f"{what}.files"))
    if SEAL_KEY in doc and doc[SEAL_KEY] != topics_seal(doc):
        raise CorruptSnapshot(
            f"{where}: its seal does not match its content (the manifest was changed or damaged)"
        )
    return TopicsManifest(run=run, summary=summary, report=report, topics=topics)


def _exact_keys(
    where: str, doc: Mapping[str, Any], keys: frozenset[str], *, optional: frozenset[str] = frozenset()
) -> None:
    """``CorruptSnapshot`` naming a key of ``keys`` that ``doc`` lacks, or one it has beyond those."""
    missing = sorted(keys - doc.keys())
    unknown = sorted(doc.keys() - keys - optional)
    if missing or unknown:
        said = [f"no {_short(k)}" for k in missing] + [f"an unknown key {_short(k)}" for k in unknown]
        raise CorruptSnapshot(f"{where}: {', '.join(said)} (keys: {', '.join(sorted(keys))})")


def _is(where: str, key: str, value: str, expected: str) -> None:
    """``CorruptSnapshot`` unless a path the layout fixes is that path."""
    if value != expected:
        raise CorruptSnapshot(f"{where}: {key} is {_short(value)}, not the run's {expected!r}")


def _topic_dir(topic: str, what: str) -> str:
    """The directory name a topic is staged under (:func:`~cursorkit.pipeline.cursors.cursor_dir_name`)."""
    from cursorkit.pipeline.cursors import cursor_dir_name  # numpy and the core: only when read

    try:
        return cursor_dir_name(topic)
    except CursorkitError as e:
        raise CorruptSnapshot(f"{what}: not a topic name ({e})") from None


def read_topics_manifest(root: Path) -> TopicsManifest | None:
    """The root manifest of a local many-topic output, or None when ``root`` holds a one-topic one."""
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise InvalidArgument(f"{root} is not a rebuild's output (no {MANIFEST_FILE})")
    try:
        raw = read_regular(path, MAX_MANIFEST_BYTES)
    except OSError as e:
        raise InvalidArgument(f"{path}: cannot read the manifest ({e.strerror or e})") from e
    try:
        doc = json.loads(raw)
    except (RecursionError, json.JSONDecodeError, UnicodeDecodeError):
        return None  # not a many-topic manifest; parse_manifest reports what it is
    if not is_topics_doc(doc):
        return None
    return parse_topics_manifest(raw, str(path))
