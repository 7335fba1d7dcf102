"""Persisting a cursor in one of the forms, within the limits, with a report of what was cut."""

from __future__ import annotations

from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist.budget import fit_batches
from cursorkit.ackstate.persist.compact import encode_compact
from cursorkit.ackstate.persist.pulsar import encode_cursor_info, encode_long_list_map, encode_message_range
from cursorkit.ackstate.persist.result import (
    PersistedCursor,
    PersistResult,
    check_encoding,
    checked_properties,
)

__all__ = ["encode"]


def encode(cursor: PersistedCursor, encoding: str, limits: PersistLimits) -> PersistResult:
    """Serialises the cursor's ack state in one of the three forms, within ``limits``."""
    form = check_encoding(encoding)
    md, ledgers, _live, batches, _ = cursor.flush_state(dirty_only=False, clear_dirty=False)
    properties = checked_properties(cursor.properties, f"cursor {cursor.name!r}")
    kept_batches = fit_batches(batches, properties, limits, f"cursor {cursor.name!r}")
    if form == "compact":
        blobs = [(ledger, blob) for ledger, blob in ledgers if blob is not None]
        return encode_compact(cursor, md, blobs, batches, kept_batches, properties, limits)
    acked = cursor.individually_deleted
    if form == "managed_cursor_info":
        return encode_cursor_info(md, acked, batches, kept_batches, properties, limits)
    if form == "message_range":
        return encode_message_range(md, acked, batches, kept_batches, properties, limits)
    return encode_long_list_map(md, acked, batches, kept_batches, properties, limits, cursor.pulsar_quirks)
