"""Small durable-file helpers shared by the file-backed stores: atomic replace and directory fsync.

``atomic_write`` is the classic sequence — temp file in the target's directory, write everything,
fsync, rename over the target, fsync the directory — so a reader (or a crash) sees either the old file
or the new one, never a mix. Writes go through the :data:`~cursorkit.ackstate.store.Opener` protocol
that ``CursorStore`` uses, so tests inject short writes and failing syncs the same way everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from pathlib import Path

from cursorkit.ackstate.store import Opener, StoreFile, default_opener
from cursorkit.errors import PersistFailed

__all__ = ["atomic_write", "fsync_dir", "temp_path", "temp_target"]

_TEMP = re.compile(r"\.(.+)\.tmp-[0-9a-f]{16}")


def temp_path(path: str | os.PathLike[str]) -> Path:
    """A fresh temp file name beside ``path`` (hidden, unique, recognisable by :func:`temp_target`)."""
    p = Path(path)
    return p.with_name(f".{p.name}.tmp-{secrets.token_hex(8)}")


def temp_target(name: str) -> str | None:
    """The file name a temp file called ``name`` was replacing, or ``None`` if it is not such a temp."""
    m = _TEMP.fullmatch(name)
    return m.group(1) if m else None


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Makes the directory entries of ``path`` (a directory) durable: creates, renames, unlinks."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(f: StoreFile, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = f.write(view)
        if not n:
            raise OSError(errno.EIO, "write returned no progress")
        view = view[n:]


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | bytearray | memoryview,
    *,
    opener: Opener | None = None,
    sync: bool = True,
) -> None:
    """Replaces ``path`` with ``data`` atomically: temp file, write all, fsync, rename over, fsync dir.

    ``opener(temp, "xb")`` opens the temp file (fault injection goes there). Any failure raises
    ``PersistFailed`` naming ``path`` and the cause. Before the rename, the temp file is removed and
    the old file is untouched; if only the final directory fsync fails, the new content is in place
    but may not survive a crash. ``sync=False`` skips both fsyncs (tests, rebuildable output).
    """
    target = Path(path)
    tmp = temp_path(target)
    open_file = opener if opener is not None else default_opener
    f: StoreFile | None = None
    stage = "open"
    try:
        f = open_file(str(tmp), "xb")
        stage = "write"
        _write_all(f, data)
        if sync:
            stage = "fsync"
            os.fsync(f.fileno())
        stage = "close"
        f.close()
        f = None
        stage = "rename"
        os.replace(tmp, target)
    except OSError as e:
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise _failed(target, stage, e) from e
    if sync:
        try:
            fsync_dir(target.parent)
        except OSError as e:
            raise _failed(target, "directory fsync", e) from e


def _failed(target: Path, stage: str, cause: OSError) -> PersistFailed:
    code = cause.errno if cause.errno is not None else errno.EIO
    return PersistFailed(code, f"{target}: atomic write failed at {stage} ({cause})")
