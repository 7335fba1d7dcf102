"""Durable storage of PIP-195 bucket snapshots: the protocol the bucket tracker uses and a file store.

Pulsar writes each immutable bucket snapshot as one BookKeeper ledger: entry 0 is the
``SnapshotMetadata``, entries 1..N the ``SnapshotSegment`` s (segment id = entry id, 1-based), and the
ledger's custom metadata names the bucket key, topic and cursor. :class:`FileBucketSnapshotStorage`
keeps the same shape in one immutable file per bucket, written atomically (temp, fsync, rename, fsync
directory), so a reader never sees half a bucket.

File layout (little endian; every part checksummed with CRC-32)::

    preamble   magic (8 bytes: 0x89 "CKBKT" CR LF) | version u16 | flags u16 (0) | header length u32
    header     bucket id u64 | bucket key, topic, cursor: each length u32 + UTF-8 | CRC u32
    records    entry 0 (metadata), entries 1..N (segments): payload | CRC u32
    table      count u32 (N + 1) | (offset u64, payload length u32) per entry | CRC u32
    footer     table offset u64 | segments u32 | file length u64 | "CKBKTEND" | CRC u32

The header CRC covers the preamble too; a record's CRC is seeded with (bucket id, entry id), so a
record copied from another file or another entry does not verify. A segment read goes footer →
offset table → just the bytes of the segments asked for. Ids come from a high-water mark
(``next-bucket-id``) that is persisted, in blocks, before any id under it is handed out, so an id is
never reused in a directory, even after deletes and restarts: a stale cursor property can at worst
name a missing bucket, never a different one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from google.protobuf.message import DecodeError

from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
    UnsupportedVersion,
)
from cursorkit.fsio import Opener, atomic_write, fsync_dir, temp_target
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from cursorkit.proto.strict import parse

__all__ = [
    "FORMAT_VERSION",
    "NEXT_ID_FILE",
    "BucketInfo",
    "BucketSnapshotStorage",
    "FileBucketSnapshotStorage",
    "InspectableBucketSnapshotStorage",
]

FORMAT_VERSION = 1
"""Version of the bucket file and id-mark formats this build writes and reads."""

NEXT_ID_FILE = "next-bucket-id"
"""The id high-water mark file: every id below the value it holds may have been used."""

_MAGIC = b"\x89CKBKT\r\n"
_END_MAGIC = b"CKBKTEND"
_ID_MAGIC = b"\x89CKBID\r\n"
_BUCKET_NAME = re.compile(r"bucket-(\d{20})\.snap")
_ID_BLOCK = 64
_MAX_ID = (1 << 63) - 1
_MAX_PAYLOAD = (1 << 32) - 1

_PREAMBLE = struct.Struct("<8sHHI")  # magic, version, flags, header length
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SEED = struct.Struct("<QI")  # bucket id, entry id: the seed of a record's CRC
_ENTRY = struct.Struct("<QI")  # offset table entry: record offset, payload length
_FOOTER_BODY = struct.Struct("<QIQ8s")  # table offset, segments, file length, end magic
_FOOTER = _FOOTER_BODY.size + _U32.size
_ID_BODY = struct.Struct("<8sHHQ")  # magic, version, flags, next id
_MIN_HEADER = _U64.size + 3 * _U32.size


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketInfo:
    """What a stored bucket snapshot is, without its indexes: found by scanning for leaked snapshots.

    Pulsar finds a leaked bucket ledger by its custom metadata; these are the same fields.
    """

    bucket_id: int
    bucket_key: str
    """The bucket's cursor-property key (``#pulsar.internal.delayed.bucket_<start>_<end>``)."""
    topic: str
    cursor: str
    segments: int
    """Number of segments (entries 1..segments)."""
    length_bytes: int
    """Stored bytes of the snapshot (what ``get_bucket_snapshot_length`` returns)."""


