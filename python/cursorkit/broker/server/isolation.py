"""Stuck-consumer isolation's re-reads: the spilled entries a Key_Shared dispatcher names, read again.

The dispatcher names a span of the log (``take_reread``); it is read a read at a time, each read
handed back with how far it went (``add_reread``), so the next span starts after it: every spilled
entry is read back once per spill. A dispatch reads until the look-ahead has no room left (the
dispatcher names nothing then) or ``REREAD_PER_DISPATCH`` entries.
"""

from __future__ import annotations

from cursorkit.broker.log import MessageLog
from cursorkit.broker.protocol.hot_frames import entry_fields
from cursorkit.keyshared import Entry as ReadEntry
from cursorkit.keyshared import KeySharedDispatcher, hash_many, slots

__all__ = ["REREAD_PER_DISPATCH", "reread_spilled"]

REREAD_PER_DISPATCH = 5_000
"""Log entries one dispatch reads again at most (the rest on the next turn of the event loop)."""
_READ_BYTES = 4 * 1024 * 1024
"""The most one read of the log returns (at least one entry)."""


def reread_spilled(log: MessageLog, ks: KeySharedDispatcher, read_batch: int) -> bool:
    """Reads again, ``read_batch`` entries at a time, the spilled spans ``ks`` names.

    Returns True when ``REREAD_PER_DISPATCH`` entries were read and more is left (the caller
    dispatches again soon); what came back is dispatched first.
    """
    read = 0
    while (span := ks.take_reread()) is not None:
        if read >= REREAD_PER_DISPATCH:
            return True  # the span is named again, as it is, at the next dispatch
        first, last = span
        got = log.read_from(first, read_batch, _READ_BYTES)
        part = [e for e in got if e.position <= last]
        whole = not part or len(part) < len(got) or part[-1].position == last
        _due, keys = entry_fields([e.data for e in part])
        found = slots(hash_many(keys), ks.slot_kind)
        read += len(part)
        entries = (ReadEntry(e.position, int(s)) for e, s in zip(part, found, strict=True))
        ks.add_reread(entries, None if whole else part[-1].position)
    return False
