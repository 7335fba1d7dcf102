"""Names from outside as directory names: each name is one directory of its parent, never a path.

A topic's tenant, namespace and local name, and a subscription's name, each become a single path
component. The short form keeps the layout earlier versions wrote, so their data directories open:

- a topic segment is itself when it is a plain name (ASCII letters, digits and ``_.=:-``, not ``.``
  or ``..``) of at most 255 bytes;
- a subscription is the lower-case hex of its UTF-8 bytes when that is at most 255 characters
  (names up to 127 bytes).

Every other name (longer, or a local name with other characters) is ``~`` and the SHA-256 of its
UTF-8 bytes: neither short alphabet holds ``~``, so no long form equals a short one. The full name
is written (atomically) into that directory's ``~name`` file before anything else goes in: a listing
reads it back, and a name whose hash another name already holds is refused, never merged.

So the mapping is total (every non-empty name has a directory, whatever its length or characters)
and injective (two names never share one); an empty name has none and is refused.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from cursorkit.errors import DamagedStore, InvalidArgument, InvalidInputType
from cursorkit.fsio import atomic_write, fsync_dir, read_regular

__all__ = [
    "MAX_COMPONENT",
    "NAME_FILE",
    "ensure_directory",
    "is_long",
    "listed_segment",
    "listed_subscription",
    "segment_component",
    "subscription_component",
    "topic_directory",
]

MAX_COMPONENT = 255
"""Bytes in one path component (``NAME_MAX`` of Linux and macOS file systems)."""
NAME_FILE = "~name"
"""The file holding a long-form directory's full name (no short name or long form is ``~name``)."""

_PLAIN = re.compile(r"[A-Za-z0-9_.=:-]+")
_HEX = re.compile(r"(?:[0-9a-f]{2})+")
_LONG = re.compile(r"~[0-9a-f]{64}")
_MAX_NAME_FILE = 16 * 1024 * 1024
"""A name file larger than this is damage (a name comes in one frame, at most 5 MiB)."""


def _utf8(name: object, what: str) -> bytes:
    if not isinstance(name, str):
        raise InvalidInputType(f"{what} must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidArgument(f"{what}: an empty name has no directory")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{what} {name[:200]!r} is not encodable as UTF-8") from e


def _long(raw: bytes) -> str:
    return "~" + hashlib.sha256(raw).hexdigest()


def is_long(component: str) -> bool:
    """Whether ``component`` is a long form (``~`` and a SHA-256), whose directory holds its name."""
    return _LONG.fullmatch(component) is not None


def segment_component(segment: str) -> str:
    """The directory of a topic segment (tenant, namespace or local name) under its parent's."""
    raw = _utf8(segment, "topic segment")
    if len(raw) <= MAX_COMPONENT and segment not in (".", "..") and _PLAIN.fullmatch(segment):
        return segment
    return _long(raw)


def subscription_component(name: str) -> str:
    """The directory of a subscription under its topic's ``subscriptions/``."""
    raw = _utf8(name, "subscription")
    short = raw.hex()
    return short if len(short) <= MAX_COMPONENT else _long(raw)


def _damaged(directory: Path, why: str) -> DamagedStore:
    return DamagedStore(f"{directory}: {why}", damage={str(directory): why})


def _held_name(directory: Path) -> str | None:
    """The name a long-form directory holds (None when its file is not written yet), checked."""
    path = directory / NAME_FILE
    try:
        raw = read_regular(path, _MAX_NAME_FILE)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _damaged(directory, f"its name file cannot be read ({e})") from e
    if len(raw) > _MAX_NAME_FILE or _long(raw) != directory.name:
        raise _damaged(directory, "its name file does not hold the name its directory is named for")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _damaged(directory, "its name file is not UTF-8") from e


def ensure_directory(parent: Path, component: str, name: str, *, sync: bool) -> Path:
    """``parent/component``, made when missing; a long form holds ``name`` (written, or checked).

    ``DamagedStore`` when the directory holds another name: a SHA-256 collision, or damage.
    """
    directory = parent / component
    if not directory.is_dir():
        parent.mkdir(parents=True, exist_ok=True)
        try:
            directory.mkdir()
        except FileExistsError:
            pass  # made meanwhile (or not a directory: the writes below say so)
        else:
            if sync:
                fsync_dir(parent)
    if is_long(component):
        held = _held_name(directory)
        if held is None:
            atomic_write(directory / NAME_FILE, name.encode("utf-8"), sync=sync)
        elif held != name:
            raise _damaged(directory, f"it holds {held[:200]!r}, not {name[:200]!r}")
    return directory


def topic_directory(topics: Path, segments: tuple[str, ...], *, sync: bool) -> Path:
    """A topic's directory under ``topics`` (one level per segment: tenant, namespace, local name), made."""
    directory = topics
    for segment in segments:
        directory = ensure_directory(directory, segment_component(segment), segment, sync=sync)
    return directory


def listed_segment(directory: Path) -> str | None:
    """The topic segment (tenant, namespace or local name) whose directory ``directory`` is.

    None for a long form whose name file is not written yet (made by a broker that died at once);
    ``DamagedStore`` when it is no segment's directory.
    """
    component = directory.name
    if is_long(component):
        held = _held_name(directory)
        if held is not None and segment_component(held) != component:
            raise _damaged(directory, f"{held[:200]!r} belongs in another directory")
        return held
    if len(component) <= MAX_COMPONENT and component not in (".", "..") and _PLAIN.fullmatch(component):
        return component
    raise _damaged(directory, "not named as a topic segment's directory (a plain name, or ~ and a SHA-256)")


def listed_subscription(directory: Path) -> str:
    """The subscription whose directory ``directory`` is; ``DamagedStore`` when it is no such directory."""
    component = directory.name
    if is_long(component):
        held = _held_name(directory)
        if held is None:
            raise _damaged(directory, f"a subscription's directory without its {NAME_FILE} file")
        if subscription_component(held) != component:
            raise _damaged(directory, f"{held[:200]!r} belongs in another directory")
        return held
    if len(component) <= MAX_COMPONENT and _HEX.fullmatch(component):
        try:
            return bytes.fromhex(component).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _damaged(directory, "its hex name is not UTF-8") from e
    raise _damaged(directory, "not named as a subscription's directory (hex, or ~ and a SHA-256)")
