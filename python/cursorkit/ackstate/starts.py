"""Where a reader starts: a position, or one of Pulsar's two ends (``EARLIEST``, ``LATEST``).

Apart from :mod:`.non_durable` (which re-exports it) so that reading a client's start message id
needs neither the cursor nor numpy: the broker's commands import it before any topic is open.
"""

from __future__ import annotations

from typing import Literal

from cursorkit._core import Position

__all__ = ["EARLIEST", "LATEST", "Start", "start_of"]

Start = Literal["earliest", "latest"]
"""An end of the topic rather than a message: Pulsar's ``MessageId.earliest`` and ``latest``."""
EARLIEST: Start = "earliest"
LATEST: Start = "latest"

_U64 = 1 << 64
_LATEST_LEDGER = (1 << 63) - 1
"""``MessageId.latest``'s ledger id (``INT64_MAX``): only the ledger id decides, as in Pulsar."""


def start_of(ledger_id: int, entry_id: int) -> Position | Start:
    """A message id as a client sends it: a position, or one of Pulsar's sentinels for the ends.

    ``MessageId.earliest`` is ledger -1 (2^64 - 1 on the wire, where ids are unsigned) and
    ``latest`` ledger 2^63 - 1; an entry of -1 (2^64 - 1) is ``-1``. Other ids must be positions.
    """
    ledger = ledger_id - _U64 if ledger_id >= 1 << 63 else ledger_id
    entry = entry_id - _U64 if entry_id >= 1 << 63 else entry_id
    if ledger < 0:
        return EARLIEST
    if ledger >= _LATEST_LEDGER:
        return LATEST
    return Position(ledger, max(entry, -1))
