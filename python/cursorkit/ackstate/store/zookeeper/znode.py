"""The bytes of a cursor znode and of the state object beside it.

A cursor znode is Pulsar's ``ManagedCursorInfo`` with ``cursorsLedgerId = -1`` (the ack state lives
in the record): mark-delete, the first ``managedLedgerMaxUnackedRangesToPersistInMetadataStore``
ranges, partial batches, numeric properties, ``lastActive`` and the string ``cursorProperties``, so
Pulsar's own parser reads it. cursorkit's record (``CursorkitState``: owner epoch, write sequence,
where the whole state is) travels in field 100, which Pulsar does not use and skips.

When the state is more than the znode holds, all of it goes to an immutable *state object* first::

    magic (8 bytes: 0x89 "CKZST" CR LF) | version u16 | flags u16 (0) | owner epoch u64 | sequence u64
    | znode path length u32 | znode path UTF-8 | sealed compact CursorSnapshot (CRC-32 inside)

and the znode names it with its size and SHA-256. Reading Pulsar's compressed form
(``ManagedCursorInfoMetadata`` header, magic 0x4778) is supported for NONE and ZLIB.

**Compression rule.** A record is written plain when it fits the znode's byte budget, else in
Pulsar's ZLIB form (which every Pulsar broker reads, whatever its own compression setting) when
that fits; only when neither does are ranges cut. A record over the budget is never sent:
ZooKeeper answers a request past its ``jute.maxbuffer`` by dropping the connection, and with it
the calls of every store sharing the session.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate import persist
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.errors import BudgetExceeded, CorruptSnapshot, InvalidArgument, UnsupportedVersion
from cursorkit.proto import cursor_znode_pb2 as zpb
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.proto.strict import parse

__all__ = [
    "OBJECT_MAGIC",
    "ZNODE_FORMAT",
    "CursorState",
    "EncodedZnode",
    "ZnodeContent",
    "cursor_info_bytes",
    "encode_znode",
    "fit_record",
    "object_id",
    "object_key",
    "read_state_object",
    "pulsar_zlib",
    "read_znode",
    "state_object",
]

ZNODE_FORMAT = 1
"""Version of ``CursorkitState`` and of the state object this build writes and reads."""
OBJECT_MAGIC = b"\x89CKZST\r\n"
_OBJECT_HEAD = struct.Struct("<8sHHQQI")  # magic, version, flags, epoch, sequence, path length
_PULSAR_MAGIC = 0x4778
_COMPRESSED_HEAD = struct.Struct(">hi")  # magic, metadata length (Java's writeShort / writeInt)
_MAX_UNCOMPRESSED = 64 * 1024 * 1024
_ZLIB = ml.ZLIB
_PACK_TRIES = 4
_BATCH_SIZES_ROOM = 64
_OBJECT_NAME = re.compile(r"(\d{20})-(\d{20})\.state")


@dataclass(frozen=True, slots=True)
class CursorState:
    """A cursor's persisted ack state: what a store recovers a ``Cursor`` from."""

    mark_delete: Position
    acked: RangeSet
    batches: list[persist.BatchRow]
    properties: dict[str, int]


@dataclass(frozen=True, slots=True)
class ZnodeContent:
    """A cursor znode, decoded."""

    info: ml.ManagedCursorInfo
    """Pulsar's record as stored (:attr:`state` holds its ack state decoded)."""
    cursorkit: zpb.CursorkitState | None
    """cursorkit's record; None when Pulsar (or anything else) wrote the znode."""
    state: CursorState | None
    """The ack state the znode itself holds; None when it lives in a cursor ledger."""
    string_properties: dict[str, str]
    """Pulsar's ``cursorProperties`` (the delayed index keeps its bucket keys there)."""
    compression: str | None
    """Pulsar's codec name when the bytes were compressed, else None."""


def _unwrap(data: bytes, where: str) -> tuple[bytes, str | None]:
    """The ManagedCursorInfo bytes inside Pulsar's optional compression header, and the codec."""
    if len(data) < 2 or struct.unpack_from(">h", data)[0] != _PULSAR_MAGIC:
        return data, None
    if len(data) < _COMPRESSED_HEAD.size:
        raise CorruptSnapshot(f"{where}: compressed cursor record cut short ({len(data)} bytes)")
    _, meta_len = _COMPRESSED_HEAD.unpack_from(data)
    start = _COMPRESSED_HEAD.size
    if not 0 <= meta_len <= len(data) - start:
        raise CorruptSnapshot(f"{where}: compression header length {meta_len} does not fit {len(data)} bytes")
    try:
        meta = parse(ml.ManagedCursorInfoMetadata, data[start : start + meta_len])
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: compression header does not parse ({e})") from e
    known = meta.compressionType in ml.CompressionType.values()
    codec = ml.CompressionType.Name(meta.compressionType) if known else f"codec {meta.compressionType}"
    body = data[start + meta_len :]
    if not 0 <= meta.uncompressedSize <= _MAX_UNCOMPRESSED:
        raise BudgetExceeded(
            f"{where}: compressed cursor record claims {meta.uncompressedSize} bytes "
            f"(budget {_MAX_UNCOMPRESSED})"
        )
    if codec == "NONE":
        return body, codec
    if codec != "ZLIB":
        raise UnsupportedVersion(
            f"{where}: cursor record compressed with {codec}; this build reads NONE and ZLIB"
        )
    try:
        inflater = zlib.decompressobj()
        out = inflater.decompress(body, meta.uncompressedSize + 1)
    except zlib.error as e:
        raise CorruptSnapshot(f"{where}: ZLIB-compressed cursor record does not inflate ({e})") from e
    if len(out) != meta.uncompressedSize:
        raise CorruptSnapshot(
            f"{where}: ZLIB cursor record inflates to {len(out)} bytes, header says {meta.uncompressedSize}"
        )
    return out, codec