class BucketSnapshotStorage(Protocol):
    """What the bucket tracker needs of a snapshot store (Pulsar's ``BucketSnapshotStorage``, synchronous)."""

    def start(self) -> None:
        """Makes the storage usable (Pulsar's ``start``)."""
        ...

    def create_bucket_snapshot(
        self,
        metadata: SnapshotMetadata,
        segments: Sequence[bytes],
        bucket_key: str,
        topic: str,
        cursor: str,
    ) -> int:
        """Stores a bucket durably: metadata plus encoded ``SnapshotSegment`` s; returns its new unique id."""
        ...

    def get_bucket_snapshot_metadata(self, bucket_id: int) -> SnapshotMetadata:
        """Entry 0 of a bucket; ``BucketNotFound`` when it is not stored."""
        ...

    def get_bucket_snapshot_segment(
        self, bucket_id: int, first_segment_entry_id: int, last_segment_entry_id: int
    ) -> list[bytes]:
        """Encoded segments ``first..last`` (inclusive, 1-based, cut at the last); ``[]`` past the end."""
        ...

    def get_bucket_snapshot_length(self, bucket_id: int) -> int:
        """Stored bytes of a bucket snapshot."""
        ...

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        """Deletes a bucket durably; deleting a missing one succeeds (every step stays idempotent)."""
        ...

    def close(self) -> None:
        """Releases the storage; later calls fail."""
        ...


class InspectableBucketSnapshotStorage(BucketSnapshotStorage, Protocol):
    """A snapshot store that can also list what it holds: to find leaked snapshots, and for inspection."""

    def list_bucket_snapshots(self) -> list[int]:
        """Ids of every stored bucket snapshot, ascending."""
        ...

    def bucket_info(self, bucket_id: int) -> BucketInfo:
        """Who a stored bucket belongs to and how big it is."""
        ...


def _bucket_id_arg(bucket_id: object) -> int:
    if isinstance(bucket_id, bool) or not isinstance(bucket_id, int):
        raise InvalidInputType(f"bucket_id must be an int, got {type(bucket_id).__name__}")
    if not 0 <= bucket_id <= _MAX_ID:
        raise InvalidArgument(f"bucket_id must be in 0..2^63-1, got {bucket_id}")
    return bucket_id


