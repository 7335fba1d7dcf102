"""The cursor store's log file format: records, checkpoint markers, and the metadata file.

A log starts with ``LOG_MAGIC`` (8 bytes) and a HEADER record; then LEDGER and MARKER records. A
record is ``sync "CK" | kind u8 | flags u8 (0) | payload length u32 | payload | CRC-32 u32``, little
endian. This module writes records (``encode_record``, ``lay_out``), scans a log for them
(``scan``, which resynchronises past damage), and recovers the newest usable checkpoint of one log
(``recover_log``); ``store.py`` holds the store that uses them.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from cursorkit._core import CursorState, Position, RangeSet
from cursorkit.ackstate.persist import BatchRow
from cursorkit.errors import CorruptSnapshot, UnsupportedVersion
from cursorkit.fsio import read_regular
from cursorkit.proto import cursor_snapshot_pb2 as snap
from cursorkit.proto import cursor_store_pb2 as pb
from cursorkit.proto.strict import parse

FORMAT_VERSION = 1
"""Version of the store format this build writes and reads (log header and metadata file)."""

META_FILE = "store.meta"
META_TMP = "store.meta.tmp"
LOG_MAGIC = b"\x89CKLOG\r\n"
META_MAGIC = b"\x89CKMETA\n"
LOG_NAME = re.compile(r"cursor-(\d{12})\.log")

SYNC = b"CK"
HEAD = struct.Struct("<2sBBI")  # sync, kind, flags, payload length
U32 = struct.Struct("<I")
OVERHEAD = HEAD.size + U32.size
MAX_PAYLOAD = 1 << 31
KIND_HEADER, KIND_LEDGER, KIND_MARKER = 1, 2, 3
KINDS = {KIND_HEADER: "header", KIND_LEDGER: "ledger", KIND_MARKER: "marker"}


@dataclass(frozen=True, slots=True)
class DamagedRecord:
    """A piece of a store that recovery could not use, and why."""

    file: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file} at byte {self.offset}: {self.reason}"


@dataclass(slots=True)
class Record:
    """One record found in a log: its kind, where it starts and where its payload lies."""

    offset: int
    kind: int
    start: int
    end: int

    @property
    def total(self) -> int:
        """Bytes of the whole record (framing included)."""
        return self.end + U32.size - self.offset


@dataclass(slots=True)
class Checkpoint:
    """The content of a marker, apart from its ledger index."""

    sequence: int
    mark_delete: Position
    batches: list[BatchRow]
    properties: dict[str, int]


@dataclass(slots=True)
class LogRecovery:
    """The newest usable state of one log file, and what recovery passed over to reach it."""

    generation: int
    name: str | None
    checkpoint: Checkpoint
    index: dict[int, tuple[int, int]]
    bitmaps: list[tuple[int, bytes]]
    preamble: int
    marker_offset: int
    marker_end: int
    size: int
    records: int
    torn_offset: int | None
    corrupt: list[DamagedRecord]
    skipped: list[DamagedRecord]
    unfinished: int
    """Whole records after the marker used: a flush whose marker never landed."""


class Unusable(CorruptSnapshot):
    """A log holding no usable marker; ``offset`` is the first damage found (or the end of the log)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def encode_record(kind: int, payload: bytes) -> bytes:
    """A framed record: sync, kind, flags, length, payload and its CRC-32."""
    head = HEAD.pack(SYNC, kind, 0, len(payload))
    return head + payload + U32.pack(zlib.crc32(payload, zlib.crc32(head)))


def parse_at(data: bytes, pos: int) -> tuple[Record | None, str, bool]:
    """The record at ``pos``, or ``None``, the reason and whether it is merely incomplete."""
    left = len(data) - pos
    if left < HEAD.size:
        return None, f"incomplete record header ({left} bytes)", True
    sync, kind, flags, length = HEAD.unpack_from(data, pos)
    if sync != SYNC or flags != 0 or kind not in KINDS or length > MAX_PAYLOAD:
        return None, "bad record header", False
    end = pos + HEAD.size + length
    if end + U32.size > len(data):
        return None, f"{KINDS[kind]} record of {length} bytes runs past the end of the file", True
    (stored,) = U32.unpack_from(data, end)
    if zlib.crc32(memoryview(data)[pos:end]) != stored:
        return None, f"{KINDS[kind]} record fails its checksum", False
    return Record(pos, kind, pos + HEAD.size, end), "", False


def resync(data: bytes, pos: int) -> int | None:
    """Offset of the first intact record after ``pos`` (records stay findable past a damaged one)."""
    i = data.find(SYNC, pos + 1)
    while i != -1:
        if parse_at(data, i)[0] is not None:
            return i
        i = data.find(SYNC, i + 1)
    return None


