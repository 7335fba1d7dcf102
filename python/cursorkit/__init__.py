"""cursorkit: the subscription state of a message broker (ack ranges, delayed delivery, Key_Shared).

The ack-state names load on first use (they import numpy): ``import cursorkit`` stays cheap for
what needs only :class:`Position` or :mod:`errors`, such as the broker's start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cursorkit import errors
from cursorkit._core import Position, RangeSet, __version__
from cursorkit._lazy import lazy_names

if TYPE_CHECKING:
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

_LAZY = {
    "Cursor": "cursorkit.ackstate",
    "CursorStore": "cursorkit.ackstate",
    "DispatchPausePolicy": "cursorkit.ackstate",
    "NonDurableCursor": "cursorkit.ackstate",
    "PersistLimits": "cursorkit.ackstate",
    "PersistResult": "cursorkit.ackstate",
}
"""Names imported on first use, and their module."""
_SUBMODULES = frozenset({"ackstate", "fsio", "proto", "stores"})
"""Submodules ``import cursorkit`` used to import: still attributes of the package, on first use."""


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY, _SUBMODULES)
