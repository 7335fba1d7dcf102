"""Where a many-topic rebuild writes: a local (or shared-mount) directory, or an object-store prefix.

The job needs few operations of its output: list a directory level, read and write small files
whole, remove a subtree, hold a lock for the run, and let a task stage a topic's directory. A local
directory does these with files (writes atomic and fsynced, the lock an ``flock``); an object store
(``s3://bucket/prefix``, through ``pyarrow.fs``) with objects: a PUT is atomic, so a file write is
one PUT, and a task writes a topic into a local temporary directory and uploads it file by file.

Object stores have no lock through ``pyarrow.fs``: the run holds a *lease*, an object
``_lease.json`` naming the run and its expiry, renewed while the run lasts and checked again just
before the commit. It keeps a second rebuild from starting while one runs, or from committing
after its lease passed to another; it is not a fence against two runs starting in the same
instant (there is no conditional PUT here).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow.fs as pafs

from cursorkit.errors import InvalidArgument
from cursorkit.fsio import atomic_write, fsync_dir, sync_tree
from cursorkit.pipeline.cursors import cursor_dir_name
from cursorkit.pipeline.locations import OBJECT_STORE_SCHEMES, check_scheme, is_object_store
from cursorkit.pipeline.manifest import inside, safe_relative
from cursorkit.pipeline.scan import filesystem

__all__ = [
    "LEASE_FILE",
    "OBJECT_STORE_SCHEMES",
    "LocalOutput",
    "ObjectOutput",
    "Output",
    "check_scheme",
    "is_object_store",
    "locked_dir",
    "open_output",
]

LEASE_FILE = "_lease.json"
"""The lease object of a run writing an object-store output."""
RUNS_DIR = "runs"

Staged = tuple[Path, str, Callable[[], list[dict[str, Any]]]]
"""A task's local directory to write a topic into, its path relative to the output, and ``finish``."""


class Output(Protocol):
    """The operations a many-topic run needs of its output."""

    @property
    def uri(self) -> str:
        """The output's location as given."""
        ...

    def kind(self) -> str:
        """``missing``, ``dir`` or ``file``."""
        ...

    def names(self, rel: str = "") -> list[str]:
        """The entries directly under ``rel`` (none if it is absent)."""
        ...

    def read(self, rel: str) -> bytes | None:
        """A file's content, or None if it is absent."""
        ...

    def write(self, rel: str, data: bytes, *, sync: bool) -> None:
        """Replaces a file whole (atomically)."""
        ...

    def remove(self, rel: str) -> None:
        """Removes a subtree (nothing if absent)."""
        ...

    def locked(self, run: str) -> contextlib.AbstractContextManager[Callable[[], None]]:
        """Holds the output for a run; yields a check to call just before the commit."""
        ...

    def staging(self, run: str, sync: bool) -> Callable[[str], Staged]:
        """The executor-side function that gives a task its directory for a topic."""
        ...


def open_output(out: str | os.PathLike[str]) -> Output:
    """The output at ``out``: :class:`ObjectOutput` for an object-store URI, else :class:`LocalOutput`."""
    if is_object_store(out):
        return ObjectOutput(os.fspath(out))
    return LocalOutput(Path(os.fspath(out).removeprefix("file://")))


def file_entry(path: Path, rel: str) -> dict[str, Any]:
    """A file's manifest entry: its path, size and SHA-256 (hashed as a stream)."""
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return {"path": rel, "bytes": path.stat().st_size, "sha256": digest}


