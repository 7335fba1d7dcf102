"""Pulsar frames: an incremental decoder of the byte stream a client sends, and the frame encoders.

A frame, all sizes unsigned 32-bit and magics 16-bit, big-endian::

    totalSize | commandSize | BaseCommand                          (every command)
        [0x0e02 | size | BrokerEntryMetadata]                      (SEND, MESSAGE: the payload section)
        [0x0e01 | CRC-32C of the rest]
        metadataSize | MessageMetadata | payload                   (the "stored" bytes)

``totalSize`` counts the bytes after itself. Only SEND and MESSAGE carry a payload section, and both
must; any other command ends its frame. The stored bytes, from ``metadataSize`` to the frame's end,
are what a broker keeps of a SEND and hands back unchanged in a MESSAGE.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from cursorkit.broker.protocol.checksum import crc32c
from cursorkit.errors import InvalidArgument, ProtocolError
from cursorkit.proto import strict
from cursorkit.proto.pulsar_api_pb2 import BaseCommand, BrokerEntryMetadata, MessageMetadata

__all__ = [
    "BROKER_ENTRY_METADATA_MAGIC",
    "CHECKSUM_MAGIC",
    "MAX_FRAME_SIZE",
    "PAYLOAD_COMMANDS",
    "Frame",
    "FrameDecoder",
    "Payload",
    "decode_frame",
    "encode_command",
    "encode_payload_command",
    "pack_stored",
    "read_stored",
    "sub_command",
]

MAX_FRAME_SIZE = 5 * 1024 * 1024
"""The largest ``totalSize`` the C++ client accepts (its ``MaxFrameSize``), and the decoder's default."""
CHECKSUM_MAGIC = 0x0E01
BROKER_ENTRY_METADATA_MAGIC = 0x0E02
PAYLOAD_COMMANDS = frozenset({BaseCommand.SEND, BaseCommand.MESSAGE})
"""The command types whose frames carry a payload section (and must)."""

_U32 = struct.Struct(">I")
_MAGIC_AND_U32 = struct.Struct(">HI")
# BaseCommand's field for each command type has the type's number.
_FIELDS = {n: f for n, f in BaseCommand.DESCRIPTOR.fields_by_number.items() if n != 1}

M = TypeVar("M", bound=Message)


@dataclass
class Payload:
    """The payload section of a SEND or MESSAGE frame.

    Attributes:
        metadata: the parsed ``MessageMetadata``. When ``checksum_ok`` is False the bytes are not
            trusted and this is whatever parsed (an empty ``MessageMetadata`` if nothing did): a
            broker answers such a SEND with ``SEND_ERROR`` ``ChecksumError`` and keeps nothing.
        stored: ``metadataSize`` + ``MessageMetadata`` + payload, to the end of the frame: what a
            broker stores and later sends back with :func:`encode_payload_command`.
        checksum_ok: whether the CRC-32C after magic 0x0e01 matches ``stored``; None when the frame
            has no checksum (clients skip it when the server's protocol version is below 6).
        broker_entry_metadata: the ``BrokerEntryMetadata`` after magic 0x0e02 (only a broker writes
            one), or None.
    """

    metadata: MessageMetadata
    stored: bytes
    checksum_ok: bool | None
    broker_entry_metadata: BrokerEntryMetadata | None = None


@dataclass
class Frame:
    """One decoded frame: its command, and its payload section for SEND and MESSAGE (else None)."""

    command: BaseCommand
    payload: Payload | None = None


