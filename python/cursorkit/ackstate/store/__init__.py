"""Where a cursor's ack state lives between restarts: one interface, a file store and a ZooKeeper store.

:class:`CursorStore` is the interface (chosen by location); :mod:`.file` keeps a cursor in a local
log, :mod:`.zookeeper` in its Pulsar znode. Cursor properties (Pulsar's string ``cursorProperties``)
have one interface too, :class:`CursorProperties`, which every store's properties implement.
:class:`RedeliveryJournal` keeps a cursor's durable redelivery counts beside it (beyond Pulsar).
"""

from __future__ import annotations

from cursorkit.ackstate.store.api import CursorStore, StoreFlush, StoreReport
from cursorkit.ackstate.store.file import FileCursorStore, FlushResult, RecoveryReport, StoreOptions
from cursorkit.ackstate.store.file.log import DamagedRecord
from cursorkit.ackstate.store.properties import CursorProperties, FileCursorProperties, MemoryCursorProperties
from cursorkit.ackstate.store.redelivery_journal import JournalReport, RedeliveryJournal
from cursorkit.ackstate.store.zookeeper import (
    ZkCursorProperties,
    ZkCursorStore,
    ZkFlushResult,
    ZkRecoveryReport,
    flush_many,
)

__all__ = [
    "CursorProperties",
    "CursorStore",
    "DamagedRecord",
    "FileCursorProperties",
    "FileCursorStore",
    "FlushResult",
    "JournalReport",
    "MemoryCursorProperties",
    "RecoveryReport",
    "RedeliveryJournal",
    "StoreFlush",
    "StoreOptions",
    "StoreReport",
    "ZkCursorProperties",
    "ZkCursorStore",
    "ZkFlushResult",
    "ZkRecoveryReport",
    "flush_many",
]
