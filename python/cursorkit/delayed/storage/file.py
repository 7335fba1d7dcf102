"""``FileBucketSnapshotStorage``: PIP-195 bucket snapshots as files in a local directory.

Each bucket is one immutable file in the format of :mod:`cursorkit.delayed.storage.format`, written
atomically (temp, fsync, rename, fsync directory), so a reader never sees half a bucket. Ids come
from a high-water mark (``next-bucket-id``) that is persisted, in blocks, before any id under it is
handed out, so an id is never reused in a directory, even after deletes and restarts: a stale cursor
property can at worst name a missing bucket, never a different one.
:class:`~cursorkit.delayed.storage.objects.ObjectStoreBucketSnapshotStorage` is the same on an
object store.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.delayed.storage.format import (
    MAX_ID,
    BucketIndex,
    BucketReader,
    IdCounter,
    bucket_id_arg,
    bucket_id_of,
    bucket_ids,
    bucket_name,
    bucket_records,
    decode_id_mark,
    encode_bucket,
    encode_id_mark,
)
from cursorkit.delayed.storage.reads import BucketReads
from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
)
from cursorkit.fsio import Opener, atomic_write, fsync_dir, temp_target
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

if TYPE_CHECKING:
    from cursorkit.delayed.storage.api import InspectableBucketSnapshotStorage

__all__ = ["NEXT_ID_FILE", "FileBucketSnapshotStorage"]


NEXT_ID_FILE = "next-bucket-id"
"""The id high-water mark file: every id below the value it holds may have been used."""


class FileBucketSnapshotStorage(BucketReads):
    """PIP-195 bucket snapshots in a local directory: one checksummed, atomically written file each.

    The embedded default behind :class:`BucketSnapshotStorage`. Call :meth:`start` (or use it as a
    context manager) before anything else; the directory is created if missing and locked (``flock``)
    against a second storage object, in this process or another. Thread-safe: creates serialise only
    on id allocation; reads and deletes run concurrently. ``fsync=False`` skips every fsync (tests,
    output that can be rebuilt); ``opener`` is the ``CursorStore`` fault-injection hook for writes.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, opener: Opener | None = None, fsync: bool = True
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidInputType(f"path must be a str or path, got {type(path).__name__}")
        if opener is not None and not callable(opener):
            raise InvalidInputType(f"opener must be callable, got {type(opener).__name__}")
        if not isinstance(fsync, bool):
            raise InvalidInputType(f"fsync must be a bool, got {type(fsync).__name__}")
        self._path = Path(path)
        self._opener = opener
        self._fsync = fsync
        self._lock = threading.Lock()
        self._state = "new"
        self._dir_fd = -1
        self._ids = IdCounter(0, 0, self._save_mark)  # replaced by start()

    @property
    def path(self) -> Path:
        """The directory holding the bucket files."""
        return self._path

    def _file_for(self, bucket_id: int) -> Path:
        return self._path / bucket_name(bucket_id)

    def _check_started(self) -> None:
        if self._state != "started":
            state = "closed" if self._state == "closed" else "not started (call start())"
            raise InvalidArgument(f"bucket snapshot storage {self._path} is {state}")

    # -- lifetime ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Creates or opens the directory, locks it, drops stale temp files and loads the id mark.

        Idempotent while open; ``InvalidArgument`` after :meth:`close`, ``BlockingIOError`` when
        another storage holds the directory, ``CorruptSnapshot`` when the id mark is damaged or
        missing while bucket files exist (ids could otherwise be reused).
        """
        with self._lock:
            if self._state == "started":
                return
            if self._state == "closed":
                raise InvalidArgument(f"bucket snapshot storage {self._path} is closed")
            self._path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError as e:
                    raise BlockingIOError(
                        errno.EAGAIN, "bucket snapshot storage is open elsewhere", str(self._path)
                    ) from e
                self._drop_stale_temps()
                mark = self._read_mark()
                ids = self._scan_ids()
                if mark is None:
                    if ids:
                        raise CorruptSnapshot(
                            f"{self._path / NEXT_ID_FILE}: missing while {len(ids)} bucket files exist; "
                            "ids could be reused"
                        )
                    mark = 1
                elif ids and ids[-1] >= mark:
                    raise CorruptSnapshot(
                        f"{self._path / NEXT_ID_FILE}: next id {mark} but bucket {ids[-1]} exists"
                    )
            except BaseException:
                os.close(fd)
                raise
            self._dir_fd = fd
            self._ids = IdCounter(mark, MAX_ID + 1, self._save_mark)
            self._state = "started"

    def close(self) -> None:
        """Unlocks the directory; every later call except ``close`` raises ``InvalidArgument``."""
        with self._lock:
            if self._state == "started":
                with contextlib.suppress(OSError):
                    os.close(self._dir_fd)
                self._dir_fd = -1
            self._state = "closed"

    def __enter__(self) -> FileBucketSnapshotStorage:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileBucketSnapshotStorage({str(self._path)!r}, {self._state})"

    def _drop_stale_temps(self) -> None:
        removed = False
        for p in self._path.iterdir():
            target = temp_target(p.name)
            if target is not None and (target == NEXT_ID_FILE or bucket_id_of(target) is not None):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                removed = True
        if removed and self._fsync:
            fsync_dir(self._path)

    def _scan_ids(self) -> list[int]:
        return bucket_ids(p.name for p in self._path.iterdir())

    # -- ids ---------------------------------------------------------------------------------------

    def _read_mark(self) -> int | None:
        path = self._path / NEXT_ID_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return decode_id_mark(data, str(path), MAX_ID + 1)

    def _save_mark(self, mark: int) -> None:
        atomic_write(self._path / NEXT_ID_FILE, encode_id_mark(mark), opener=self._opener, sync=self._fsync)

    def _allocate_id(self) -> int:
        """A never-used id; the mark covering it is durable before it is returned."""
        with self._lock:
            self._check_started()
            return self._ids.take(str(self._path))

    # -- the BucketSnapshotStorage protocol -------------------------------------------------------

    def create_bucket_snapshot(
        self,
        metadata: SnapshotMetadata,
        segments: Sequence[bytes],
        bucket_key: str,
        topic: str,
        cursor: str,
    ) -> int:
        """Writes a new bucket file atomically and returns its id (unique forever in this directory).

        ``segments`` are encoded ``SnapshotSegment`` s, one per ``metadata.metadata_list`` entry;
        an empty bucket is refused (``InvalidArgument``), as Pulsar never writes one. A failed write
        raises ``PersistFailed`` and leaves no bucket file behind (its id may stay unused).
        """
        texts, records = bucket_records(metadata, segments, bucket_key, topic, cursor)
        bucket_id = self._allocate_id()
        path = self._file_for(bucket_id)
        try:
            atomic_write(
                path, encode_bucket(bucket_id, texts, records), opener=self._opener, sync=self._fsync
            )
        except PersistFailed:
            # Only the directory fsync can fail after the rename: take the file back out.
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            raise
        return bucket_id

    @contextlib.contextmanager
    def _reader(
        self, bucket_id: object, *, direct: bool = False
    ) -> Iterator[tuple[BucketReader, BucketIndex]]:
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        with BucketReader.of_file(self._file_for(bid), bid) as reader:
            yield reader, reader.index()

    def get_bucket_snapshot_length(self, bucket_id: int) -> int:
        """Stored bytes of the bucket file (header, records, table and footer)."""
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        path = self._file_for(bid)
        try:
            st = path.lstat()  # a link is never followed: bucket files are regular files
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bid} not found ({path})") from e
        except OSError as e:
            raise CorruptSnapshot(f"bucket snapshot {bid}: {path} cannot be read ({e.strerror or e})") from e
        if not stat.S_ISREG(st.st_mode):
            raise CorruptSnapshot(
                f"bucket snapshot {bid}: {path} is not a regular file (a link or directory)"
            )
        return st.st_size

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        """Unlinks the bucket file and fsyncs the directory; a missing bucket is success."""
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        path = self._file_for(bid)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as e:
            raise PersistFailed(e.errno or errno.EIO, f"{path}: delete failed ({e})") from e
        if self._fsync:
            try:
                fsync_dir(self._path)
            except OSError as e:
                raise PersistFailed(
                    e.errno or errno.EIO, f"{path}: directory fsync after delete failed ({e})"
                ) from e

    # -- inspection --------------------------------------------------------------------------------

    def list_bucket_snapshots(self) -> list[int]:
        """Ids of every bucket file in the directory, ascending (leaked ones included)."""
        self._check_started()
        return self._scan_ids()


if TYPE_CHECKING:

    def _conforms(storage: FileBucketSnapshotStorage) -> InspectableBucketSnapshotStorage:
        """Static check: the file store implements the whole protocol."""
        return storage
