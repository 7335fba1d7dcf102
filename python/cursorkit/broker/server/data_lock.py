"""The broker's hold on its data directory: one broker alone, or brokers sharing it through ZooKeeper.

A broker without ``--metadata`` locks ``<data>/broker.lock`` exclusively (``flock``) before it
listens, so a second one on the same directory is refused at start rather than failing its
clients later, when it meets a topic's log. Brokers with ``--metadata`` share the directory: each
holds the lock shared, which keeps a lone broker out while they run (and them out while it runs).
The lock goes with the process, however it ends; the file stays (removing it would race a starter).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from cursorkit.errors import CursorkitError

__all__ = ["LOCK_FILE", "DataInUse", "DataLock"]

LOCK_FILE = "broker.lock"
"""The file in the data directory whose ``flock`` says which brokers hold it."""


class DataInUse(CursorkitError):
    """The data directory is held by another broker; the message names the directory and the holder."""


class DataLock:
    """The lock on a broker's data directory: exclusive for a lone broker, shared with ``--metadata``."""

    __slots__ = ("_fd", "path", "shared")

    def __init__(self, root: Path, *, shared: bool) -> None:
        """Takes the lock at once, without waiting; :class:`DataInUse` when another broker holds it."""
        self.path = root / LOCK_FILE
        self.shared = shared
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataInUse(self._refusal(root)) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        if not shared:
            self.name_holder("")

    def name_holder(self, url: str) -> None:
        """Writes who holds the lock (this process, serving ``url``), for the broker refused next."""
        if self._fd is None or self.shared:
            return
        text = f"pid {os.getpid()}" + (f", serving {url}" if url else "")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(), 0)

    def release(self) -> None:
        """Lets the directory go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the flock

    def _refusal(self, root: Path) -> str:
        """What holds the directory, in one line, with what to do about it."""
        if not self.shared and _held_shared(self.path):
            return (
                f"data directory {root} is in use by brokers sharing it through ZooKeeper (--metadata): "
                "give this broker the same --metadata to join them, or another --data"
            )
        holder = ""
        with contextlib.suppress(OSError, UnicodeDecodeError):
            holder = self.path.read_text().strip()
        who = "a broker running without --metadata" if self.shared else "another broker"
        held = f" ({holder})" if holder else ""
        return f"data directory {root} is in use by {who}{held}: stop it, or give this broker another --data"


def _held_shared(path: Path) -> bool:
    """Whether others hold the lock at ``path`` shared: a shared lock is granted, an exclusive one not."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False  # an exclusive holder
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False  # nobody holds it any more
    finally:
        os.close(fd)
