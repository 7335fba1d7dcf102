"""The bytes of one ledger file: its header, its entry records, and the :class:`Entry` a record holds.

Little endian throughout. A segment starts with a 48-byte header::

    magic (89 "CKSEG" 0d 0a) | version u16 | flags u16 (0) | ledger id u64
    | previous ledger u64 | its entries u64 | its end offset u64 | CRC-32 u32

(``previous ledger`` is ``NO_LEDGER`` in a log's first ledger; the CRC covers the 44 bytes before
it), then entry records, each ``CRC-32 u32 | length u32 | publish time i64 (ms) | messages u32 |
data``, the CRC covering the 16 bytes after it and the data.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cursorkit import Position, wire
from cursorkit.errors import UnsupportedVersion

__all__ = [
    "FORMAT_VERSION",
    "HEADER",
    "MAX_ENTRY_BYTES",
    "NO_LEDGER",
    "RECORD",
    "Entry",
    "EntryRow",
    "Read",
    "SegmentHeader",
    "as_entries",
    "decode_records",
    "decode_rows",
    "encode_header",
    "encode_records",
    "parse_header",
    "record_problem",
]

FORMAT_VERSION = 1
"""The segment format this build writes and reads."""

MAGIC = b"\x89CKSEG\r\n"
HEADER = struct.Struct("<8sHHQQQQI")
RECORD = struct.Struct("<IIqI")  # CRC, data length, publish time, messages
NO_LEDGER = (1 << 64) - 1
"""``previous ledger`` of a log's first ledger."""
MAX_ENTRY_BYTES = 1 << 30
"""The largest entry a segment holds (a longer length field is damage, never an allocation)."""
_I64 = (-(1 << 63), (1 << 63) - 1)


class Entry(NamedTuple):
    """One stored entry: where it is, its bytes (a message's metadata and payload), its publish time.

    A named tuple: a read makes one per entry, and a tuple is the cheapest immutable record.
    """

    position: Position
    data: bytes
    publish_time_ms: int
    num_messages: int
    """Messages in the entry (a batch holds several)."""


EntryRow = tuple[Position, bytes, int, int]
"""One entry as the record decoder returns it: position, data, publish time (ms), message count."""


@dataclass(frozen=True, slots=True)
class Read:
    """A read's entries as columns: no object per entry beyond its position and bytes.

    ``MessageLog.read_columns`` returns one; a dispatcher takes the positions and counts as they
    are, and the MESSAGE builder the bytes. False when empty.
    """

    positions: list[Position]
    datas: list[bytes]
    publish_times_ms: list[int]
    counts: list[int]
    """Messages per entry (a batch holds several)."""

    @classmethod
    def of(cls, rows: list[EntryRow]) -> Read:
        """Columns of ``(position, data, publish time, count)`` rows (one C-level transpose)."""
        if not rows:
            return cls([], [], [], [])
        positions, datas, times, counts = map(list, zip(*rows, strict=True))
        return cls(positions, datas, times, counts)

    def extend(self, other: Read) -> None:
        """Appends ``other``'s entries (a read made of one-entry reads)."""
        self.positions.extend(other.positions)
        self.datas.extend(other.datas)
        self.publish_times_ms.extend(other.publish_times_ms)
        self.counts.extend(other.counts)

    def __bool__(self) -> bool:
        return bool(self.positions)

    def __len__(self) -> int:
        return len(self.positions)


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """What a segment's header says: its ledger and, for a rolled-to ledger, how its predecessor ended."""

    ledger_id: int
    previous_ledger: int
    """The ledger that was current when this one was made (``NO_LEDGER`` for the first)."""
    previous_entries: int
    """Entries the previous ledger held when it was sealed; later bytes there are never served."""
    previous_end: int
    """Byte size of the previous ledger's served part when it was sealed."""


def encode_header(header: SegmentHeader) -> bytes:
    """The 48 header bytes of a segment."""
    body = HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        0,
        header.ledger_id,
        header.previous_ledger,
        header.previous_entries,
        header.previous_end,
        0,
    )[: HEADER.size - 4]
    return body + struct.pack("<I", zlib.crc32(body))


def parse_header(data: bytes) -> tuple[SegmentHeader | None, str]:
    """The header at the start of ``data``, or ``None`` and why it is unusable.

    A header of a later format version raises ``UnsupportedVersion`` (it is intact, just not ours).
    """
    if len(data) < HEADER.size:
        return None, f"incomplete header ({len(data)} of {HEADER.size} bytes)"
    magic, version, flags, ledger, prev, prev_entries, prev_end, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        return None, "bad magic"
    if zlib.crc32(data[: HEADER.size - 4]) != crc:
        return None, "header fails its checksum"
    if version > FORMAT_VERSION:
        raise UnsupportedVersion(f"segment format {version} (this build reads {FORMAT_VERSION})")
    if version < 1 or flags != 0 or ledger > _I64[1]:
        return None, f"bad header (version {version}, flags {flags}, ledger {ledger})"
    return SegmentHeader(ledger, prev, prev_entries, prev_end), ""


def encode_records(entries: Sequence[tuple[bytes, int, int]]) -> tuple[bytes, list[int], list[int]]:
    """The records of ``entries`` as one blob, each record's offset within it, each publish time.

    Encoded in Rust; every entry is checked first and nothing is encoded when one is refused:
    ``InvalidInputType`` (not a ``(data, publish_time_ms, num_messages)`` tuple of bytes and ints)
    or ``InvalidArgument`` (over ``MAX_ENTRY_BYTES``, a time outside 64 bits, a count outside
    1..2^32-1), naming the entry.
    """
    return wire.encode_records(entries)


def record_problem(head: bytes, remaining: int) -> tuple[int, str, bool]:
    """The data length a record header announces, or a reason it is unusable and whether it is torn.

    ``head`` holds the record header's bytes (fewer at the end of a file); ``remaining`` counts the
    file's bytes from the record's start. A record running past the end is torn (``True``).
    """
    if len(head) < RECORD.size:
        return 0, f"incomplete record header ({len(head)} bytes)", True
    _, length, _, count = RECORD.unpack_from(head)
    if length > MAX_ENTRY_BYTES or count == 0:
        return 0, f"bad record header (length {length}, messages {count})", False
    if RECORD.size + length > remaining:
        return 0, f"record of {length} bytes runs past the end of the file", True
    return length, "", False


def decode_rows(ledger_id: int, first: int, data: bytes) -> list[EntryRow]:
    """:func:`decode_records` as Rust returns them: ``(position, data, publish time, count)`` tuples."""
    rows: list[EntryRow] = wire.decode_records(ledger_id, first, data)
    return rows


def decode_records(ledger_id: int, first: int, data: bytes) -> list[Entry]:
    """The entries of consecutive records ``data`` holds, the first being entry ``first``.

    ``CorruptSnapshot`` when one is cut short or no longer matches its checksum (the file changed
    under the log). Checked and split in Rust.
    """
    return as_entries(decode_rows(ledger_id, first, data))


def as_entries(rows: list[EntryRow]) -> list[Entry]:
    """The decoder's rows as :class:`Entry` records (for callers that want names, not columns)."""
    return list(map(Entry._make, rows))