class FrameDecoder:
    """Turns a byte stream, in chunks of any size, into frames.

    Any split of the same stream gives the same frames. Between calls the decoder holds at most one
    unfinished frame: a size field over ``max_frame_size`` is refused as soon as its 4 bytes arrive,
    before any of the frame is buffered. Every malformed input raises ``ProtocolError``: a frame
    over the limit, a size field that does not fit, a command that does not parse, lacks a required
    field, is of an undeclared type or lacks its sub-command, a payload section on a command without
    one (or none on SEND/MESSAGE), metadata that does not parse. After an error the stream has no
    known frame boundary: every later ``feed`` raises it again, and the connection should close.

    Args:
        max_frame_size: the largest ``totalSize`` accepted (Pulsar's 5 MiB by default).
    """

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        if max_frame_size < 8:
            raise InvalidArgument(f"max_frame_size must be at least 8, got {max_frame_size!r}")
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._failed: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """The frames completed by ``data``, in stream order.

        Raises:
            ProtocolError: the stream is malformed (see the class); frames completed earlier in the
                same call are dropped with it.
        """
        if self._failed is not None:
            raise ProtocolError(f"stream already failed: {self._failed}") from self._failed
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        start = 0
        try:
            while len(buffer) - start >= 4:
                (size,) = _U32.unpack_from(buffer, start)
                self._check_size(size, buffer, start)
                end = start + 4 + size
                if len(buffer) < end:
                    break
                frames.append(decode_frame(bytes(buffer[start + 4 : end])))
                start = end
        except ProtocolError as e:
            self._failed = e
            self._buffer = bytearray()
            raise
        del buffer[:start]
        return frames

    def _check_size(self, size: int, buffer: bytearray, start: int) -> None:
        if size > self.max_frame_size:
            raise ProtocolError(f"frame of {size} bytes is over the limit of {self.max_frame_size}")
        if size < 4:
            raise ProtocolError(f"frame size {size} leaves no room for the command size")
        if len(buffer) - start >= 8:
            (command_size,) = _U32.unpack_from(buffer, start + 4)
            if command_size > size - 4:
                raise ProtocolError(f"command size {command_size} does not fit a frame of {size} bytes")


def decode_frame(body: bytes) -> Frame:
    """A frame from its bytes after ``totalSize`` (sizes already checked to fit), fully checked.

    Raises:
        ProtocolError: the frame is malformed (see :class:`FrameDecoder`).
    """
    (command_size,) = _U32.unpack_from(body, 0)
    command = _parse(BaseCommand, body[4 : 4 + command_size], "command")
    sub_command(command)
    rest = memoryview(body)[4 + command_size :]
    if command.type in PAYLOAD_COMMANDS:
        return Frame(command, _payload(rest))
    if rest:
        name = BaseCommand.Type.Name(command.type)
        raise ProtocolError(f"{name} frame has {len(rest)} bytes after its command")
    return Frame(command)


def _payload(section: memoryview) -> Payload:
    entry_metadata = None
    if _magic_at(section, BROKER_ENTRY_METADATA_MAGIC):
        _, size = _MAGIC_AND_U32.unpack_from(section, 0)
        if size > len(section) - 6:
            raise ProtocolError(f"broker entry metadata of {size} bytes overruns the frame")
        entry_metadata = _parse(BrokerEntryMetadata, section[6 : 6 + size], "broker entry metadata")
        section = section[6 + size :]
    checksum_ok = None
    if _magic_at(section, CHECKSUM_MAGIC):
        _, expected = _MAGIC_AND_U32.unpack_from(section, 0)
        section = section[6:]
        checksum_ok = crc32c(section) == expected
    stored = bytes(section)
    if checksum_ok is False:
        try:
            metadata, _ = read_stored(stored)
        except ProtocolError:
            metadata = MessageMetadata()
    else:
        metadata, _ = read_stored(stored)
    return Payload(metadata, stored, checksum_ok, entry_metadata)


def _magic_at(section: memoryview, magic: int) -> bool:
    """Whether ``section`` starts with ``magic``; one with no room for its size field is refused."""
    if len(section) < 2 or (section[0] << 8 | section[1]) != magic:
        return False
    if len(section) < 6:
        raise ProtocolError(f"magic {magic:#06x} with no room for the 4 bytes after it")
    return True


def read_stored(stored: bytes | memoryview) -> tuple[MessageMetadata, int]:
    """The ``MessageMetadata`` at the head of stored bytes, and the offset where the payload starts.

    ``stored`` is ``metadataSize | MessageMetadata | payload``; ``stored[offset:]`` is the payload.

    Raises:
        ProtocolError: the size does not fit, or the metadata does not parse or lacks a required field.
    """
    if len(stored) < 4:
        raise ProtocolError(f"payload section of {len(stored)} bytes has no metadata size")
    (size,) = _U32.unpack_from(stored, 0)
    if size > len(stored) - 4:
        raise ProtocolError(f"metadata of {size} bytes overruns the {len(stored) - 4} bytes after its size")
    return _parse(MessageMetadata, stored[4 : 4 + size], "message metadata"), 4 + size


