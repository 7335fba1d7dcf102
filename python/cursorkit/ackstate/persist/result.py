"""What persisting reads of a cursor and what it returns: the forms' names, results and checked values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cursorkit._core import Position, RangeSet
from cursorkit.errors import (
    InvalidArgument,
    InvalidInputType,
    InvalidPosition,
)

__all__ = [
    "ENCODINGS",
    "MAX_ENTRY_ID",
    "BatchRow",
    "Encoding",
    "PersistResult",
    "PersistedCursor",
    "check_encoding",
    "checked_properties",
    "mark_delete_of",
]


class PersistedCursor(Protocol):
    """What persisting reads of a cursor.

    ``Cursor`` provides it; naming a protocol here keeps ``persist`` free of any import of
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


def mark_delete_of(ledger_id: int, entry_id: int) -> Position:
    """A persisted mark-delete position, checked as a cursor will check it.

    An entry outside -1..2^32-1 (no cursor holds one) is ``InvalidPosition``, which the decoders
    report as ``CorruptSnapshot``.
    """
    if not -1 <= entry_id <= MAX_ENTRY_ID:
        raise InvalidPosition(f"mark-delete {ledger_id}:{entry_id} has an entry outside -1..{MAX_ENTRY_ID}")
    return Position(ledger_id, entry_id)