def cursor_info_bytes(data: bytes, where: str) -> bytes:
    """The ``ManagedCursorInfo`` bytes of a znode, plain or in Pulsar's compressed form."""
    return _unwrap(bytes(data), where)[0]


def pulsar_zlib(raw: bytes) -> bytes:
    """``raw`` (a ``ManagedCursorInfo``) in Pulsar's compressed form, ZLIB.

    Magic 0x4778 and the header length (big-endian short and int), a ``ManagedCursorInfoMetadata``
    naming the codec and the plain size, then the zlib stream: what Pulsar's metadata store parses.
    """
    meta = ml.ManagedCursorInfoMetadata(compressionType=_ZLIB, uncompressedSize=len(raw)).SerializeToString()
    return _COMPRESSED_HEAD.pack(_PULSAR_MAGIC, len(meta)) + meta + zlib.compress(raw)


def fit_record(raw: bytes, max_bytes: int) -> tuple[bytes, str | None]:
    """The bytes to write for ``raw``: itself when within ``max_bytes``, else Pulsar's ZLIB form.

    The codec comes second (None: plain). The caller checks the ZLIB form against the budget.
    """
    if len(raw) <= max_bytes:
        return raw, None
    return pulsar_zlib(raw), "ZLIB"


def read_znode(data: bytes, where: str, ledger_sizes: Mapping[int, int] | None = None) -> ZnodeContent:
    """Decodes a cursor znode; damage is ``CorruptSnapshot`` naming ``where``."""
    raw, codec = _unwrap(bytes(data), where)
    try:
        info = parse(ml.ManagedCursorInfo, raw)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: ManagedCursorInfo does not parse ({e})") from e
    ck = info.cursorkit if info.HasField("cursorkit") else None
    if ck is not None and ck.format_version != ZNODE_FORMAT:
        raise UnsupportedVersion(
            f"{where}: cursorkit record version {ck.format_version}; this build reads {ZNODE_FORMAT}"
        )
    state: CursorState | None = None
    if info.cursorsLedgerId == -1:
        md, acked, batches, props = persist.cursor_info_state(info, raw, where, ledger_sizes)
        if ck is not None and len(ck.batch_sizes) == len(batches):
            batches = [
                (lid, eid, size, words)
                for (lid, eid, _, words), size in zip(batches, ck.batch_sizes, strict=True)
            ]
        state = CursorState(md, acked, batches, props)
    strings = {p.name: p.value for p in info.cursorProperties}
    return ZnodeContent(info, ck, state, strings, codec)


@dataclass(frozen=True, slots=True)
class EncodedZnode:
    """A cursor znode's bytes and how much of the state they hold."""

    data: bytes
    ranges_total: int
    ranges_inline: int
    batches_total: int
    batches_inline: int
    compression: str | None = None
    """``ZLIB`` when the plain record would have passed the byte budget (or cut ranges Pulsar's
    compressed form keeps)."""

    @property
    def complete(self) -> bool:
        """Whether the znode holds the whole state (no state object needed)."""
        return self.ranges_inline == self.ranges_total and self.batches_inline == self.batches_total


