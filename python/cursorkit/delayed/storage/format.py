"""The stored form of one PIP-195 bucket snapshot, shared by every snapshot storage.

Pulsar writes each immutable bucket snapshot as one BookKeeper ledger: entry 0 is the
``SnapshotMetadata``, entries 1..N the ``SnapshotSegment`` s (segment id = entry id, 1-based), and the
ledger's custom metadata names the bucket key, topic and cursor. Here a bucket is one immutable
blob (a file, an object) of the same shape (little endian; every part checksummed with CRC-32)::

    preamble   magic (8 bytes: 0x89 "CKBKT" CR LF) | version u16 | flags u16 (0) | header length u32
    header     bucket id u64 | bucket key, topic, cursor: each length u32 + UTF-8 | CRC u32
    records    entry 0 (metadata), entries 1..N (segments): payload | CRC u32
    table      count u32 (N + 1) | (offset u64, payload length u32) per entry | CRC u32
    footer     table offset u64 | segments u32 | file length u64 | "CKBKTEND" | CRC u32

The header CRC covers the preamble too; a record's CRC is seeded with (bucket id, entry id), so a
record copied from another bucket or another entry does not verify. A segment read goes footer →
offset table → just the bytes of the segments asked for; :class:`BucketReader` checks each part
as it reads it, whatever the bytes come from.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from cursorkit.errors import (
    BucketNotFound,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
    UnsupportedVersion,
)
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from cursorkit.proto.strict import parse

__all__ = [
    "FORMAT_VERSION",
    "MAX_ID",
    "BucketIndex",
    "BucketReader",
    "IdCounter",
    "bucket_id_of",
    "bucket_ids",
    "bucket_name",
    "bucket_id_arg",
    "bucket_records",
    "decode_id_mark",
    "encode_bucket",
    "encode_id_mark",
    "entry_id_arg",
    "read_metadata",
    "segment_range",
]

FORMAT_VERSION = 1
"""Version of the bucket format this build writes and reads."""
MAX_ID = (1 << 63) - 1
"""Largest bucket id (ids are non-negative signed 64-bit, as BookKeeper ledger ids)."""

_MAGIC = b"\x89CKBKT\r\n"
_END_MAGIC = b"CKBKTEND"
_MAX_PAYLOAD = (1 << 32) - 1
_PREAMBLE = struct.Struct("<8sHHI")  # magic, version, flags, header length
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SEED = struct.Struct("<QI")  # bucket id, entry id: the seed of a record's CRC
_ENTRY = struct.Struct("<QI")  # offset table entry: record offset, payload length
_FOOTER_BODY = struct.Struct("<QIQ8s")  # table offset, segments, file length, end magic
_FOOTER = _FOOTER_BODY.size + _U32.size
_MIN_HEADER = _U64.size + 3 * _U32.size
TAIL_BYTES = _FOOTER
"""Bytes of the footer, which ends every bucket."""


_BUCKET_NAME = re.compile(r"bucket-(\d{20})\.snap")


def bucket_name(bucket_id: int) -> str:
    """The file or object name of a stored bucket."""
    return f"bucket-{bucket_id:020d}.snap"


def bucket_id_of(name: str) -> int | None:
    """The id a bucket's file or object name holds (``None``: not a bucket's name)."""
    m = _BUCKET_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def bucket_ids(names: Iterable[str]) -> list[int]:
    """The ids of the bucket names among ``names``, ascending."""
    return sorted(i for i in map(bucket_id_of, names) if i is not None)


_ID_MAGIC = b"\x89CKBID\r\n"
_ID_BODY = struct.Struct("<8sHHQ")  # magic, version, flags, next id
_ID_BLOCK = 64


def encode_id_mark(mark: int) -> bytes:
    """An id high-water mark record: every id below ``mark`` may have been used."""
    body = _ID_BODY.pack(_ID_MAGIC, FORMAT_VERSION, 0, mark)
    return body + _U32.pack(zlib.crc32(body))


def decode_id_mark(data: bytes, where: str, limit: int) -> int:
    """The mark an id mark record holds (1..``limit``); damage is ``CorruptSnapshot`` naming ``where``."""
    if len(data) != _ID_BODY.size + _U32.size:
        raise CorruptSnapshot(f"{where}: {len(data)} bytes, expected {_ID_BODY.size + _U32.size}")
    magic, version, flags, mark = _ID_BODY.unpack_from(data)
    (crc,) = _U32.unpack_from(data, _ID_BODY.size)
    if magic != _ID_MAGIC or zlib.crc32(memoryview(data)[: _ID_BODY.size]) != crc:
        raise CorruptSnapshot(f"{where}: id mark fails its checksum at byte 0")
    if version != FORMAT_VERSION or flags != 0:
        raise UnsupportedVersion(f"{where}: id mark format {version}; this build reads {FORMAT_VERSION}")
    if not 1 <= mark <= limit:
        raise CorruptSnapshot(f"{where}: id mark {mark} out of range")
    return int(mark)


class IdCounter:
    """Bucket ids handed out in blocks below ``limit``; a block's mark is saved before any id in it.

    ``save(mark)`` makes the mark durable (or raises); ids from ``start`` up are never handed out twice
    as long as the next counter starts at the saved mark.
    """

    def __init__(self, start: int, limit: int, save: Callable[[int], None], *, reserved: int | None = None):
        self.next = start
        self.limit = limit
        self.reserved = start if reserved is None else reserved
        self._save = save

    def take(self, where: str) -> int:
        """The next id; ``PersistFailed`` (ENOSPC) when none is left, or what ``save`` raised."""
        if self.next >= self.limit:
            raise PersistFailed(errno.ENOSPC, f"{where}: bucket ids exhausted")
        if self.next >= self.reserved:
            mark = min(self.next + _ID_BLOCK, self.limit)
            self._save(mark)
            self.reserved = mark
        taken = self.next
        self.next += 1
        return taken


def bucket_id_arg(bucket_id: object) -> int:
    """A bucket id argument, checked: an int in 0..2^63-1."""
    if isinstance(bucket_id, bool) or not isinstance(bucket_id, int):
        raise InvalidInputType(f"bucket_id must be an int, got {type(bucket_id).__name__}")
    if not 0 <= bucket_id <= MAX_ID:
        raise InvalidArgument(f"bucket_id must be in 0..2^63-1, got {bucket_id}")
    return bucket_id


def entry_id_arg(name: str, value: object) -> int:
    """A segment entry id argument, checked to be an int (its range is the caller's to check)."""
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


def encode_bucket(bucket_id: int, texts: tuple[bytes, bytes, bytes], records: list[bytes]) -> bytes:
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
class BucketIndex:
    """A bucket file's verified footer and offset table."""

    segments: int
    table_offset: int
    table: bytes

    def entry(self, entry_id: int) -> tuple[int, int]:
        """(record offset, payload length) of one entry."""
        offset, length = _ENTRY.unpack_from(self.table, _U32.size + entry_id * _ENTRY.size)
        return offset, length


class BucketReader:
    """One stored bucket: positioned reads through ``pread``, each part verified as it is read.

    ``where`` names the file or object in messages; ``pread(n, offset)`` returns up to ``n`` bytes.
    """

    def __init__(self, where: str, bucket_id: int, size: int, pread: Callable[[int, int], bytes]) -> None:
        self.path = where
        self.bucket_id = bucket_id
        self.size = size
        self._pread = pread

    @classmethod
    @contextlib.contextmanager
    def of_file(cls, path: Path, bucket_id: int) -> Iterator[BucketReader]:
        """A reader of a local bucket file; ``BucketNotFound`` when there is none."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise BucketNotFound(f"bucket snapshot {bucket_id} not found ({path})") from e
        try:
            yield cls(str(path), bucket_id, os.fstat(fd).st_size, lambda n, off: os.pread(fd, n, off))
        finally:
            os.close(fd)

    def corrupt(self, offset: int, what: str) -> CorruptSnapshot:
        """A ``CorruptSnapshot`` naming this bucket, the byte offset and what failed there."""
        return CorruptSnapshot(f"{self.path}: {what} at byte {offset}")

    def read(self, n: int, offset: int, what: str) -> bytes:
        """Exactly ``n`` bytes at ``offset``, or ``CorruptSnapshot`` when the bucket ends first."""
        data = self._pread(n, offset)
        if len(data) != n:
            raise self.corrupt(offset, f"{what} cut short ({len(data)} of {n} bytes)")
        return data

    def index(self) -> BucketIndex:
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
        return BucketIndex(segments, table_offset, table)

    def check_entries(self, index: BucketIndex, first: int, last: int) -> tuple[int, int]:
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

    def records(self, index: BucketIndex, first: int, last: int) -> list[bytes]:
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

    def header(self, index: BucketIndex) -> tuple[str, str, str]:
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


def bucket_records(
    metadata: SnapshotMetadata, segments: Sequence[bytes], bucket_key: str, topic: str, cursor: str
) -> tuple[tuple[bytes, bytes, bytes], list[bytes]]:
    """The checked header texts and records (metadata first) of a bucket to store.

    An empty bucket is refused (``InvalidArgument``), as Pulsar never writes one; so is metadata
    that does not describe exactly the segments given.
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
    return texts, records


def read_metadata(reader: BucketReader, index: BucketIndex) -> SnapshotMetadata:
    """Entry 0, after verifying the header and the metadata record against the offset table."""
    reader.header(index)
    (payload,) = reader.records(index, 0, 0)
    start, _ = index.entry(0)
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


def segment_range(first_segment_entry_id: object, last_segment_entry_id: object) -> tuple[int, int]:
    """Checked ``first..last`` of a segment read (``1 <= first <= last``; ``InvalidArgument`` otherwise)."""
    first = entry_id_arg("first_segment_entry_id", first_segment_entry_id)
    last = entry_id_arg("last_segment_entry_id", last_segment_entry_id)
    if first < 1 or first > last:
        raise InvalidArgument(f"segment range {first}..{last} is not 1 <= first <= last")
    return first, last
