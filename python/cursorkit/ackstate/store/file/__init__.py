"""A cursor's ack state made durable on local files, incrementally and crash-safely.

The embedded stand-in for Pulsar's cursor ledger + metadata store, in the layout PIP-81 proposed and
Pulsar never shipped: a flush appends one record per *dirty* ledger and a checkpoint marker naming the
live record of every ledger, so its cost follows what changed rather than the whole backlog.

One directory per cursor::

    store.meta           current log generation (replaced atomically: temp, fsync, rename, fsync dir)
    cursor-<gen>.log     append-only log of that generation
    cursor.properties    the cursor's string properties, if any were set (``cursor_properties``)

A log starts with ``LOG_MAGIC`` (8 bytes) and a HEADER record; then LEDGER and MARKER records. A
record is ``sync "CK" | kind u8 | flags u8 (0) | payload length u32 | payload | CRC-32 u32``, little
endian, the CRC covering header and payload. Payloads are protobuf (``cursor_store.proto``): HEADER a
``LogHeader``, LEDGER a ``cursor_snapshot.LedgerAcks`` (roaring portable bitmap), MARKER a
``Checkpoint`` (mark-delete, batches, properties, and (ledger, offset, length) of every live record).
``store.meta`` is ``META_MAGIC | length u32 | StoreMeta | CRC-32 u32`` (CRC over all before it).

Recovery uses the last marker whose record and referenced ledger records are intact; damage is
reported in :class:`RecoveryReport` and only a store with no usable marker left raises
``CorruptSnapshot``. Compaction rolls the live records into a new generation once dead bytes exceed
``StoreOptions``' threshold.

A log cut exactly at a flush boundary is indistinguishable from a crash before that flush: nothing
records the last flush outside the log (that would cost more than the flush itself), so recovery
returns the flush before the cut, unreported. A crash only cuts a flush that had not returned; a
cut after ``flush`` returned loses the acks of the flushes cut, and their messages are redelivered,
never skipped. Any other cut is reported.

The pieces: :mod:`.store` (``FileCursorStore``), :mod:`.generations` (the log files and how they
are written), :mod:`.log` (the record format and its recovery), :mod:`.reports`.
"""

from __future__ import annotations

from cursorkit.ackstate.store.file.reports import FlushResult, RecoveryReport, StoreOptions
from cursorkit.ackstate.store.file.store import FileCursorStore

__all__ = ["FileCursorStore", "FlushResult", "RecoveryReport", "StoreOptions"]
