"""cursorkit: the subscription state of a message broker (ack ranges, delayed delivery, Key_Shared).

The ack-state names load on first use (they import numpy): ``import cursorkit`` stays cheap for
what needs only :class:`Position` or :mod:`errors`, such as the broker's start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cursorkit import errors
from cursorkit._core import Position, RangeSet, __version__

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


def __getattr__(name: str) -> object:
    """A lazy name's value (imported once, then kept in the module like any other)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name, the lazy ones included."""
    return sorted(set(globals()) | set(__all__))