def _entry_id_arg(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputType(f"{name} must be an int, got {type(value).__name__}")
    return value


def _text_arg(name: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise InvalidInputType(f"{name} must be a str, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{name} is not encodable as UTF-8 ({e})") from e
    if len(raw) > _MAX_PAYLOAD:
        raise InvalidArgument(f"{name} is too long ({len(raw)} bytes)")
    return raw


def _segments_arg(segments: object) -> list[bytes]:
    if isinstance(segments, str | bytes | bytearray | memoryview) or not isinstance(segments, Sequence):
        raise InvalidInputType(
            f"segments must be a sequence of encoded SnapshotSegment bytes, got {type(segments).__name__}"
        )
    out: list[bytes] = []
    for i, seg in enumerate(segments, start=1):
        if isinstance(seg, bytes):
            out.append(seg)
        elif isinstance(seg, bytearray | memoryview):
            out.append(bytes(seg))
        else:
            raise InvalidInputType(f"segment {i} must be bytes, got {type(seg).__name__}")
        if len(out[-1]) > _MAX_PAYLOAD:
            raise InvalidArgument(f"segment {i} is too large ({len(out[-1])} bytes)")
    return out


def _seed(bucket_id: int, entry_id: int) -> int:
    return zlib.crc32(_SEED.pack(bucket_id, entry_id))


def _encode_bucket(bucket_id: int, texts: tuple[bytes, bytes, bytes], records: list[bytes]) -> bytes:
    """The whole file of one bucket; ``records[0]`` is the metadata, the rest the segments."""
    head = bytearray(_U64.pack(bucket_id))
    for raw in texts:
        head += _U32.pack(len(raw))
        head += raw
    pre = _PREAMBLE.pack(_MAGIC, FORMAT_VERSION, 0, len(head))
    parts: list[bytes | bytearray] = [pre, head, _U32.pack(zlib.crc32(head, zlib.crc32(pre)))]
    offset = len(pre) + len(head) + _U32.size
    table = bytearray(_U32.pack(len(records)))
    for entry_id, payload in enumerate(records):
        parts.append(payload)
        parts.append(_U32.pack(zlib.crc32(payload, _seed(bucket_id, entry_id))))
        table += _ENTRY.pack(offset, len(payload))
        offset += len(payload) + _U32.size
    table += _U32.pack(zlib.crc32(table))
    size = offset + len(table) + _FOOTER
    body = _FOOTER_BODY.pack(offset, len(records) - 1, size, _END_MAGIC)
    parts += [table, body, _U32.pack(zlib.crc32(body))]
    return b"".join(parts)


def _table_len(entries: int) -> int:
    return _U32.size + entries * _ENTRY.size + _U32.size


@dataclass(slots=True)
class _Index:
    """A bucket file's verified footer and offset table."""

    segments: int
    table_offset: int
    table: bytes

    def entry(self, entry_id: int) -> tuple[int, int]:
        """(record offset, payload length) of one entry."""
        offset, length = _ENTRY.unpack_from(self.table, _U32.size + entry_id * _ENTRY.size)
        return offset, length


class _Reader:
    """One open bucket file: positioned reads, each part verified as it is read."""

    def __init__(self, path: Path, bucket_id: int) -> None:
        self.path = path
        self.bucket_id = bucket_id
        try:
            self.fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bucket_id} not found ({path})") from e
        try:
            self.size = os.fstat(self.fd).st_size
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        os.close(self.fd)

    def corrupt(self, offset: int, what: str) -> CorruptSnapshot:
        return CorruptSnapshot(f"{self.path}: {what} at byte {offset}")

    def read(self, n: int, offset: int, what: str) -> bytes:
        data = os.pread(self.fd, n, offset)
        if len(data) != n:
            raise self.corrupt(offset, f"{what} cut short ({len(data)} of {n} bytes)")
        return data

    def index(self) -> _Index:
        """Footer and offset table, checked against each other and the file size."""
        min_size = _PREAMBLE.size + _MIN_HEADER + _U32.size + _table_len(1) + _FOOTER
        if self.size < min_size:
            raise self.corrupt(0, f"file of {self.size} bytes is shorter than any bucket snapshot")
        at = self.size - _FOOTER
        footer = self.read(_FOOTER, at, "footer")
        body = footer[: _FOOTER_BODY.size]
        (crc,) = _U32.unpack_from(footer, _FOOTER_BODY.size)
        table_offset, segments, length, magic = _FOOTER_BODY.unpack(body)
        if magic != _END_MAGIC or zlib.crc32(body) != crc:
            raise self.corrupt(at, "footer fails its checksum (file truncated or damaged)")
        if length != self.size:
            raise self.corrupt(at, f"footer records {length} bytes but the file has {self.size}")
        table_len = _table_len(segments + 1)
        if table_offset + table_len != at or table_offset < _PREAMBLE.size + _MIN_HEADER + _U32.size:
            raise self.corrupt(at, "footer's table offset does not fit the file")
        table = self.read(table_len, table_offset, "offset table")
        (count,) = _U32.unpack_from(table, 0)
        (crc,) = _U32.unpack_from(table, table_len - _U32.size)
        if zlib.crc32(memoryview(table)[: table_len - _U32.size]) != crc or count != segments + 1:
            raise self.corrupt(table_offset, "offset table fails its checksum")
        return _Index(segments, table_offset, table)

    def check_entries(self, index: _Index, first: int, last: int) -> tuple[int, int]:
        """Byte span of entries ``first..last``, after checking they lie back to back inside the file."""
        start, _ = index.entry(first)
        end = start
        for entry_id in range(first, last + 1):
            offset, length = index.entry(entry_id)
            if offset != end:
                raise self.corrupt(index.table_offset, f"offset table entry {entry_id} is out of place")
            end = offset + length + _U32.size
        if start < _PREAMBLE.size + _MIN_HEADER + _U32.size or end > index.table_offset:
            raise self.corrupt(index.table_offset, "offset table points outside the records")
        return start, end

    def records(self, index: _Index, first: int, last: int) -> list[bytes]:
        """Payloads of entries ``first..last`` (one read), each checked against its CRC."""
        start, end = self.check_entries(index, first, last)
        data = self.read(end - start, start, "records")
        view = memoryview(data)
        out: list[bytes] = []
        for entry_id in range(first, last + 1):
            offset, length = index.entry(entry_id)
            lo = offset - start
            payload = view[lo : lo + length]
            (crc,) = _U32.unpack_from(data, lo + length)
            if zlib.crc32(payload, _seed(self.bucket_id, entry_id)) != crc:
                what = "metadata record" if entry_id == 0 else f"segment {entry_id} record"
                raise self.corrupt(offset, f"{what} fails its checksum")
            out.append(payload.tobytes())
        return out

    def header(self, index: _Index) -> tuple[str, str, str]:
        """Bucket key, topic and cursor, after checking the preamble, header CRC and bucket id."""
        first, _ = index.entry(0)
        pre = self.read(_PREAMBLE.size, 0, "preamble")
        magic, version, flags, head_len = _PREAMBLE.unpack(pre)
        if magic != _MAGIC:
            raise self.corrupt(0, "bad magic (not a bucket snapshot)")
        if _PREAMBLE.size + head_len + _U32.size != first or head_len < _MIN_HEADER:
            raise self.corrupt(_PREAMBLE.size, f"header length {head_len} does not match the offset table")
        rest = self.read(head_len + _U32.size, _PREAMBLE.size, "header")
        head = memoryview(rest)[:head_len]
        (crc,) = _U32.unpack_from(rest, head_len)
        if zlib.crc32(head, zlib.crc32(pre)) != crc:
            raise self.corrupt(0, "header fails its checksum")
        if version != FORMAT_VERSION or flags != 0:
            raise UnsupportedVersion(
                f"{self.path}: bucket snapshot format {version} (flags {flags}); "
                f"this build reads {FORMAT_VERSION}"
            )
        (stored_id,) = _U64.unpack_from(head, 0)
        if stored_id != self.bucket_id:
            raise self.corrupt(_PREAMBLE.size, f"header holds bucket {stored_id}, not {self.bucket_id}")
        pos = _U64.size
        texts: list[str] = []
        for _ in range(3):
            if pos + _U32.size > head_len:
                raise self.corrupt(_PREAMBLE.size + pos, "header field runs past the header")
            (n,) = _U32.unpack_from(head, pos)
            pos += _U32.size
            if pos + n > head_len:
                raise self.corrupt(_PREAMBLE.size + pos, "header field runs past the header")
            try:
                texts.append(bytes(head[pos : pos + n]).decode("utf-8"))
            except UnicodeDecodeError as e:
                raise self.corrupt(_PREAMBLE.size + pos, "header field is not UTF-8") from e
            pos += n
        if pos != head_len:
            raise self.corrupt(_PREAMBLE.size + pos, "unexpected bytes at the end of the header")
        return texts[0], texts[1], texts[2]


class FileBucketSnapshotStorage:
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
        self._next_id = 0
        self._reserved = 0

    @property
    def path(self) -> Path:
        """The directory holding the bucket files."""
        return self._path

    def _file_for(self, bucket_id: int) -> Path:
        return self._path / f"bucket-{bucket_id:020d}.snap"

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
            self._next_id = self._reserved = mark
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
            if target is not None and (target == NEXT_ID_FILE or _BUCKET_NAME.fullmatch(target)):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                removed = True
        if removed and self._fsync:
            fsync_dir(self._path)

    def _scan_ids(self) -> list[int]:
        ids = []
        for p in self._path.iterdir():
            m = _BUCKET_NAME.fullmatch(p.name)
            if m:
                ids.append(int(m.group(1)))
        ids.sort()
        return ids

    # -- ids ---------------------------------------------------------------------------------------

    def _read_mark(self) -> int | None:
        path = self._path / NEXT_ID_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != _ID_BODY.size + _U32.size:
            raise CorruptSnapshot(f"{path}: {len(data)} bytes, expected {_ID_BODY.size + _U32.size}")
        magic, version, flags, mark = _ID_BODY.unpack_from(data)
        (crc,) = _U32.unpack_from(data, _ID_BODY.size)
        if magic != _ID_MAGIC or zlib.crc32(memoryview(data)[: _ID_BODY.size]) != crc:
            raise CorruptSnapshot(f"{path}: id mark fails its checksum at byte 0")
        if version != FORMAT_VERSION or flags != 0:
            raise UnsupportedVersion(f"{path}: id mark format {version}; this build reads {FORMAT_VERSION}")
        if not 1 <= mark <= _MAX_ID + 1:
            raise CorruptSnapshot(f"{path}: id mark {mark} out of range")
        return int(mark)

    def _allocate_id(self) -> int:
        """A never-used id; the mark covering it is durable before it is returned."""
        with self._lock:
            self._check_started()
            if self._next_id > _MAX_ID:
                raise PersistFailed(errno.ENOSPC, f"{self._path}: bucket ids exhausted")
            if self._next_id >= self._reserved:
                mark = min(self._next_id + _ID_BLOCK, _MAX_ID + 1)
                body = _ID_BODY.pack(_ID_MAGIC, FORMAT_VERSION, 0, mark)
                atomic_write(
                    self._path / NEXT_ID_FILE,
                    body + _U32.pack(zlib.crc32(body)),
                    opener=self._opener,
                    sync=self._fsync,
                )
                self._reserved = mark
            bucket_id = self._next_id
            self._next_id += 1
            return bucket_id

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
        if not isinstance(metadata, SnapshotMetadata):
            raise InvalidInputType(f"metadata must be a SnapshotMetadata, got {type(metadata).__name__}")
        records = _segments_arg(segments)
        texts = (_text_arg("bucket_key", bucket_key), _text_arg("topic", topic), _text_arg("cursor", cursor))
        if not records:
            raise InvalidArgument("a bucket snapshot needs at least one segment")
        if len(metadata.metadata_list) != len(records):
            raise InvalidArgument(
                f"metadata describes {len(metadata.metadata_list)} segments but {len(records)} were given"
            )
        if not metadata.IsInitialized():
            raise InvalidArgument("metadata is missing required fields (max/min_schedule_timestamp)")
        meta = metadata.SerializeToString(deterministic=True)
        if len(meta) > _MAX_PAYLOAD:
            raise InvalidArgument(f"metadata is too large ({len(meta)} bytes)")
        if len(records) + 1 > _MAX_PAYLOAD:
            raise InvalidArgument(f"too many segments ({len(records)})")
        records.insert(0, meta)
        bucket_id = self._allocate_id()
        path = self._file_for(bucket_id)
        try:
            atomic_write(
                path, _encode_bucket(bucket_id, texts, records), opener=self._opener, sync=self._fsync
            )
        except PersistFailed:
            # Only the directory fsync can fail after the rename: take the file back out.
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            raise
        return bucket_id

    def _open(self, bucket_id: object) -> _Reader:
        bid = _bucket_id_arg(bucket_id)
        self._check_started()
        return _Reader(self._file_for(bid), bid)

    def get_bucket_snapshot_metadata(self, bucket_id: int) -> SnapshotMetadata:
        """Entry 0, after verifying the header, the offset table and the metadata record."""
        reader = self._open(bucket_id)
        try:
            index = reader.index()
            reader.header(index)
            (payload,) = reader.records(index, 0, 0)
            start, _ = index.entry(0)
        finally:
            reader.close()
        try:
            metadata = parse(SnapshotMetadata, payload)
        except DecodeError as e:
            raise reader.corrupt(start, f"metadata record does not decode ({e})") from e
        if len(metadata.metadata_list) != index.segments:
            raise reader.corrupt(
                start,
                f"metadata describes {len(metadata.metadata_list)} segments, the file holds {index.segments}",
            )
        return metadata

    def get_bucket_snapshot_segment(
        self, bucket_id: int, first_segment_entry_id: int, last_segment_entry_id: int
    ) -> list[bytes]:
        """Encoded segments ``first..last`` (inclusive, 1-based), reading only their bytes.

        ``last`` past the end is cut to the last segment; ``first`` past the end gives ``[]`` (how
        the tracker notices a bucket is used up). ``first < 1`` or ``first > last``: ``InvalidArgument``.
        """
        first = _entry_id_arg("first_segment_entry_id", first_segment_entry_id)
        last = _entry_id_arg("last_segment_entry_id", last_segment_entry_id)
        if first < 1 or first > last:
            raise InvalidArgument(f"segment range {first}..{last} is not 1 <= first <= last")
        reader = self._open(bucket_id)
        try:
            index = reader.index()
            if first > index.segments:
                return []
            return reader.records(index, first, min(last, index.segments))
        finally:
            reader.close()

    def get_bucket_snapshot_length(self, bucket_id: int) -> int:
        """Stored bytes of the bucket file (header, records, table and footer)."""
        bid = _bucket_id_arg(bucket_id)
        self._check_started()
        path = self._file_for(bid)
        try:
            return path.stat().st_size
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bid} not found ({path})") from e

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        """Unlinks the bucket file and fsyncs the directory; a missing bucket is success."""
        bid = _bucket_id_arg(bucket_id)
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

    def bucket_info(self, bucket_id: int) -> BucketInfo:
        """Owner fields and size of a bucket, after verifying its header, offset table and footer."""
        reader = self._open(bucket_id)
        try:
            index = reader.index()
            key, topic, cursor = reader.header(index)
        finally:
            reader.close()
        return BucketInfo(
            bucket_id=reader.bucket_id,
            bucket_key=key,
            topic=topic,
            cursor=cursor,
            segments=index.segments,
            length_bytes=reader.size,
        )


if TYPE_CHECKING:

    def _conforms(storage: FileBucketSnapshotStorage) -> InspectableBucketSnapshotStorage:
        """Static check: the file store implements the whole protocol."""
        return storage
