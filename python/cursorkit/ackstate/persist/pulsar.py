"""Pulsar's forms, written and read: ``PositionInfo`` (MessageRange or LongListMap), ``ManagedCursorInfo``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist.budget import (
    long_list_map_field_size,
    ranges_within,
    runs_per_ledger,
    words_through,
)
from cursorkit.ackstate.persist.compact import refuse_compact
from cursorkit.ackstate.persist.result import BatchRow, PersistResult, mark_delete_of
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    InvalidArgument,
)
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.proto.strict import parse

__all__ = [
    "add_batch_infos",
    "cursor_info_state",
    "decode_cursor_info",
    "decode_position_info",
    "encode_cursor_info",
    "encode_long_list_map",
    "encode_message_range",
    "position_info",
]


def position_info(md: Position, batches: list[BatchRow], properties: Mapping[str, int]) -> ml.PositionInfo:
    """A ``PositionInfo`` with the mark-delete, properties and partial batches (no ack ranges yet)."""
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


def encode_message_range(
    md: Position,
    acked: RangeSet,
    batches: list[BatchRow],
    kept_batches: list[BatchRow],
    properties: Mapping[str, int],
    limits: PersistLimits,
) -> PersistResult:
    """``PositionInfo`` with MessageRange entries: the leading ranges within the range and byte limits."""
    info = position_info(md, kept_batches, properties)
    n = ranges_within(acked, limits.max_unacked_ranges_to_persist, limits.max_entry_bytes - info.ByteSize())
    # Field 3 comes from Rust, byte for byte what protobuf writes; fields may appear in any order.
    data = info.SerializeToString() + acked.message_range_field_bytes(n)
    return PersistResult("message_range", data, len(acked), n, len(batches), len(kept_batches))


def encode_cursor_info(
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


def decode_cursor_info(
    data: bytes, where: str, ledger_sizes: Mapping[int, int] | None
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """State held by a Pulsar ``ManagedCursorInfo`` whose ack state lives in the record itself."""
    refuse_compact(data, where, "ManagedCursorInfo")
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
        batches = [batch_row(b) for b in info.batchedEntryDeletionIndexInfo]
    except BudgetExceeded:
        raise
    except (ValueError, TypeError) as e:
        raise CorruptSnapshot(f"{where}: {e}") from e
    return md, acked, batches, {p.name: p.value for p in info.properties}


def encode_long_list_map(
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
    info = position_info(md, kept_batches, properties)
    budget = limits.max_entry_bytes - info.ByteSize()
    if pulsar_quirks:
        words = acked.to_long_list_map(limits.max_unacked_ranges_to_persist, max_bytes=max(budget, 0))
    else:
        words = acked.to_long_list_map(max_bytes=max(budget, 0))
    rows = acked.ranges_array()
    runs = runs_per_ledger(acked)
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
            kept, ranges = words_through(values, last_entry), allowed
        field = long_list_map_field_size(ledger, kept)
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


def decode_position_info(
    data: bytes, where: str, ledger_sizes: Mapping[int, int] | None
) -> tuple[Position, RangeSet, list[BatchRow], dict[str, int]]:
    """State held by a Pulsar ``PositionInfo``.

    MessageRange is preferred over LongListMap, as Pulsar's recovery does; cross-ledger ranges are
    expanded with ``ledger_sizes`` when given.
    """
    refuse_compact(data, where, "PositionInfo")
    try:
        info = parse(ml.PositionInfo, data)
    except DecodeError as e:
        raise CorruptSnapshot(f"{where}: PositionInfo does not parse ({e})") from e
    try:
        md = mark_delete_of(info.ledgerId, info.entryId)
        acked = acked_from_info(info, data, ledger_sizes)
        batches = [batch_row(b) for b in info.batchedEntryDeletionIndexInfo]
    except BudgetExceeded:
        raise
    except (ValueError, TypeError) as e:
        raise CorruptSnapshot(f"{where}: {e}") from e
    return md, acked, batches, {p.name: p.value for p in info.properties}


def acked_from_info(info: ml.PositionInfo, data: bytes, ledger_sizes: Mapping[int, int] | None) -> RangeSet:
    if len(info.individualDeletedMessages):
        # Rows straight from the bytes in Rust: 1M ranges in ~0.1 s instead of seconds of Python.
        return RangeSet.from_message_range_field(data, 3, ledger_sizes)
    words = {m.key: np.array(m.values, dtype=np.int64) for m in info.individualDeletedMessageRanges}
    return RangeSet.from_long_list_map(words)


def batch_row(item: ml.BatchedEntryDeletionIndexInfo) -> BatchRow:
    """A persisted partial batch as a row (its batch size is unknown to Pulsar's form: 0)."""
    words = np.array(item.deleteSet, dtype="<i8").tobytes()
    return (item.position.ledgerId, item.position.entryId, 0, words)
