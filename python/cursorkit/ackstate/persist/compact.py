"""cursorkit's compact form: a checksummed ``CursorSnapshot`` holding a roaring portable bitmap per ledger."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from google.protobuf.message import DecodeError

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist.budget import runs_per_ledger, varint_len
from cursorkit.ackstate.persist.result import BatchRow, PersistedCursor, PersistResult
from cursorkit.errors import (
    CorruptSnapshot,
    UnsupportedVersion,
)
from cursorkit.proto import cursor_snapshot_pb2 as snap
from cursorkit.proto.strict import check

__all__ = [
    "CHECKSUM_TAG",
    "SNAPSHOT_VERSION",
    "encode_compact",
    "open_snapshot",
    "refuse_compact",
    "seal",
    "snapshot_message",
    "snapshot_state",
]


SNAPSHOT_VERSION = 1
"""Version of the compact ``CursorSnapshot`` this build writes and reads."""
CHECKSUM_TAG = b"\x7d"  # field 15, wire type 5 (fixed32)


def encode_compact(
    cursor: PersistedCursor,
    md: Position,
    blobs: list[tuple[int, bytes]],
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
) -> PersistResult:
    """The compact form: whole ledgers' bitmaps in ledger order while they fit ``max_entry_bytes``."""
    msg = snapshot_message(md, [], kept_batches, properties)
    budget = limits.max_entry_bytes - msg.ByteSize() - 32  # room for the truncation counters
    used = 0
    kept = 0
    for ledger, blob in blobs:
        item = snap.LedgerAcks(ledger_id=ledger, bitmap=blob)
        size = item.ByteSize()
        field = 1 + varint_len(size) + size
        if used + field > budget:
            break
        msg.ledgers.append(item)
        used += field
        kept += 1
    total_ranges = cursor.non_contiguous_deleted_ranges
    written_ranges = total_ranges
    if kept < len(blobs):
        msg.truncated_ledgers = len(blobs) - kept
        runs = runs_per_ledger(cursor.individually_deleted)
        written_ranges = sum(runs.get(ledger, 0) for ledger, _ in blobs[:kept])
    if len(kept_batches) < len(batches):
        msg.truncated_batches = len(batches) - len(kept_batches)
    return PersistResult("compact", seal(msg), total_ranges, written_ranges, len(batches), len(kept_batches))


def snapshot_message(
    md: Position,
    blobs: list[tuple[int, bytes]],
    batches: list[BatchRow],
    properties: Mapping[str, int],
) -> snap.CursorSnapshot:
    """A ``CursorSnapshot`` message (without its checksum)."""
    msg = snap.CursorSnapshot(
        version=SNAPSHOT_VERSION,
        mark_delete_ledger_id=md.ledger_id,
        mark_delete_entry_id=md.entry_id,
    )
    for ledger, blob in blobs:
        msg.ledgers.add(ledger_id=ledger, bitmap=blob)
    for ledger, entry, size, words in batches:
        msg.batches.add(ledger_id=ledger, entry_id=entry, batch_size=size, unacked_words=words)
    for name, value in properties.items():
        msg.properties.add(name=name, value=value)
    return msg


def seal(msg: snap.CursorSnapshot) -> bytes:
    """Serialises ``msg`` and appends its checksum field (CRC-32 of every byte before it)."""
    body = msg.SerializeToString()
    return body + CHECKSUM_TAG + zlib.crc32(body).to_bytes(4, "little")


def open_snapshot(data: bytes, where: str) -> snap.CursorSnapshot:
    """Parses a sealed ``CursorSnapshot``; any damage is ``CorruptSnapshot`` naming ``where``."""
    if len(data) < 5 or data[-5:-4] != CHECKSUM_TAG:
        raise CorruptSnapshot(f"{where}: compact snapshot of {len(data)} bytes has no checksum trailer")
    body, stored = data[:-5], int.from_bytes(data[-4:], "little")
    actual = zlib.crc32(body)
    if actual != stored:
        raise CorruptSnapshot(f"{where}: checksum mismatch (stored {stored:#010x}, computed {actual:#010x})")
    msg = snap.CursorSnapshot()
    try:
        msg.ParseFromString(body)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: compact snapshot does not parse ({e})") from e
    if not msg.HasField("version"):
        raise CorruptSnapshot(f"{where}: compact snapshot has no version field")
    if msg.version != SNAPSHOT_VERSION:
        raise UnsupportedVersion(
            f"{where}: compact snapshot version {msg.version} (this build reads {SNAPSHOT_VERSION})"
        )
    try:
        check(msg)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: compact snapshot: {e}") from e
    return msg


def snapshot_state(
    msg: snap.CursorSnapshot, where: str
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """Mark-delete, acked entries, batches and properties held by a parsed snapshot."""
    md = Position(msg.mark_delete_ledger_id, msg.mark_delete_entry_id)
    acked = RangeSet()
    for item in msg.ledgers:
        try:
            acked.set_ledger_bytes(item.ledger_id, item.bitmap)
        except CorruptSnapshot as e:
            raise CorruptSnapshot(f"{where}: {e}") from e
    batches = [(b.ledger_id, b.entry_id, b.batch_size, b.unacked_words) for b in msg.batches]
    return md, acked, batches, {p.name: p.value for p in msg.properties}


def refuse_compact(data: bytes, where: str, form: str) -> None:
    """Refuses bytes sealed as cursorkit's compact form, which would otherwise half-parse as ``form``."""
    sealed = len(data) >= 5 and data[-5:-4] == CHECKSUM_TAG
    if sealed and zlib.crc32(data[:-5]) == int.from_bytes(data[-4:], "little"):
        raise CorruptSnapshot(
            f"{where}: these bytes are cursorkit's compact form, not a Pulsar {form}; "
            f'decode them with encoding="compact"'
        )