def scan(data: bytes, where: str) -> tuple[list[Record], list[DamagedRecord], int | None]:
    """Intact records, damaged spans and the offset of a torn tail."""
    records: list[Record] = []
    corrupt: list[DamagedRecord] = []
    if len(data) < len(LOG_MAGIC):
        return records, corrupt, 0
    if data[: len(LOG_MAGIC)] != LOG_MAGIC:
        corrupt.append(DamagedRecord(where, 0, "bad log magic"))
    pos = len(LOG_MAGIC)
    while pos < len(data):
        rec, reason, incomplete = parse_at(data, pos)
        if rec is not None:
            records.append(rec)
            pos = rec.end + U32.size
            continue
        nxt = resync(data, pos)
        if nxt is None:
            if incomplete:
                return records, corrupt, pos
            corrupt.append(
                DamagedRecord(where, pos, f"{reason}; nothing intact in the last {len(data) - pos} bytes")
            )
            break
        corrupt.append(DamagedRecord(where, pos, f"{reason} ({nxt - pos} bytes skipped)"))
        pos = nxt
    return records, corrupt, None


def checkpoint_of(msg: pb.Checkpoint) -> Checkpoint:
    """The checkpoint a parsed marker describes (``ValueError`` on impossible values)."""
    return Checkpoint(
        sequence=msg.sequence,
        mark_delete=Position(msg.mark_delete_ledger_id, msg.mark_delete_entry_id),
        batches=[(b.ledger_id, b.entry_id, b.batch_size, b.unacked_words) for b in msg.batches],
        properties={p.name: p.value for p in msg.properties},
    )


def marker_payload(cp: Checkpoint, index: Mapping[int, tuple[int, int]]) -> bytes:
    """The ``Checkpoint`` message naming every live ledger record."""
    msg = pb.Checkpoint(
        sequence=cp.sequence,
        mark_delete_ledger_id=cp.mark_delete.ledger_id,
        mark_delete_entry_id=cp.mark_delete.entry_id,
    )
    refs = sorted(index.items())
    msg.ledger_ids.extend([lid for lid, _ in refs])
    msg.offsets.extend([off for _, (off, _) in refs])
    msg.lengths.extend([n for _, (_, n) in refs])
    for ledger, entry, size, words in cp.batches:
        msg.batches.add(ledger_id=ledger, entry_id=entry, batch_size=size, unacked_words=words)
    for name, value in cp.properties.items():
        msg.properties.add(name=name, value=value)
    return msg.SerializeToString()


def ledger_record(ledger_id: int, bitmap: bytes) -> bytes:
    """A LEDGER record holding one ledger's portable bitmap."""
    return encode_record(KIND_LEDGER, snap.LedgerAcks(ledger_id=ledger_id, bitmap=bitmap).SerializeToString())


def read_ledger(data: bytes, rec: Record) -> tuple[int, bytes]:
    """(ledger id, bitmap) of a LEDGER record (``DecodeError`` when it does not parse)."""
    msg = parse(snap.LedgerAcks, data[rec.start : rec.end])
    return msg.ledger_id, msg.bitmap


def use_marker(
    data: bytes, marker: Record, ledgers: Mapping[int, Record], cache: dict[int, tuple[int, bytes] | str]
) -> tuple[Checkpoint, dict[int, tuple[int, int]], list[tuple[int, bytes]]]:
    """The state a marker describes; ``CorruptSnapshot`` when it or a record it names is unusable."""
    try:
        msg = parse(pb.Checkpoint, data[marker.start : marker.end])
        cp = checkpoint_of(msg)
    except (DecodeError, ValueError) as e:
        raise CorruptSnapshot(f"marker does not decode ({e})") from e
    if not len(msg.ledger_ids) == len(msg.offsets) == len(msg.lengths):
        raise CorruptSnapshot("marker's ledger index arrays differ in length")
    try:  # batches are checked as restore() will check them
        CursorState(cp.mark_delete).restore(cp.mark_delete, RangeSet(), cp.batches)
    except ValueError as e:
        raise CorruptSnapshot(f"marker's batches are invalid ({e})") from e
    index: dict[int, tuple[int, int]] = {}
    bitmaps: list[tuple[int, bytes]] = []
    probe = RangeSet()
    for lid, off, length in zip(msg.ledger_ids, msg.offsets, msg.lengths, strict=True):
        rec = ledgers.get(off)
        if rec is None or rec.total != length or off >= marker.offset or lid in index:
            raise CorruptSnapshot(f"ledger {lid}: no intact record of {length} bytes at byte {off}")
        got = cache.get(off)
        if got is None:
            try:
                got = read_ledger(data, rec)
                probe.set_ledger_bytes(got[0], got[1])
            except (DecodeError, ValueError) as e:
                got = f"ledger record at byte {off} does not decode ({e})"
            cache[off] = got
        if isinstance(got, str):
            raise CorruptSnapshot(got)
        if got[0] != lid:
            raise CorruptSnapshot(f"record at byte {off} holds ledger {got[0]}, the marker says {lid}")
        index[lid] = (off, length)
        bitmaps.append(got)
    return cp, index, bitmaps


