"""Batches: how many messages a stored entry holds, and the messages of an uncompressed batch.

A producer that batches sends one entry whose metadata has ``num_messages_in_batch`` and whose
payload is the messages back to back, each ``size | SingleMessageMetadata | bytes`` (``size`` a
big-endian u32 counting the SingleMessageMetadata, whose ``payload_size`` counts the bytes). A batch
index ack names messages by their place in this list.
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

__all__ = ["SingleMessage", "entries_in", "is_batch", "pack_batch", "split_batch"]

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
