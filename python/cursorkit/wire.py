"""Pulsar's bytes, done in Rust: what a broker on the wire protocol needs of ``cursorkit-core``.

The reference broker (``cursorkit.broker``) uses these and nothing else of the extension:

* :class:`FrameScanner` splits a connection's stream into frames, SEND/ACK/FLOW decoded;
* :func:`message_frames` and :func:`send_receipts` build many MESSAGE frames or receipts in one call;
* :func:`entry_fields` reads the deliver-at time and key of a whole read's entries;
* :func:`encode_records` / :func:`decode_records` are a message log's checksummed records;
* :func:`crc32c` is Pulsar's frame checksum, and :func:`batch_fits` the rule a batch's payload
  must meet to hold the messages its metadata counts.
"""

from __future__ import annotations

from cursorkit._core import (
    FrameScanner,
    batch_fits,
    crc32c,
    decode_records,
    encode_records,
    entry_fields,
    message_frames,
    send_receipts,
)

__all__ = [
    "FrameScanner",
    "batch_fits",
    "crc32c",
    "decode_records",
    "encode_records",
    "entry_fields",
    "message_frames",
    "send_receipts",
]
