"""The three byte forms of a cursor's ack state, and their truncation reports.

* ``message_range``: Pulsar's ``PositionInfo`` with ``MessageRange`` entries (field 3);
* ``long_list_map``: ``PositionInfo`` with ``LongListMap`` BitSet words (field 6);
* ``compact``: our ``CursorSnapshot``, a roaring portable bitmap per ledger, checksummed;
* ``managed_cursor_info``: Pulsar's metadata-store record (``cursorsLedgerId = -1``: the ack state
  lives in it), cut at ``max_unacked_ranges_to_persist_in_metadata_store`` ranges.

A persist never truncates silently: :class:`PersistResult` says what was written and what was cut.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    InvalidArgument,
    InvalidInputType,
    InvalidPosition,
    UnsupportedVersion,
)
from cursorkit.proto import cursor_snapshot_pb2 as snap
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.proto.strict import check, parse


class PersistedCursor(Protocol):
    """What persisting reads of a cursor.

    ``Cursor`` provides it; naming a protocol here keeps ``persist.py`` free of any import of
    ``cursor.py``, which imports this module.
    """

    @property
    def name(self) -> str:
        """The cursor's name, for messages."""
        ...

    @property
    def properties(self) -> Mapping[str, int]:
        """Pulsar's cursor properties (name -> long)."""
        ...

    @property
    def pulsar_quirks(self) -> bool:
        """Whether Pulsar's test-asserted quirks are on."""
        ...

    @property
    def individually_deleted(self) -> RangeSet:
        """The acknowledged positions after mark-delete."""
        ...

    @property
    def non_contiguous_deleted_ranges(self) -> int:
        """Number of acknowledged ranges."""
        ...

    def flush_state(
        self, dirty_only: bool = True, clear_dirty: bool = True
    ) -> tuple[Position, list[tuple[int, bytes | None]], list[int], list[Any], int]:
        """Mark-delete, ledger bitmaps, live ledgers, partial batches, mutation count."""
        ...


Encoding = Literal["message_range", "long_list_map", "compact", "managed_cursor_info"]
ENCODINGS: tuple[Encoding, ...] = ("message_range", "long_list_map", "compact", "managed_cursor_info")

MAX_ENTRY_ID = 2**32 - 1
"""Highest entry id a cursor's bitmaps hold."""

SNAPSHOT_VERSION = 1
"""Version of the compact ``CursorSnapshot`` this build writes and reads."""
_CHECKSUM_TAG = b"\x7d"  # field 15, wire type 5 (fixed32)

BatchRow = tuple[int, int, int, bytes]
"""``(ledger, entry, batch_size, unacked-index words as little-endian u64 bytes)``."""


@dataclass(frozen=True, slots=True)
class PersistResult:
    """One persisted form of a cursor: the bytes, and what of the state they hold."""

    encoding: Encoding
    data: bytes
    ranges_total: int
    ranges_written: int
    batches_total: int
    batches_written: int

    @property
    def size(self) -> int:
        """Bytes written."""
        return len(self.data)

    @property
    def ranges_cut(self) -> int:
        """Ack ranges left out (they survive only in memory)."""
        return self.ranges_total - self.ranges_written

    @property
    def batches_cut(self) -> int:
        """Partial batches left out."""
        return self.batches_total - self.batches_written

    @property
    def truncated(self) -> bool:
        """Whether anything was left out."""
        return self.ranges_cut > 0 or self.batches_cut > 0


