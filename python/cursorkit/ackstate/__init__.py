"""Ack state: the Cursor and a reader's NonDurableCursor, persisted forms, durable stores, redeliveries."""

from __future__ import annotations

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.cursor import Cursor, CursorStats, TruncationCounters
from cursorkit.ackstate.limits import NETTY_MAX_FRAME_BYTES, PersistLimits
from cursorkit.ackstate.non_durable import NonDurableCursor
from cursorkit.ackstate.persist import ENCODINGS, PersistResult
from cursorkit.ackstate.policy import DispatchPausePolicy
from cursorkit.ackstate.raised_counts import RaisedCounts
from cursorkit.ackstate.store import (
    CursorProperties,
    CursorStore,
    DamagedRecord,
    FileCursorProperties,
    FileCursorStore,
    FlushResult,
    JournalReport,
    MemoryCursorProperties,
    RecoveryReport,
    RedeliveryJournal,
    StoreFlush,
    StoreOptions,
    StoreReport,
    ZkCursorProperties,
    ZkCursorStore,
    ZkFlushResult,
    ZkRecoveryReport,
    flush_many,
)
from cursorkit.fsio import Opener, StoreFile

__all__ = [
    "Cursor",
    "CursorProperties",
    "CursorStats",
    "CursorStore",
    "DamagedRecord",
    "DispatchPausePolicy",
    "ENCODINGS",
    "FileCursorProperties",
    "FileCursorStore",
    "FlushResult",
    "JournalReport",
    "MemoryCursorProperties",
    "NETTY_MAX_FRAME_BYTES",
    "NonDurableCursor",
    "Opener",
    "PersistLimits",
    "PersistResult",
    "RaisedCounts",
    "RecoveryReport",
    "RedeliveryCounts",
    "RedeliveryJournal",
    "StoreFile",
    "StoreFlush",
    "StoreOptions",
    "StoreReport",
    "TruncationCounters",
    "ZkCursorProperties",
    "ZkCursorStore",
    "ZkFlushResult",
    "ZkRecoveryReport",
    "flush_many",
]
