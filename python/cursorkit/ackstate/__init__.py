"""Ack state: the Cursor and a reader's NonDurableCursor, persisted forms, durable stores, redeliveries.

Names load on first use (the cursor and its stores import numpy and protobuf): the broker imports
:mod:`.starts` before listening without paying for the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cursorkit._core import RedeliveryCounts
from cursorkit._lazy import lazy_names

if TYPE_CHECKING:
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

_LAZY = {
    "Cursor": "cursorkit.ackstate.cursor",
    "CursorStats": "cursorkit.ackstate.cursor",
    "TruncationCounters": "cursorkit.ackstate.cursor",
    "NETTY_MAX_FRAME_BYTES": "cursorkit.ackstate.limits",
    "PersistLimits": "cursorkit.ackstate.limits",
    "NonDurableCursor": "cursorkit.ackstate.non_durable",
    "ENCODINGS": "cursorkit.ackstate.persist",
    "PersistResult": "cursorkit.ackstate.persist",
    "DispatchPausePolicy": "cursorkit.ackstate.policy",
    "RaisedCounts": "cursorkit.ackstate.raised_counts",
    "CursorProperties": "cursorkit.ackstate.store",
    "CursorStore": "cursorkit.ackstate.store",
    "DamagedRecord": "cursorkit.ackstate.store",
    "FileCursorProperties": "cursorkit.ackstate.store",
    "FileCursorStore": "cursorkit.ackstate.store",
    "FlushResult": "cursorkit.ackstate.store",
    "JournalReport": "cursorkit.ackstate.store",
    "MemoryCursorProperties": "cursorkit.ackstate.store",
    "RecoveryReport": "cursorkit.ackstate.store",
    "RedeliveryJournal": "cursorkit.ackstate.store",
    "StoreFlush": "cursorkit.ackstate.store",
    "StoreOptions": "cursorkit.ackstate.store",
    "StoreReport": "cursorkit.ackstate.store",
    "ZkCursorProperties": "cursorkit.ackstate.store",
    "ZkCursorStore": "cursorkit.ackstate.store",
    "ZkFlushResult": "cursorkit.ackstate.store",
    "ZkRecoveryReport": "cursorkit.ackstate.store",
    "flush_many": "cursorkit.ackstate.store",
    "Opener": "cursorkit.fsio",
    "StoreFile": "cursorkit.fsio",
}
"""Names imported on first use, and their module."""


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