def check_encoding(encoding: str) -> Encoding:
    """The encoding name, or ``InvalidArgument`` naming the valid ones."""
    for known in ENCODINGS:
        if encoding == known:
            return known
    raise InvalidArgument(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")


def encode(cursor: PersistedCursor, encoding: str, limits: PersistLimits) -> PersistResult:
    """Serialises the cursor's ack state in one of the three forms, within ``limits``."""
    form = check_encoding(encoding)
    md, ledgers, _live, batches, _ = cursor.flush_state(dirty_only=False, clear_dirty=False)
    properties = checked_properties(cursor.properties, f"cursor {cursor.name!r}")
    kept_batches = _fit_batches(batches, properties, limits, f"cursor {cursor.name!r}")
    if form == "compact":
        blobs = [(ledger, blob) for ledger, blob in ledgers if blob is not None]
        return _encode_compact(cursor, md, blobs, batches, kept_batches, properties, limits)
    acked = cursor.individually_deleted
    if form == "managed_cursor_info":
        return _encode_cursor_info(md, acked, batches, kept_batches, properties, limits)
    if form == "message_range":
        return _encode_message_range(md, acked, batches, kept_batches, properties, limits)
    return _encode_long_list_map(md, acked, batches, kept_batches, properties, limits, cursor.pulsar_quirks)


def checked_properties(properties: Mapping[Any, Any], who: str) -> dict[str, int]:
    """Cursor properties as persistable values: str names (UTF-8) to signed 64-bit ints."""
    out: dict[str, int] = {}
    for name, value in properties.items():
        if not isinstance(name, str):
            raise InvalidInputType(f"{who}: property name {name!r} is not a str")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(f"{who}: property name {name!r} is not encodable as UTF-8") from e
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputType(f"{who}: property {name!r} must be an int, got {type(value).__name__}")
        if not -(2**63) <= value < 2**63:
            raise InvalidArgument(f"{who}: property {name!r}={value} does not fit in a signed 64-bit int")
        out[name] = value
    return out


def _fit_batches(
    batches: list[BatchRow], properties: Mapping[str, int], limits: PersistLimits, who: str
) -> list[BatchRow]:
    """The prefix of partial batches within the count limit and the byte limit.

    Properties cannot be split (as in Pulsar, a persist whose properties alone do not fit fails);
    batches come next, each charged an upper bound of its size in every form (11 B per word, the
    widest varint); the ack ranges get what is left.
    """
    props = sum(12 + len(name.encode()) + 1 + _varint_len(value) for name, value in properties.items())
    budget = limits.max_entry_bytes - _FIXED_BYTES - props
    if budget < 0:
        raise InvalidArgument(
            f"{who}: properties take about {props} bytes, more than max_entry_bytes={limits.max_entry_bytes}"
        )
    return batches_within(batches, limits.max_batch_deleted_index_to_persist, budget)


def batches_within(batches: list[BatchRow], limit: int, budget: int) -> list[BatchRow]:
    """The prefix of at most ``limit`` partial batches whose sizes' upper bounds fit ``budget`` bytes."""
    kept = batches[:limit]
    used = 0
    for i, (_ledger, _entry, _size, words) in enumerate(kept):
        used += _BATCH_OVERHEAD + 11 * (len(words) // 8)
        if used > budget:
            return kept[:i]
    return kept


_FIXED_BYTES = 64
"""Upper bound of a record's mark-delete, version, checksum and truncation counters."""
_BATCH_OVERHEAD = 48
"""Upper bound of one batch item's tags, lengths, position and size varints."""


def _position_info(md: Position, batches: list[BatchRow], properties: Mapping[str, int]) -> ml.PositionInfo:
    info = ml.PositionInfo(ledgerId=md.ledger_id, entryId=md.entry_id)
    for name, value in properties.items():
        info.properties.add(name=name, value=value)
    add_batch_infos(info.batchedEntryDeletionIndexInfo, batches)
    return info


def add_batch_infos(field: Any, batches: list[BatchRow]) -> None:
    """Appends ``BatchedEntryDeletionIndexInfo`` items (deleteSet = the unacked-index words)."""
    for ledger, entry, _size, words in batches:
        item = field.add()
        item.position.ledgerId, item.position.entryId = ledger, entry
        item.deleteSet.extend(np.frombuffer(words, dtype="<i8").tolist())


_MAX_RANGE_BYTES = 50
"""Upper bound of one MessageRange field: tag and length, two endpoints of two 10-byte varints each."""


def ranges_within(acked: RangeSet, limit: int, budget: int) -> int:
    """How many leading ranges fit both the range limit and ``budget`` bytes as MessageRanges."""
    n = min(len(acked), limit)
    if n * _MAX_RANGE_BYTES <= budget:  # fits whatever the ids: no need to size them
        return n
    if acked.message_range_wire_size(n) > budget:
        n = _largest_prefix(n, lambda k: acked.message_range_wire_size(k) <= budget)
    return n


def _encode_message_range(
    md: Position,
    acked: RangeSet,
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
) -> PersistResult:
    info = _position_info(md, kept_batches, properties)
    n = ranges_within(acked, limits.max_unacked_ranges_to_persist, limits.max_entry_bytes - info.ByteSize())
    # Field 3 comes from Rust, byte for byte what protobuf writes; fields may appear in any order.
    data = info.SerializeToString() + acked.message_range_field_bytes(n)
    return PersistResult("message_range", data, len(acked), n, len(batches), len(kept_batches))


def _encode_cursor_info(
    md: Position,
    acked: RangeSet,
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
) -> PersistResult:
    """A ManagedCursorInfo holding the state itself, as a broker writes its znode on close."""
    info = ml.ManagedCursorInfo(
        cursorsLedgerId=-1, markDeleteLedgerId=md.ledger_id, markDeleteEntryId=md.entry_id
    )
    for name, value in properties.items():
        info.properties.add(name=name, value=value)
    add_batch_infos(info.batchedEntryDeletionIndexInfo, kept_batches)
    limit = limits.max_unacked_ranges_to_persist_in_metadata_store
    n = ranges_within(acked, limit, limits.max_entry_bytes - info.ByteSize())
    for lk, lv, uk, uv in acked.to_message_ranges(n).tolist():
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lk, lv
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = uk, uv
    return PersistResult(
        "managed_cursor_info", info.SerializeToString(), len(acked), n, len(batches), len(kept_batches)
    )


def mark_delete_of(ledger_id: int, entry_id: int) -> Position:
    """A persisted mark-delete position, checked as a cursor will check it.

    An entry outside -1..2^32-1 (no cursor holds one) is ``InvalidPosition``, which the decoders
    report as ``CorruptSnapshot``.
    """
    if not -1 <= entry_id <= MAX_ENTRY_ID:
        raise InvalidPosition(f"mark-delete {ledger_id}:{entry_id} has an entry outside -1..{MAX_ENTRY_ID}")
    return Position(ledger_id, entry_id)


def decode_cursor_info(
    data: bytes, where: str, ledger_sizes: Mapping[int, int] | None
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """State held by a Pulsar ``ManagedCursorInfo`` whose ack state lives in the record itself."""
    _refuse_compact(data, where, "ManagedCursorInfo")
    try:
        info = parse(ml.ManagedCursorInfo, data)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: ManagedCursorInfo does not parse ({e})") from e
    return cursor_info_state(info, data, where, ledger_sizes)


def cursor_info_state(
    info: ml.ManagedCursorInfo, data: bytes, where: str, ledger_sizes: Mapping[int, int] | None
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """:func:`decode_cursor_info` of a record already parsed (``data``: its bytes, for the ranges)."""
    if info.cursorsLedgerId != -1:
        raise InvalidArgument(
            f"{where}: the ack state lives in cursor ledger {info.cursorsLedgerId}, not in this record"
        )
    try:
        md = mark_delete_of(info.markDeleteLedgerId, info.markDeleteEntryId)
        acked = RangeSet.from_message_range_field(data, 4, ledger_sizes)
        batches = [_batch_row(b) for b in info.batchedEntryDeletionIndexInfo]
    except BudgetExceeded:
        raise
    except (ValueError, TypeError) as e:
        raise CorruptSnapshot(f"{where}: {e}") from e
    return md, acked, batches, {p.name: p.value for p in info.properties}


def _encode_long_list_map(
    md: Position,
    acked: RangeSet,
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
    pulsar_quirks: bool,
) -> PersistResult:
    """Whole ledgers in ascending order while the ranges and the bytes stay within the limits.

    With ``pulsar_quirks`` the range limit is compared with acknowledged *entries*, as Pulsar's
    ``toRanges`` does; by default with ranges, which is what the limit is named for.
    """
    info = _position_info(md, kept_batches, properties)
    budget = limits.max_entry_bytes - info.ByteSize()
    if pulsar_quirks:
        words = acked.to_long_list_map(limits.max_unacked_ranges_to_persist, max_bytes=max(budget, 0))
    else:
        words = acked.to_long_list_map(max_bytes=max(budget, 0))
    rows = acked.ranges_array()
    runs = _runs_per_ledger(acked)
    written_ranges = 0
    used = 0
    for ledger, values in words.items():
        ranges = runs.get(ledger, 0)
        kept = values
        allowed = limits.max_unacked_ranges_to_persist - written_ranges
        if not pulsar_quirks and ranges > allowed:
            if allowed <= 0:
                break
            last_entry = int(rows[rows[:, 0] == ledger][allowed - 1, 3])
            kept, ranges = _words_through(values, last_entry), allowed
        field = _long_list_map_field_size(ledger, kept)
        if used + field > budget:
            break
        item = info.individualDeletedMessageRanges.add(key=ledger)
        item.values.extend(kept.tolist())
        written_ranges += ranges
        used += field
        if kept is not values:
            break
    return PersistResult(
        "long_list_map",
        info.SerializeToString(),
        len(acked),
        written_ranges,
        len(batches),
        len(kept_batches),
    )


def _encode_compact(
    cursor: PersistedCursor,
    md: Position,
    blobs: list[tuple[int, bytes]],
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
) -> PersistResult:
    msg = snapshot_message(md, [], kept_batches, properties)
    budget = limits.max_entry_bytes - msg.ByteSize() - 32  # room for the truncation counters
    used = 0
    kept = 0
    for ledger, blob in blobs:
        item = snap.LedgerAcks(ledger_id=ledger, bitmap=blob)
        size = item.ByteSize()
        field = 1 + _varint_len(size) + size
        if used + field > budget:
            break
        msg.ledgers.append(item)
        used += field
        kept += 1
    total_ranges = cursor.non_contiguous_deleted_ranges
    written_ranges = total_ranges
    if kept < len(blobs):
        msg.truncated_ledgers = len(blobs) - kept
        runs = _runs_per_ledger(cursor.individually_deleted)
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
    return body + _CHECKSUM_TAG + zlib.crc32(body).to_bytes(4, "little")


def open_snapshot(data: bytes, where: str) -> snap.CursorSnapshot:
    """Parses a sealed ``CursorSnapshot``; any damage is ``CorruptSnapshot`` naming ``where``."""
    if len(data) < 5 or data[-5:-4] != _CHECKSUM_TAG:
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


def _refuse_compact(data: bytes, where: str, form: str) -> None:
    """Refuses bytes sealed as cursorkit's compact form, which would otherwise half-parse as ``form``."""
    sealed = len(data) >= 5 and data[-5:-4] == _CHECKSUM_TAG
    if sealed and zlib.crc32(data[:-5]) == int.from_bytes(data[-4:], "little"):
        raise CorruptSnapshot(
            f"{where}: these bytes are cursorkit's compact form, not a Pulsar {form}; "
            f'decode them with encoding="compact"'
        )


def decode_position_info(
    data: bytes, where: str, ledger_sizes: Mapping[int, int] | None
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """State held by a Pulsar ``PositionInfo``.

    MessageRange is preferred over LongListMap, as Pulsar's recovery does; cross-ledger ranges are
    expanded with ``ledger_sizes`` when given.
    """
    _refuse_compact(data, where, "PositionInfo")
    try:
        info = parse(ml.PositionInfo, data)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: PositionInfo does not parse ({e})") from e
    try:
        md = mark_delete_of(info.ledgerId, info.entryId)
        acked = _acked_from_info(info, data, ledger_sizes)
        batches = [_batch_row(b) for b in info.batchedEntryDeletionIndexInfo]
    except BudgetExceeded:
        raise
    except (ValueError, TypeError) as e:
        raise CorruptSnapshot(f"{where}: {e}") from e
    return md, acked, batches, {p.name: p.value for p in info.properties}


def _acked_from_info(info: ml.PositionInfo, data: bytes, ledger_sizes: Mapping[int, int] | None) -> RangeSet:
    if len(info.individualDeletedMessages):
        # Rows straight from the bytes in Rust: 1M ranges in ~0.1 s instead of seconds of Python.
        return RangeSet.from_message_range_field(data, 3, ledger_sizes)
    words = {m.key: np.array(m.values, dtype=np.int64) for m in info.individualDeletedMessageRanges}
    return RangeSet.from_long_list_map(words)


def _batch_row(item: ml.BatchedEntryDeletionIndexInfo) -> BatchRow:
    """A persisted partial batch as a row (its batch size is unknown to Pulsar's form: 0)."""
    words = np.array(item.deleteSet, dtype="<i8").tobytes()
    return (item.position.ledgerId, item.position.entryId, 0, words)


def _words_through(values: npt.NDArray[np.int64], last_entry: int) -> npt.NDArray[np.int64]:
    """BitSet words holding only entries ``<= last_entry``."""
    n = last_entry // 64 + 1
    kept = values[:n].copy().view(np.uint64)
    kept[-1] &= np.uint64((1 << (last_entry % 64 + 1)) - 1)
    return kept.view(np.int64)


def _runs_per_ledger(acked: RangeSet) -> dict[int, int]:
    rows = acked.ranges_array()
    ledgers, counts = np.unique(rows[:, 0], return_counts=True)
    return dict(zip(ledgers.tolist(), counts.tolist(), strict=True))


def _varint_len(value: int) -> int:
    if value < 0:
        return 10
    return max(1, (value.bit_length() + 6) // 7)


def _long_list_map_field_size(ledger: int, values: npt.NDArray[np.int64]) -> int:
    """Bytes of one ``LongListMap`` as PositionInfo field 6 (unpacked int64 words)."""
    v = values.astype(np.int64)
    lengths = np.ones(v.shape, dtype=np.int64)
    for k in range(1, 9):
        lengths += v >= (1 << (7 * k))
    lengths[v < 0] = 10
    payload = 1 + _varint_len(ledger) + int(lengths.sum()) + v.size
    return 1 + _varint_len(payload) + payload


def _largest_prefix(n: int, fits: Callable[[int], bool]) -> int:
    """Largest ``k <= n`` with ``fits(k)`` (monotone), by bisection."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
