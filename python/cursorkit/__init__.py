"""cursorkit: the subscription state of a message broker (ack ranges, delayed delivery, Key_Shared)."""

from __future__ import annotations

from cursorkit import errors
from cursorkit._core import Position, RangeSet, __version__
from cursorkit.ackstate import (
    Cursor,
    CursorStore,
    DispatchPausePolicy,
    NonDurableCursor,
    PersistLimits,
    PersistResult,
)

__all__ = [
    "Cursor",
    "CursorStore",
    "DispatchPausePolicy",
    "NonDurableCursor",
    "PersistLimits",
    "PersistResult",
    "Position",
    "RangeSet",
    "__version__",
    "errors",
]