def _parse(cls: type[M], data: bytes | memoryview, what: str) -> M:
    try:
        return strict.parse(cls, bytes(data))
    except DecodeError as e:
        raise ProtocolError(f"{what} does not parse: {e}") from None


def sub_command(command: BaseCommand) -> Message:
    """The sub-command its ``type`` names (``command.send`` for SEND...).

    Raises:
        ProtocolError: the type has no sub-command declared here (transactions, topic watchers,
            schema creation, REACHED_END_OF_TOPIC), or the sub-command is absent.
    """
    field = _FIELDS.get(command.type)
    name = BaseCommand.Type.Name(command.type)
    if field is None:
        raise ProtocolError(f"command type {name} ({command.type}) is not supported")
    if not command.HasField(field.name):
        raise ProtocolError(f"{name} command lacks its {field.name} field")
    sub: Message = getattr(command, field.name)
    return sub


def encode_command(command: BaseCommand) -> bytes:
    """The frame of a command without payload (every type but SEND and MESSAGE).

    Raises:
        InvalidArgument: the command lacks a required field or its sub-command, or carries a payload.
    """
    if command.type in PAYLOAD_COMMANDS:
        raise InvalidArgument("SEND and MESSAGE carry a payload: use encode_payload_command")
    body = _serialize(command)
    return _U32.pack(len(body) + 4) + _U32.pack(len(body)) + body


def encode_payload_command(
    command: BaseCommand,
    stored: bytes,
    *,
    checksum: bool = True,
    broker_entry_metadata: BrokerEntryMetadata | None = None,
) -> bytes:
    """The frame of a SEND or MESSAGE: the command, then ``stored`` behind its CRC-32C.

    Args:
        command: a SEND or MESSAGE command.
        stored: ``metadataSize | MessageMetadata | payload`` as received in a SEND
            (``Payload.stored``) or built with :func:`pack_stored`.
        checksum: write magic 0x0e01 and the CRC-32C of ``stored`` (what clients expect from a
            server of protocol version 6 or more).
        broker_entry_metadata: written after magic 0x0e02 before the checksum, if given.

    Raises:
        InvalidArgument: not a SEND or MESSAGE, a required field missing, or ``stored`` whose
            metadata size does not fit it.
    """
    if command.type not in PAYLOAD_COMMANDS:
        raise InvalidArgument(f"{BaseCommand.Type.Name(command.type)} carries no payload: use encode_command")
    if len(stored) < 4 or _U32.unpack_from(stored, 0)[0] > len(stored) - 4:
        raise InvalidArgument("stored bytes must start with a metadata size that fits them")
    body = _serialize(command)
    parts = [b"", _U32.pack(len(body)), body]
    if broker_entry_metadata is not None:
        entry = broker_entry_metadata.SerializeToString()
        parts.append(_MAGIC_AND_U32.pack(BROKER_ENTRY_METADATA_MAGIC, len(entry)) + entry)
    if checksum:
        parts.append(_MAGIC_AND_U32.pack(CHECKSUM_MAGIC, crc32c(stored)))
    parts.append(stored)
    parts[0] = _U32.pack(sum(map(len, parts)))
    return b"".join(parts)


def pack_stored(metadata: MessageMetadata, payload: bytes) -> bytes:
    """``metadataSize | MessageMetadata | payload``: the stored bytes of a message, as a producer sends them.

    Raises:
        InvalidArgument: the metadata lacks a required field.
    """
    if not metadata.IsInitialized():
        missing = ", ".join(metadata.FindInitializationErrors())  # type: ignore[attr-defined]
        raise InvalidArgument(f"metadata lacks {missing}")
    encoded = metadata.SerializeToString()
    return _U32.pack(len(encoded)) + encoded + payload


def _serialize(command: BaseCommand) -> bytes:
    try:
        sub_command(command)
    except ProtocolError as e:
        raise InvalidArgument(str(e)) from None
    if not command.IsInitialized():
        missing = ", ".join(command.FindInitializationErrors())  # type: ignore[attr-defined]
        raise InvalidArgument(f"{BaseCommand.Type.Name(command.type)} command lacks {missing}")
    return command.SerializeToString()