def encode_znode(
    *,
    mark_delete: Position,
    acked: RangeSet,
    batches: list[persist.BatchRow],
    properties: Mapping[str, int],
    string_properties: Mapping[str, str],
    cursorkit: zpb.CursorkitState,
    limits: PersistLimits,
    max_bytes: int,
    last_active_ms: int,
    who: str,
) -> EncodedZnode:
    """Pulsar's record of the state, cut at the metadata-store range limit and ``max_bytes``, plus ours.

    Properties and cursor properties are never cut (too many of them is ``InvalidArgument``);
    partial batches come next, the ranges get what is left. When the plain record would leave ranges
    out, Pulsar's ZLIB form is used if it holds more of them within ``max_bytes``.
    """
    info = ml.ManagedCursorInfo(
        cursorsLedgerId=-1,
        markDeleteLedgerId=mark_delete.ledger_id,
        markDeleteEntryId=mark_delete.entry_id,
        lastActive=last_active_ms,
    )
    for name, value in properties.items():
        info.properties.add(name=name, value=value)
    for key, text in string_properties.items():
        info.cursorProperties.add(name=key, value=text)
    ck = info.cursorkit
    ck.CopyFrom(cursorkit)
    ck.ranges_total = len(acked)
    ck.batches_total = len(batches)
    kept: list[persist.BatchRow] = []
    if batches:
        # Room is kept for the cursorkit record's batch_sizes field, written below.
        budget = max_bytes - info.ByteSize() - _BATCH_SIZES_ROOM
        kept = persist.batches_within(batches, limits.max_batch_deleted_index_to_persist, budget)
        persist.add_batch_infos(info.batchedEntryDeletionIndexInfo, kept)
        ck.batch_sizes.extend(size for _, _, size, _ in kept)
    head = info.SerializeToString()
    limit = min(len(acked), limits.max_unacked_ranges_to_persist_in_metadata_store)
    room = max_bytes - len(head)
    n = persist.ranges_within(acked, limit, room) if room >= 0 else -1
    if n < limit:  # the plain record leaves ranges out, or does not fit at all
        packed = _packed_within(head, acked, limit, n, max_bytes)
        if packed is not None:
            data, k = packed
            return EncodedZnode(data, len(acked), k, len(batches), len(kept), "ZLIB")
    if n < 0:
        raise InvalidArgument(
            f"{who}: properties and cursor properties take {len(head):,} bytes "
            f"({len(pulsar_zlib(head)):,} compressed), more than the znode's {max_bytes:,}"
        )
    return EncodedZnode(head + acked.message_range_field_bytes(n, 4), len(acked), n, len(batches), len(kept))


def _packed_within(
    head: bytes, acked: RangeSet, limit: int, plain: int, max_bytes: int
) -> tuple[bytes, int] | None:
    """Pulsar's ZLIB form holding more than ``plain`` ranges within ``max_bytes``, and how many.

    Tries all ``limit`` ranges first, then fewer, scaled by each overshoot (ranges compress alike);
    at most a few compressions. None when it holds no more ranges than the plain form.
    """
    k = limit
    for _ in range(_PACK_TRIES):
        data = pulsar_zlib(head + acked.message_range_field_bytes(k, 4))
        if len(data) <= max_bytes:
            return data, k
        k = min(k - 1, int(k * 0.95 * max_bytes / len(data)))
        if k <= plain:  # no better than the plain record (plain is -1 when nothing fits)
            return None
    return None


def object_key(directory: str, epoch: int, sequence: int) -> str:
    """The key of the state object an owner's write publishes (unique per epoch and write number)."""
    return f"{directory}/{epoch:020d}-{sequence:020d}.state"


def object_id(key: str) -> tuple[int, int] | None:
    """The owner epoch and write number a state object's key names (``None``: not a state object's)."""
    m = _OBJECT_NAME.fullmatch(key.rpartition("/")[2])
    return (int(m.group(1)), int(m.group(2))) if m else None


def state_object(
    *,
    path: str,
    epoch: int,
    sequence: int,
    mark_delete: Position,
    blobs: list[tuple[int, bytes]],
    batches: list[persist.BatchRow],
    properties: Mapping[str, int],
) -> bytes:
    """The state object's bytes: the whole state as a sealed compact snapshot behind a small header."""
    raw_path = path.encode("utf-8")
    head = _OBJECT_HEAD.pack(OBJECT_MAGIC, ZNODE_FORMAT, 0, epoch, sequence, len(raw_path))
    snap = persist.seal(persist.snapshot_message(mark_delete, blobs, batches, properties))
    return head + raw_path + snap


def read_state_object(
    data: bytes, ref: zpb.StateObject, *, path: str, epoch: int, sequence: int, where: str
) -> CursorState:
    """The state an object holds, after checking it is exactly the one the znode names."""
    if len(data) != ref.size or hashlib.sha256(data).digest() != ref.sha256:
        raise CorruptSnapshot(f"{where}: {len(data)} bytes that do not match the znode's size and SHA-256")
    if len(data) < _OBJECT_HEAD.size:
        raise CorruptSnapshot(f"{where}: state object cut short")
    magic, version, flags, got_epoch, got_seq, path_len = _OBJECT_HEAD.unpack_from(data)
    if magic != OBJECT_MAGIC:
        raise CorruptSnapshot(f"{where}: not a cursor state object (bad magic)")
    if version != ZNODE_FORMAT or flags:
        raise UnsupportedVersion(f"{where}: state object format {version}; this build reads {ZNODE_FORMAT}")
    start = _OBJECT_HEAD.size
    got_path = data[start : start + path_len].decode("utf-8", "replace")
    if (got_epoch, got_seq, got_path) != (epoch, sequence, path):
        raise CorruptSnapshot(
            f"{where}: object of {got_path} epoch {got_epoch} write {got_seq}, "
            f"the znode names {path} epoch {epoch} write {sequence}"
        )
    msg = persist.open_snapshot(data[start + path_len :], where)
    md, acked, batches, props = persist.snapshot_state(msg, where)
    return CursorState(md, acked, batches, props)
