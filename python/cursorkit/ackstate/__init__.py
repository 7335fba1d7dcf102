"""Ack state: the Cursor, its persisted forms, the durable CursorStore and the PIP-299 pause policy."""

from __future__ import annotations

from cursorkit.ackstate.cursor import Cursor, CursorStats, TruncationCounters
from cursorkit.ackstate.limits import NETTY_MAX_FRAME_BYTES, PersistLimits
from cursorkit.ackstate.persist import ENCODINGS, PersistResult
from cursorkit.ackstate.policy import DispatchPausePolicy
from cursorkit.ackstate.store import (
    CursorStore,
    DamagedRecord,
    FileCursorStore,
    FlushResult,
    Opener,
    RecoveryReport,
    StoreFile,
    StoreOptions,
)

__all__ = [
    "ENCODINGS",
    "NETTY_MAX_FRAME_BYTES",
    "Cursor",
    "CursorStats",
    "CursorStore",
    "DamagedRecord",
    "DispatchPausePolicy",
    "FileCursorStore",
    "FlushResult",
    "Opener",
    "PersistLimits",
    "PersistResult",
    "RecoveryReport",
    "StoreFile",
    "StoreOptions",
    "TruncationCounters",
]
