"""One topic's durable message log: ledgers of entries in segment files, group-committed and recovered.

One directory per topic, locked (``flock``) by the ``MessageLog`` that has it open::

    ledger-<id, 20 digits>.seg        one ledger: a header, then entry records
    ledger-<id, 20 digits>.seg.idx    its index (:mod:`.index`), written when it is sealed or the
                                      log closed, removed before the next append to it

Little endian throughout. A segment's 48-byte header is ``magic (89 "CKSEG" 0d 0a) | version u16 (1)
| flags u16 (0) | ledger id u64 | previous ledger u64 | its entries u64 | its end u64 | CRC-32 u32``:
the ledger that was current when this one was made (``2^64-1`` for a log's first), how many entries
it held and where its served part ended (so a failed append left in its tail is never served), the
CRC covering the 44 bytes before it. Each entry is one record, ``CRC-32 u32 | length u32 | publish
time i64 (ms) | messages u32 | data``, the CRC covering everything after it; entry ids count the
records from 0.

A new ledger is written whole under a temp name (header, fsync, rename, fsync of the directory),
so a ledger's file always holds its header. An append writes its group of records in one write
and ``fdatasync``s it; trimming unlinks whole ledgers. Recovery (:mod:`.recovery`) loads each
ledger whose index file checks out against it, checks every record of the others, and reports what
it cannot serve in a :class:`LogRecoveryReport`; reads check every record's checksum.

The pieces: :mod:`.log` (``MessageLog``), :mod:`.segment` (one ledger's file and index),
:mod:`.format` (the bytes, and ``Entry``), :mod:`.index` (index files), :mod:`.scan` (reading a
segment record by record), :mod:`.recovery`.
"""

from __future__ import annotations

from cursorkit.broker.log.format import Entry, Read
from cursorkit.broker.log.log import MessageLog
from cursorkit.broker.log.recovery import LogRecoveryReport

__all__ = ["Entry", "LogRecoveryReport", "MessageLog", "Read"]
