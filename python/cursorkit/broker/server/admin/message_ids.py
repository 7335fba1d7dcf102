"""Numbers and message ids of admin requests, read as Pulsar's admin reads them.

A number in a path is Java's ``int`` or ``long``: one that does not parse, or does not fit, makes
the path match nothing (JAX-RS answers 404). A message id comes as JSON, Pulsar's
``ResetCursorData`` (``ledgerId``, ``entryId``, ``partitionIndex``, ``batchIndex``, ``isExcluded``,
``properties``; unknown fields ignored, missing ones at their defaults); JSON that does not parse,
or a field of the wrong type, is a 400. Where a cursor goes for an id is :func:`target_position`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from cursorkit import Position
from cursorkit.ackstate.starts import EARLIEST, LATEST, start_of
from cursorkit.broker.server.admin.bodies import read_json
from cursorkit.broker.server.admin.errors import RestError

if TYPE_CHECKING:
    from cursorkit.broker.log import MessageLog

__all__ = [
    "CursorTarget",
    "after_batch_indexes",
    "next_valid",
    "path_number",
    "read_target",
    "target_position",
]

_JAVA_INT = re.compile(r"[+-]?[0-9]{1,20}")
"""What Java's ``Integer.valueOf`` / ``Long.valueOf`` parse (ASCII digits; the range is checked apart)."""
_NOT_FOUND = "HTTP 404 Not Found"
"""JAX-RS's reason when a path parameter does not convert."""


def path_number(request: web.Request, key: str, *, bits: int) -> int:
    """The path parameter ``key`` as a signed ``bits``-bit integer; 404 when it is none (as JAX-RS)."""
    text = request.match_info[key]
    if not _JAVA_INT.fullmatch(text):
        raise RestError(404, _NOT_FOUND)
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise RestError(404, _NOT_FOUND)
    return value


@dataclass(frozen=True, slots=True)
class CursorTarget:
    """A ``ResetCursorData``: where a cursor should go (Pulsar's defaults for what is missing)."""

    ledger_id: int = 0
    entry_id: int = 0
    partition_index: int = -1
    batch_index: int = -1
    excluded: bool = False


def _long(body: dict[str, object], key: str, default: int, bits: int) -> int:
    """A JSON number field as Jackson reads a Java ``long``/``int`` (numeric strings and whole floats too)."""
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, str) and _JAVA_INT.fullmatch(value.strip()):
        value = int(value.strip())
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RestError(400, f"{key} must be an integer, got {json.dumps(value)[:100]}")
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise RestError(400, f"{key} {value} does not fit a {bits}-bit integer")
    return value


def _flag(body: dict[str, object], key: str) -> bool:
    """A JSON boolean field (``"true"``/``"false"`` strings too, as Jackson coerces them)."""
    value = body.get(key, False)
    if value is None:
        return False
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise RestError(400, f"{key} must be a boolean, got {json.dumps(value)[:100]}")
    return value


async def read_target(request: web.Request) -> CursorTarget | None:
    """The request's ``ResetCursorData`` body; None when there is none (an empty body or ``null``).

    The body is at most the server's ``MAX_BODY``; ``properties`` (subscription properties) are
    accepted and not kept.
    """
    body = await read_json(request)
    if body is None:
        return None
    if not isinstance(body, dict):
        raise RestError(400, "the body must be a JSON object (a message id: ledgerId, entryId, ...)")
    properties = body.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise RestError(400, "properties must be a JSON object")
    return CursorTarget(
        ledger_id=_long(body, "ledgerId", 0, 64),
        entry_id=_long(body, "entryId", 0, 64),
        partition_index=_long(body, "partitionIndex", -1, 32),
        batch_index=_long(body, "batchIndex", -1, 32),
        # The Java admin client writes the property ``excluded`` (Lombok's ``isExcluded()``).
        excluded=_flag(body, "isExcluded") or _flag(body, "excluded"),
    )


def next_valid(log: MessageLog, position: Position) -> Position:
    """``position`` when the log holds it, else the next entry it holds, else the end of the log.

    Pulsar's reset to a position no ledger holds (trimmed, past a ledger's end, a ledger that never
    was): the next valid one, the end when none follows. O(ledgers).
    """
    for ledger_id, entries in log.ledger_sizes().items():
        if ledger_id < position.ledger_id or not entries:
            continue
        if ledger_id == position.ledger_id:
            if position.entry_id < entries:
                return Position(ledger_id, max(position.entry_id, 0))
            continue
        return Position(ledger_id, 0)
    return log.end_position


def target_position(log: MessageLog, ledger_id: int, entry_id: int) -> Position:
    """Where a cursor restarts for a message id: its entry (or the next valid), or an end of the log.

    ``MessageId.earliest`` (ledger -1) is the first entry held, ``MessageId.latest`` (ledger 2^63 - 1)
    the end (nothing left to read).
    """
    start = start_of(ledger_id, entry_id)
    if start == EARLIEST:
        return next_valid(log, Position(0, 0))
    if start == LATEST:
        return log.end_position
    assert isinstance(start, Position)
    return next_valid(log, start)


def after_batch_indexes(size: int, acked: int) -> list[int]:
    """``ack_set`` words of a batch of ``size`` whose first ``acked`` indexes are acknowledged.

    Set bits are the indexes still to deliver (Pulsar's form), as signed 64-bit words.
    """
    bits = ((1 << size) - 1) & ~((1 << acked) - 1)
    words = []
    for i in range(-(-size // 64)):
        word = (bits >> (64 * i)) & ((1 << 64) - 1)
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
    return words
