"""Durable-file helpers shared by every file-backed store: file protocol, full writes, atomic replace.

``atomic_write`` is the classic sequence — temp file in the target's directory, write everything,
fsync, rename over the target, fsync the directory — so a reader (or a crash) sees either the old file
or the new one, never a mix. Every store writes through the :data:`Opener` protocol defined here, so
tests inject short writes and failing syncs the same way everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cursorkit.errors import PersistFailed

__all__ = [
    "Opener",
    "StoreFile",
    "atomic_write",
    "datasync",
    "default_opener",
    "fsync_dir",
    "read_regular",
    "regular_fd",
    "temp_path",
    "temp_target",
    "write_all",
]


class StoreFile(Protocol):
    """The writable file a store appends to: an unbuffered binary file (``open(p, m, buffering=0)``)."""

    def write(self, data: memoryview, /) -> int | None:
        """Writes some of ``data``; returns the count (a short write is retried)."""
        ...

    def seek(self, offset: int, whence: int = 0, /) -> int:
        """Moves the write position."""
        ...

    def truncate(self, size: int | None = None, /) -> int:
        """Cuts the file to ``size`` bytes."""
        ...

    def fileno(self) -> int:
        """The descriptor that ``os.fsync`` is called on."""
        ...

    def close(self) -> None:
        """Closes the file."""
        ...


Opener = Callable[[str, str], StoreFile]
"""``opener(path, mode)`` with mode ``"ab"`` (existing log), ``"xb"`` (new log) or ``"wb"`` (meta temp)."""


_OPEN_FLAGS = {
    "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
    "xb": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def regular_fd(path: str | os.PathLike[str], flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` without following a final symlink; only regular files.

    Anything else (a symlink, a directory, a FIFO: pass ``os.O_NONBLOCK`` so opening one cannot block)
    is closed again and refused with ``OSError``.
    """
    fd = os.open(path, flags | _NOFOLLOW, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{os.fspath(path)} is not a regular file")
    return fd


def default_opener(path: str, mode: str) -> StoreFile:
    """Plain unbuffered binary file: every ``write`` reaches the OS before ``fsync``.

    A symlink or anything but a regular file is refused (``OSError``): a store never writes
    through a link planted in its directory.
    """
    if mode not in _OPEN_FLAGS:
        raise ValueError(f"unsupported mode {mode!r}")
    f: StoreFile = os.fdopen(regular_fd(path, _OPEN_FLAGS[mode]), mode, buffering=0)
    return f


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """All bytes of a regular file.

    Symlinks, special files and files over ``limit`` bytes are refused with ``OSError``; the size
    is checked before anything is read.
    """
    with os.fdopen(regular_fd(path, os.O_RDONLY), "rb") as f:
        if limit is not None and os.fstat(f.fileno()).st_size > limit:
            raise OSError(errno.EFBIG, f"{os.fspath(path)} is larger than {limit} bytes")
        return f.read() if limit is None else f.read(limit + 1)


_TEMP = re.compile(r"\.(.+)\.tmp-[0-9a-f]{16}")


def temp_path(path: str | os.PathLike[str]) -> Path:
    """A fresh temp file name beside ``path`` (hidden, unique, recognisable by :func:`temp_target`)."""
    p = Path(path)
    return p.with_name(f".{p.name}.tmp-{secrets.token_hex(8)}")


def temp_target(name: str) -> str | None:
    """The file name a temp file called ``name`` was replacing, or ``None`` if it is not such a temp."""
    m = _TEMP.fullmatch(name)
    return m.group(1) if m else None


def datasync(fd: int) -> None:
    """``fdatasync(fd)`` where the platform has it (file data and size, not times), else ``fsync``."""
    getattr(os, "fdatasync", os.fsync)(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Makes the directory entries of ``path`` (a directory) durable: creates, renames, unlinks."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(root: str | os.PathLike[str]) -> None:
    """Makes every file and directory under ``root`` (and ``root``'s own entry) durable.

    Linux: one ``syncfs`` of ``root``'s file system, which writes back its dirty data and metadata
    in one pass (thousands of small files cost one call, not one fsync each); elsewhere, or if that
    call fails, an fsync of every file and then every directory, deepest first.
    """
    top = Path(root)
    if _syncfs(top):
        return
    dirs = [top]
    for path in sorted(top.rglob("*")):
        if path.is_dir():
            dirs.append(path)
        elif path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in sorted(dirs, key=lambda p: -len(p.parts)):
        fsync_dir(d)
    fsync_dir(top.parent)


def _syncfs(path: Path) -> bool:
    """``syncfs(2)`` on the file system holding ``path``; False where it is not available or fails."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        return bool(call(fd) == 0)
    finally:
        os.close(fd)


def write_all(f: StoreFile, data: bytes | bytearray | memoryview) -> None:
    """Writes everything, retrying short writes; a write that makes no progress is an EIO."""
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
        write_all(f, data)
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
