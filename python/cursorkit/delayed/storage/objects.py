"""PIP-195 bucket snapshots on an object store: one immutable object per bucket, read by byte range.

``ObjectStoreBucketSnapshotStorage("s3://bucket/prefix", endpoint=..., access_key=..., ...)`` is a
:class:`~cursorkit.delayed.storage.api.BucketSnapshotStorage` on any S3-compatible store (or any
``pyarrow.fs`` location), the stand-in for Pulsar's one BookKeeper ledger per bucket. Each bucket is
``bucket-<id:020d>.snap`` in the checksummed format of :mod:`cursorkit.delayed.storage.format`,
stored with one PUT (a reader sees all of it or none). A segment read is one ranged GET (after the
object's footer and offset table, read once and kept: objects never change).

**Ids** are ``tag << 40 | n``. With ``owner_epoch`` (the epoch of the
:class:`~cursorkit.ackstate.store.zookeeper.ZkCursorStore` that holds the bucket keys) the tag is that
epoch, unique to one owner, so two brokers never pick the same id; ``n`` comes from a high-water
mark object of that tag (``ids/tag-<tag>``), written in blocks before any id under it is handed out,
so the owner never reuses an id, even after deletes and restarts. Without ``owner_epoch`` the tag is
random (2^21 values), drawn anew at each :meth:`start`.

Damage is reported as by the file storage: ``CorruptSnapshot`` naming the object and byte, and
``BucketNotFound`` for a missing bucket; a store that does not answer is ``StoreUnavailable``.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cursorkit.delayed.storage.format import (
    BucketIndex,
    BucketReader,
    IdCounter,
    bucket_id_arg,
    bucket_ids,
    bucket_name,
    bucket_records,
    decode_id_mark,
    encode_bucket,
    encode_id_mark,
)
from cursorkit.delayed.storage.reads import BucketReads
from cursorkit.errors import BucketNotFound, InvalidArgument, InvalidInputType
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from cursorkit.stores.objects import ObjectStore

if TYPE_CHECKING:
    from cursorkit.delayed.storage.api import InspectableBucketSnapshotStorage

__all__ = ["ObjectStoreBucketSnapshotStorage"]

_COUNTER_BITS = 40
_MAX_TAG = (1 << 22) - 1
_RANDOM_TAGS = (1 << 21, 1 << 22)
_TAIL_CHUNK = 64 * 1024
_HEAD_CHUNK = 8 * 1024


@dataclass(slots=True)
class _Known:
    """What is kept of a bucket object once read: its size and verified footer and offset table."""

    size: int
    index: BucketIndex


class _Chunked:
    """Reads of one object that serve the footer, table and header from two ranged GETs."""

    def __init__(self, size: int, read: Any) -> None:
        self.size = size
        self._read = read
        self._tail: tuple[int, bytes] | None = None
        self._head: bytes | None = None

    def pread(self, n: int, offset: int) -> bytes:
        end = offset + n
        tail_start = max(0, self.size - _TAIL_CHUNK)
        if offset >= tail_start:
            if self._tail is None:
                self._tail = (tail_start, self._read(self.size - tail_start, tail_start))
            start, data = self._tail
            return data[offset - start : end - start]
        if end <= _HEAD_CHUNK:
            if self._head is None:
                self._head = self._read(min(_HEAD_CHUNK, self.size), 0)
            return self._head[offset:end]
        got: bytes = self._read(n, offset)
        return got


class ObjectStoreBucketSnapshotStorage(BucketReads):
    """PIP-195 bucket snapshots under an object-store prefix: immutable, checksummed, ranged reads.

    ``location`` is an :class:`~cursorkit.stores.objects.ObjectStore` or its location
    (``s3://bucket/prefix``); other keyword arguments are its settings (``endpoint``,
    ``access_key``, ``secret_key``, ``region``, ...). Call :meth:`start` (or use it as a context
    manager) first. Thread-safe.
    """

    def __init__(
        self, location: str | ObjectStore, *, owner_epoch: int | None = None, **options: Any
    ) -> None:
        if isinstance(location, ObjectStore):
            if options:
                raise InvalidArgument("settings go to the ObjectStore, not beside one")
            self._objects = location
        elif isinstance(location, str):
            self._objects = ObjectStore(location, **options)
        else:
            raise InvalidInputType(f"location must be a str or ObjectStore, got {type(location).__name__}")
        epoch: object = owner_epoch
        if epoch is not None and (
            isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 < epoch < 1 << 21
        ):
            raise InvalidArgument(f"owner_epoch must be an int in 1..2^21-1, got {owner_epoch!r}")
        self._owner_epoch = owner_epoch
        self._lock = threading.Lock()
        self._state = "new"
        self._tag = 0
        self._ids = IdCounter(1, 1 << _COUNTER_BITS, self._save_mark)  # replaced by start()
        self._known: dict[int, _Known] = {}

    @property
    def objects(self) -> ObjectStore:
        """The object store and prefix holding the buckets."""
        return self._objects

    @property
    def uri(self) -> str:
        """The prefix's location."""
        return self._objects.uri

    def __repr__(self) -> str:
        return f"ObjectStoreBucketSnapshotStorage({self._objects.uri!r}, {self._state})"

    @staticmethod
    def _key(bucket_id: int) -> str:
        return bucket_name(bucket_id)

    def _check_started(self) -> None:
        if self._state != "started":
            state = "closed" if self._state == "closed" else "not started (call start())"
            raise InvalidArgument(f"bucket snapshot storage {self._objects.uri} is {state}")

    # -- lifetime ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Lists the stored buckets and picks this writer's id tag; idempotent while started."""
        with self._lock:
            if self._state == "started":
                return
            if self._state == "closed":
                raise InvalidArgument(f"bucket snapshot storage {self._objects.uri} is closed")
            ids = self._scan_ids()
            tag = self._owner_epoch or secrets.randbelow(_RANDOM_TAGS[1] - _RANDOM_TAGS[0]) + _RANDOM_TAGS[0]
            used = [i & ((1 << _COUNTER_BITS) - 1) for i in ids if i >> _COUNTER_BITS == tag]
            self._tag = tag
            start = max(used, default=0) + 1
            if self._owner_epoch is None:  # a random tag: no mark, the whole counter is ours
                self._ids = IdCounter(start, 1 << _COUNTER_BITS, self._save_mark, reserved=1 << _COUNTER_BITS)
            else:
                self._ids = IdCounter(max(start, self._read_mark()), 1 << _COUNTER_BITS, self._save_mark)
            self._state = "started"

    def close(self) -> None:
        """Every later call except ``close`` raises ``InvalidArgument``."""
        with self._lock:
            self._state = "closed"
            self._known.clear()

    def __enter__(self) -> ObjectStoreBucketSnapshotStorage:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scan_ids(self) -> list[int]:
        return bucket_ids(item.key for item in self._objects.list())

    def _mark_key(self) -> str:
        return f"ids/tag-{self._tag:07d}"

    def _read_mark(self) -> int:
        """The id counter every id of this tag is below (1 when the tag has none)."""
        try:
            data = self._objects.get(self._mark_key())
        except FileNotFoundError:
            return 1
        return decode_id_mark(data, f"{self._objects.uri}/{self._mark_key()}", 1 << _COUNTER_BITS)

    def _save_mark(self, mark: int) -> None:
        self._objects.put(self._mark_key(), encode_id_mark(mark))

    def _allocate_id(self) -> int:
        with self._lock:
            self._check_started()
            return self._tag << _COUNTER_BITS | self._ids.take(f"{self._objects.uri} (id tag {self._tag})")

    # -- the BucketSnapshotStorage protocol -------------------------------------------------------

    def create_bucket_snapshot(
        self,
        metadata: SnapshotMetadata,
        segments: Sequence[bytes],
        bucket_key: str,
        topic: str,
        cursor: str,
    ) -> int:
        """Stores a new bucket object with one PUT and returns its id.

        Arguments as :meth:`FileBucketSnapshotStorage.create_bucket_snapshot`; a failed PUT raises
        ``PersistFailed`` and leaves no object (its id stays unused).
        """
        texts, records = bucket_records(metadata, segments, bucket_key, topic, cursor)
        bucket_id = self._allocate_id()
        data = encode_bucket(bucket_id, texts, records)
        self._objects.put(self._key(bucket_id), data)
        mem = BucketReader(
            self._objects.uri_of(self._key(bucket_id)), bucket_id, len(data), self._slicer(data)
        )
        with self._lock:
            self._known[bucket_id] = _Known(len(data), mem.index())
        return bucket_id

    @staticmethod
    def _slicer(data: bytes) -> Any:
        return lambda n, off: data[off : off + n]

    @contextlib.contextmanager
    def _reader(
        self, bucket_id: object, *, direct: bool = False
    ) -> Iterator[tuple[BucketReader, BucketIndex]]:
        """A verified reader of one bucket object and its offset table (read once, then kept).

        ``direct``: each read is its own ranged GET (segment reads, once the table is known);
        otherwise the footer, table and header come from one GET at each end of the object.
        """
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        key = self._key(bid)
        try:
            with self._objects.open_ranged(key) as (size, read):
                known = self._known.get(bid)
                fresh = known is None or known.size != size
                pread = read if direct and not fresh else _Chunked(size, read).pread
                reader = BucketReader(self._objects.uri_of(key), bid, size, pread)
                if known is None or known.size != size:
                    known = _Known(size, reader.index())
                    with self._lock:
                        self._known[bid] = known
                yield reader, known.index
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bid} not found ({self._objects.uri}/{key})") from e

    def get_bucket_snapshot_length(self, bucket_id: int) -> int:
        """Stored bytes of the bucket object."""
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        known = self._known.get(bid)
        if known is not None:
            return known.size
        try:
            return self._objects.size(self._key(bid))
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bid} not found ({self._objects.uri})") from e

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        """Deletes the bucket object; a missing bucket is success."""
        bid = bucket_id_arg(bucket_id)
        self._check_started()
        self._objects.delete(self._key(bid))
        with self._lock:
            self._known.pop(bid, None)

    # -- inspection --------------------------------------------------------------------------------

    def list_bucket_snapshots(self) -> list[int]:
        """Ids of every bucket object under the prefix, ascending (leaked ones included)."""
        self._check_started()
        return self._scan_ids()


if TYPE_CHECKING:

    def _conforms(storage: ObjectStoreBucketSnapshotStorage) -> InspectableBucketSnapshotStorage:
        """Static check: the object storage implements the whole protocol."""
        return storage
