"""Ack state: the Cursor, its persisted forms, durable cursor stores (files, ZooKeeper) and PIP-299."""

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
from cursorkit.ackstate.store_api import StoreFlush, StoreReport
from cursorkit.ackstate.zk_store import (
    ZkCursorProperties,
    ZkCursorStore,
    ZkFlushResult,
    ZkRecoveryReport,
    flush_many,
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