def list_files(root: Path) -> list[dict[str, Any]]:
    """Every file under ``root`` as a manifest entry, in path order."""
    return [file_entry(p, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()]


def attempt_dir(run: str, topic: str) -> str:
    """``runs/<run>/topics/<topic dir>/a<task attempt id>``: where this task attempt stages ``topic``.

    Attempt ids are unique in a Spark application, so no two attempts share a directory.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId() if ctx is not None else uuid.uuid4().int % 10**12
    return f"{RUNS_DIR}/{run}/topics/{cursor_dir_name(topic)}/a{attempt}"


@contextlib.contextmanager
def locked_dir(out: Path) -> Iterator[None]:
    """Holds ``.<out>.lock`` beside ``out`` for the run, so two rebuilds never write one output.

    With the lock held, leftovers of a killed run (``.<out>.rebuild-*``, ``.<out>.old-*``) are
    nobody's and are removed. The lock file itself stays (removing it would race the next locker).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent / f".{out.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InvalidArgument(f"another rebuild is writing {out}") from None
        for stale in [*out.parent.glob(f".{out.name}.rebuild-*"), *out.parent.glob(f".{out.name}.old-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        os.close(fd)


# --- a local directory ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalOutput:
    """A directory every executor reaches at the same path (one machine, or a shared mount)."""

    root: Path

    @property
    def uri(self) -> str:
        """The output's location as given."""
        return str(self.root)

    def kind(self) -> str:
        """``missing``, ``dir`` or ``file``."""
        if not self.root.exists():
            return "missing"
        return "dir" if self.root.is_dir() else "file"

    def _at(self, rel: str) -> Path:
        """``root / rel``, refused (``CorruptSnapshot``) unless it stays inside the root, links resolved."""
        return self.root if rel == "" else inside(self.root, rel, f"{self.root}: {rel!r}")

    def names(self, rel: str = "") -> list[str]:
        """``Output.names``."""
        d = self._at(rel)
        return sorted(p.name for p in d.iterdir()) if d.is_dir() else []

    def read(self, rel: str) -> bytes | None:
        """``Output.read``."""
        p = self._at(rel)
        return p.read_bytes() if p.is_file() else None

    def write(self, rel: str, data: bytes, *, sync: bool) -> None:
        """``Output.write``."""
        target = self._at(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data, sync=sync)
        if sync:
            fsync_dir(target.parent)

    def remove(self, rel: str) -> None:
        """``Output.remove``: a link is removed itself, never what it points to."""
        target = self.root / safe_relative(rel, f"{self.root}: {rel!r}")
        if target.is_symlink():
            parent = target.parent.relative_to(self.root).as_posix()
            self._at("" if parent == "." else parent)  # the link's own directory stays inside
            target.unlink()
            return
        shutil.rmtree(self._at(rel), ignore_errors=True)

    @contextlib.contextmanager
    def locked(self, run: str) -> Iterator[Callable[[], None]]:
        """``Output.locked``."""
        with locked_dir(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            yield lambda: None

    def staging(self, run: str, sync: bool) -> Callable[[str], Staged]:
        """``Output.staging``."""
        return LocalStaging(str(self.root.resolve()), run, sync)


@dataclass(frozen=True, slots=True)
class LocalStaging:
    """A task writes a topic to ``<out>/runs/<run>/topics/<topic dir>/a<task attempt id>``.

    Each attempt writes its own directory, so a retried or speculative attempt never touches
    another's files; the manifest names the one whose result the driver received.
    """

    out: str
    run: str
    sync: bool

    def __call__(self, topic: str) -> Staged:
        rel = attempt_dir(self.run, topic)
        root = Path(self.out) / rel  # attempt ids are unique in the application: a new directory
        root.mkdir(parents=True)
        return root, rel, lambda: _finish_local(root, self.sync)


def _finish_local(root: Path, sync: bool) -> list[dict[str, Any]]:
    """Lists the staged files; with ``sync`` makes the whole directory durable in one pass."""
    files = list_files(root)
    if sync:
        sync_tree(root)
    return files


# --- an object store --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectOutput:
    """A prefix of an object store (``s3://bucket/prefix``), opened with ``pyarrow.fs`` everywhere."""

    uri: str
    lease_seconds: float = float(os.environ.get("CURSORKIT_LEASE_SECONDS", "120"))

    def _fs(self) -> tuple[pafs.FileSystem, str]:
        return filesystem(self.uri)

    def _key(self, base: str, rel: str) -> str:
        """``base/rel`` for a relative path without ``..`` (``CorruptSnapshot`` otherwise)."""
        return base if rel == "" else f"{base}/{safe_relative(rel, f'{self.uri}: {rel!r}')}"

    def kind(self) -> str:
        """``missing``, ``dir`` or ``file``."""
        fs, base = self._fs()
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            return "missing"
        return "dir" if info.type == pafs.FileType.Directory else "file"

    def names(self, rel: str = "") -> list[str]:
        """``Output.names``."""
        fs, base = self._fs()
        path = self._key(base, rel).rstrip("/")
        found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(f.base_name for f in found)

    def read(self, rel: str) -> bytes | None:
        """``Output.read``."""
        fs, base = self._fs()
        try:
            with fs.open_input_stream(self._key(base, rel)) as f:
                data: bytes = f.read()
                return data
        except FileNotFoundError:
            return None

    def write(self, rel: str, data: bytes, *, sync: bool) -> None:
        """``Output.write``."""
        fs, base = self._fs()
        with fs.open_output_stream(self._key(base, rel)) as f:  # one PUT: the object appears whole
            f.write(data)

    def remove(self, rel: str) -> None:
        """``Output.remove``."""
        fs, base = self._fs()
        path = self._key(base, rel)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path)
        elif info.type == pafs.FileType.File:
            fs.delete_file(path)

    @contextlib.contextmanager
    def locked(self, run: str) -> Iterator[Callable[[], None]]:
        """``Output.locked``."""
        holder = {"run": run, "host": socket.gethostname(), "pid": os.getpid()}
        current = self._lease()
        if (
            current is not None
            and current.get("run") != run
            and float(current.get("expires", 0)) > time.time()
        ):
            raise InvalidArgument(
                f"another rebuild is writing {self.uri}: run {current.get('run')} on "
                f"{current.get('host')} holds its lease until {time.ctime(float(current['expires']))}"
            )
        self._renew(holder)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lease_seconds / 3):
                with contextlib.suppress(OSError):
                    self._renew(holder)

        thread = threading.Thread(target=renew, name="cursorkit-lease", daemon=True)
        thread.start()

        def check() -> None:
            now = self._lease()
            if now is None or now.get("run") != run:
                raise InvalidArgument(f"the lease on {self.uri} passed to another run; not committing")

        try:
            yield check
        finally:
            stop.set()
            thread.join()
            if (self._lease() or {}).get("run") == run:
                self.remove(LEASE_FILE)

    def _lease(self) -> dict[str, Any] | None:
        raw = self.read(LEASE_FILE)
        if raw is None:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def _renew(self, holder: dict[str, Any]) -> None:
        body = holder | {"expires": time.time() + self.lease_seconds}
        self.write(LEASE_FILE, json.dumps(body).encode(), sync=True)

    def staging(self, run: str, sync: bool) -> Callable[[str], Staged]:
        """``Output.staging``."""
        return ObjectStaging(self.uri, run)


@dataclass(frozen=True, slots=True)
class ObjectStaging:
    """A task writes a topic into a local temporary directory, then uploads it under its attempt's prefix."""

    uri: str
    run: str

    def __call__(self, topic: str) -> Staged:
        rel = attempt_dir(self.run, topic)
        local = Path(tempfile.mkdtemp(prefix="cursorkit-topic-"))
        return local, rel, lambda: self._upload(local, rel)

    def _upload(self, local: Path, rel: str) -> list[dict[str, Any]]:
        fs, base = filesystem(self.uri)
        try:
            files = list_files(local)
            for f in files:
                with (
                    (local / f["path"]).open("rb") as src,
                    fs.open_output_stream(f"{base}/{rel}/{f['path']}") as dst,
                ):
                    shutil.copyfileobj(src, dst, 1 << 20)
            return files
        finally:
            shutil.rmtree(local, ignore_errors=True)