def recover_log(path: Path, generation: int) -> LogRecovery:
    """The newest usable state in one log file; ``Unusable`` when there is none."""
    where = str(path)
    try:
        data = read_regular(path)
    except OSError as e:
        raise Unusable(f"unreadable ({e})", 0) from e
    records, corrupt, torn = scan(data, where)
    name: str | None = None
    preamble = len(LOG_MAGIC)
    if records and records[0].kind == KIND_HEADER and records[0].offset == len(LOG_MAGIC):
        preamble += records[0].total
        try:
            header = parse(pb.LogHeader, data[records[0].start : records[0].end])
        except DecodeError:
            corrupt.append(DamagedRecord(where, records[0].offset, "header record does not decode"))
        else:
            if header.format_version > FORMAT_VERSION:
                version = header.format_version
                raise UnsupportedVersion(
                    f"{where}: store format {version} (this build reads {FORMAT_VERSION})"
                )
            name = header.cursor_name
            if header.generation != generation:
                corrupt.append(
                    DamagedRecord(where, records[0].offset, f"header names generation {header.generation}")
                )
    elif not any(d.offset == len(LOG_MAGIC) for d in corrupt):
        corrupt.append(DamagedRecord(where, len(LOG_MAGIC), "no header record"))
    ledgers = {r.offset: r for r in records if r.kind == KIND_LEDGER}
    cache: dict[int, tuple[int, bytes] | str] = {}
    skipped: list[DamagedRecord] = []
    for marker in reversed([r for r in records if r.kind == KIND_MARKER]):
        try:
            cp, index, bitmaps = use_marker(data, marker, ledgers, cache)
        except CorruptSnapshot as e:
            skipped.append(DamagedRecord(where, marker.offset, str(e)))
            continue
        return LogRecovery(
            generation=generation,
            name=name,
            checkpoint=cp,
            index=index,
            bitmaps=bitmaps,
            preamble=preamble,
            marker_offset=marker.offset,
            marker_end=marker.offset + marker.total,
            size=len(data),
            records=len(records),
            torn_offset=torn,
            corrupt=corrupt,
            skipped=skipped,
            unfinished=sum(1 for r in records if r.offset > marker.offset),
        )
    damage = sorted(corrupt + skipped, key=lambda d: d.offset)
    if torn is not None:
        damage.append(DamagedRecord(where, torn, f"torn tail of {len(data) - torn} bytes"))
    if damage:
        first = damage[0]
        more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
        raise Unusable(f"no usable checkpoint marker; first damage: {first.reason}{more}", first.offset)
    raise Unusable(f"no checkpoint marker in {len(data)} bytes", len(data))


def read_meta(path: Path) -> tuple[pb.StoreMeta | None, str | None]:
    """The metadata record, or ``None`` and why it is unusable (naming the byte offset)."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None, f"{path} is missing"
    except OSError as e:
        return None, f"{path} is unreadable ({e})"
    fixed = len(META_MAGIC) + 2 * U32.size
    if len(data) < fixed:
        return None, f"{path}: truncated at byte {len(data)}"
    if data[: len(META_MAGIC)] != META_MAGIC:
        return None, f"{path}: bad magic at byte 0"
    (length,) = U32.unpack_from(data, len(META_MAGIC))
    if fixed + length != len(data):
        return None, f"{path}: length {length} at byte {len(META_MAGIC)} does not match {len(data)} bytes"
    body_end = len(data) - U32.size
    if zlib.crc32(data[:body_end]) != U32.unpack_from(data, body_end)[0]:
        return None, f"{path}: checksum mismatch at byte {body_end}"
    try:
        meta = parse(pb.StoreMeta, data[len(META_MAGIC) + U32.size : body_end])
    except DecodeError as e:
        return None, f"{path}: does not decode at byte {len(META_MAGIC) + U32.size} ({e})"
    if meta.format_version > FORMAT_VERSION:
        raise UnsupportedVersion(
            f"{path}: store format version {meta.format_version} (this build reads {FORMAT_VERSION})"
        )
    return meta, None


def lay_out(
    records: list[tuple[int, bytes]], cp: Checkpoint, index: dict[int, tuple[int, int]], start: int
) -> tuple[bytes, bytes]:
    """The bytes to append and the marker record: ledger records from offset ``start``, then a marker.

    Each record's place is entered into ``index``; the marker names every live record in it.
    """
    parts: list[bytes] = []
    pos = start
    for lid, rec in records:
        index[lid] = (pos, len(rec))
        parts.append(rec)
        pos += len(rec)
    marker = encode_record(KIND_MARKER, marker_payload(cp, index))
    parts.append(marker)
    return b"".join(parts), marker
