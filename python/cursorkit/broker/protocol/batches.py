"""Batches: how many messages a stored entry holds, and the messages of an uncompressed batch.

A producer that batches sends one entry whose metadata has ``num_messages_in_batch`` and whose
payload is the messages back to back, each ``size | SingleMessageMetadata | bytes`` (``size`` a
big-endian u32 counting the SingleMessageMetadata, whose ``payload_size`` counts the bytes). A batch
index ack names messages by their place in this list. A broker refuses an entry whose payload
cannot hold the messages its metadata counts (:func:`payload_holds`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from cursorkit.broker.protocol.frames import read_stored
from cursorkit.errors import InvalidArgument, ProtocolError
from cursorkit.proto import strict
from cursorkit.proto.pulsar_api_pb2 import (
    NONE,
    CompressionType,
    MessageMetadata,
    ServerError,
    SingleMessageMetadata,
)
from cursorkit.wire import batch_fits

__all__ = [
    "SingleMessage",
    "entries_in",
    "is_batch",
    "last_index",
    "pack_batch",
    "payload_holds",
    "split_batch",
]

_U32 = struct.Struct(">I")


@dataclass(frozen=True)
class SingleMessage:
    """One message of a batch: its metadata (key, properties, sequence id...) and its bytes."""

    metadata: SingleMessageMetadata
    payload: bytes


def is_batch(metadata: MessageMetadata) -> bool:
    """Whether an entry is a batch: its metadata has ``num_messages_in_batch`` (even a batch of one)."""
    return metadata.HasField("num_messages_in_batch")


def entries_in(metadata: MessageMetadata) -> int:
    """The messages an entry holds: ``num_messages_in_batch``, or 1 for an unbatched message.

    Raises:
        ProtocolError: ``num_messages_in_batch`` is below 1.
    """
    n = metadata.num_messages_in_batch if is_batch(metadata) else 1
    if n < 1:
        raise ProtocolError(f"num_messages_in_batch is {n}")
    return n


def last_index(stored: bytes) -> int | None:
    """The batch index of a stored entry's last message (``n - 1``), or None for an unbatched one.

    GET_LAST_MESSAGE_ID names it, so a reader's ``has_message_available`` sees the rest of a batch.
    """
    metadata, _ = read_stored(stored)
    return entries_in(metadata) - 1 if is_batch(metadata) else None


def payload_holds(metadata: MessageMetadata, stored: bytes) -> bool:
    """Whether ``stored``'s payload can hold the ``num_messages_in_batch`` its ``metadata`` claims.

    Each message takes 6 bytes at least (its size and a ``SingleMessageMetadata`` with
    ``payload_size``); a compressed payload is bounded by its codec's largest expansion and its
    stated ``uncompressed_size``. The same rule the frame scanner applies before it takes a SEND.
    """
    if not is_batch(metadata) or metadata.num_messages_in_batch <= 1:
        return True
    payload_bytes = len(stored) - 4 - _U32.unpack_from(stored)[0]
    stated = metadata.uncompressed_size if metadata.HasField("uncompressed_size") else None
    return batch_fits(metadata.num_messages_in_batch, max(0, payload_bytes), metadata.compression, stated)


def split_batch(stored: bytes) -> list[SingleMessage]:
    """The messages of a stored batch (``metadataSize | MessageMetadata | payload``), in batch order.

    Raises:
        ProtocolError: the entry is not a batch, its payload is not exactly ``num_messages_in_batch``
            well-formed messages, or it is compressed. A compressed batch carries ``server_error`` =
            ``UnsupportedVersionError``: this broker reads no compression codec, a feature missing
            from its version rather than a fault of the client's bytes.
    """
    metadata, offset = read_stored(stored)
    if not is_batch(metadata):
        raise ProtocolError("not a batch: the metadata has no num_messages_in_batch")
    if metadata.compression != NONE:
        raise ProtocolError(
            f"{CompressionType.Name(metadata.compression)}-compressed batch is not supported",
            server_error=ServerError.UnsupportedVersionError,
        )
    count = entries_in(metadata)
    view = memoryview(stored)
    messages: list[SingleMessage] = []
    for index in range(count):
        if len(view) - offset < 4:
            raise ProtocolError(f"batch ends before message {index} of {count}")
        (size,) = _U32.unpack_from(view, offset)
        start = offset + 4
        if size > len(view) - start:
            raise ProtocolError(f"message {index}: metadata of {size} bytes overruns the batch")
        try:
            single = strict.parse(SingleMessageMetadata, bytes(view[start : start + size]))
        except DecodeError as e:
            raise ProtocolError(f"message {index}: metadata does not parse: {e}") from None
        start += size
        if not 0 <= single.payload_size <= len(view) - start:
            raise ProtocolError(f"message {index}: payload_size {single.payload_size} overruns the batch")
        offset = start + single.payload_size
        messages.append(SingleMessage(single, bytes(view[start:offset])))
    if offset != len(view):
        raise ProtocolError(f"{len(view) - offset} bytes after the {count} messages of the batch")
    return messages


def pack_batch(messages: Sequence[SingleMessage]) -> bytes:
    """The payload of a batch of ``messages``, as a producer writes it (the inverse of :func:`split_batch`).

    Raises:
        InvalidArgument: a message's ``payload_size`` is unset or not the length of its bytes.
    """
    parts: list[bytes] = []
    for index, message in enumerate(messages):
        if not message.metadata.IsInitialized() or message.metadata.payload_size != len(message.payload):
            raise InvalidArgument(
                f"message {index}: payload_size {message.metadata.payload_size} "
                f"but {len(message.payload)} bytes"
            )
        encoded = message.metadata.SerializeToString()
        parts += (_U32.pack(len(encoded)), encoded, message.payload)
    return b"".join(parts)
