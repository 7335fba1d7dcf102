"""A cursor's ack state in its Pulsar znode in ZooKeeper, written by one owner at a time.

The znode is the one Pulsar's broker keeps for the cursor (``/managed-ledgers/<tenant>/<ns>/
persistent/<topic>/<cursor>``) and holds a ``ManagedCursorInfo`` that Pulsar's parser reads
(:mod:`.znode`). What Pulsar's metadata-store limit leaves out (beyond 1,000 ranges
by default, or the znode's byte budget) goes first to an immutable state object on an object store
(``objects=``), which the znode then names with its SHA-256.

**Ownership.** Opening for writing advances an *owner epoch* kept in the znode, with a versioned
write. Every write is versioned too; one that meets a newer epoch raises :class:`~cursorkit.errors.Fenced`
and publishes nothing. A version conflict is settled by re-reading the znode, never by giving up:
a newer epoch fences, the store's own earlier write (a reply lost with the connection) is
recognised, anything else is overwritten by the owner.

**Size.** No write passes ``max_znode_bytes``: a record is written plain when it fits, else in
Pulsar's ZLIB form, else with ranges cut (reported); ZooKeeper would drop the connection of a
request past its ``jute.maxbuffer`` and fail the calls of every store on the session.

**Failures.** A call ZooKeeper does not answer within ``operation_timeout`` fails with
``PersistFailed`` (a write) or ``StoreUnavailable`` (a read); the previous flush stays what a
reader recovers, and the store stays usable. A lost connection is retried at least every
0.6 s (:data:`~cursorkit.stores.zookeeper.RECONNECT_MAX_DELAY`), so flushes work again
within about a second of ZooKeeper's return. A write whose outcome is unknown may still land later;
the next write settles it. State objects are deleted only once nothing can publish them again.

The pieces: :mod:`.store` (``ZkCursorStore``, what a broker opens), :mod:`.opening` (create, recover,
take ownership), :mod:`.claims` (owner epochs), :mod:`.node` (versioned writes and conflicts),
:mod:`.flush`, :mod:`.state_objects`, :mod:`.properties`, :mod:`.reports` and :mod:`.znode` (bytes).
"""

from __future__ import annotations

from cursorkit.ackstate.store.zookeeper.flush import PendingFlush
from cursorkit.ackstate.store.zookeeper.properties import ZkCursorProperties
from cursorkit.ackstate.store.zookeeper.reports import ZkFlushResult, ZkRecoveryReport
from cursorkit.ackstate.store.zookeeper.store import DEFAULT_MAX_ZNODE_BYTES, ZkCursorStore, flush_many

__all__ = [
    "DEFAULT_MAX_ZNODE_BYTES",
    "PendingFlush",
    "ZkCursorProperties",
    "ZkCursorStore",
    "ZkFlushResult",
    "ZkRecoveryReport",
    "flush_many",
]
