"""The three byte forms of a cursor's ack state, and their truncation reports.

* ``message_range``: Pulsar's ``PositionInfo`` with ``MessageRange`` entries (field 3);
* ``long_list_map``: ``PositionInfo`` with ``LongListMap`` BitSet words (field 6);
* ``compact``: our ``CursorSnapshot``, a roaring portable bitmap per ledger, checksummed;
* ``managed_cursor_info``: Pulsar's metadata-store record (``cursorsLedgerId = -1``: the ack state
  lives in it), cut at ``max_unacked_ranges_to_persist_in_metadata_store`` ranges.

A persist never truncates silently: :class:`PersistResult` says what was written and what was cut.

The pieces: :mod:`.encode` (one call for every form), :mod:`.pulsar` and :mod:`.compact` (each form,
written and read), :mod:`.budget` (what fits the limits), :mod:`.result` (names, results, checks).
"""

from __future__ import annotations

from cursorkit.ackstate.persist.budget import batches_within, ranges_within
from cursorkit.ackstate.persist.compact import (
    SNAPSHOT_VERSION,
    open_snapshot,
    seal,
    snapshot_message,
    snapshot_state,
)
from cursorkit.ackstate.persist.encode import encode
from cursorkit.ackstate.persist.pulsar import (
    add_batch_infos,
    cursor_info_state,
    decode_cursor_info,
    decode_position_info,
)
from cursorkit.ackstate.persist.result import (
    ENCODINGS,
    MAX_ENTRY_ID,
    BatchRow,
    Encoding,
    PersistedCursor,
    PersistResult,
    check_encoding,
    checked_properties,
    mark_delete_of,
)

__all__ = [
    "ENCODINGS",
    "MAX_ENTRY_ID",
    "SNAPSHOT_VERSION",
    "BatchRow",
    "Encoding",
    "PersistResult",
    "PersistedCursor",
    "add_batch_infos",
    "batches_within",
    "check_encoding",
    "checked_properties",
    "cursor_info_state",
    "decode_cursor_info",
    "decode_position_info",
    "encode",
    "mark_delete_of",
    "open_snapshot",
    "ranges_within",
    "seal",
    "snapshot_message",
    "snapshot_state",
]
