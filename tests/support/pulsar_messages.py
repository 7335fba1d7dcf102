"""Hypothesis strategies for Pulsar's protocol messages, built from their descriptors (any field, any value).

``messages(cls)`` draws a complete message: every required field, each optional one half the time,
up to two of a repeated one, nested messages to a bounded depth. ``commands()`` draws a BaseCommand
of every declared type, ``payload_frames()`` what a SEND or MESSAGE frame is built from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from cursorkit.broker.protocol.frames import PAYLOAD_COMMANDS, pack_stored
from cursorkit.proto.pulsar_api_pb2 import BaseCommand, BrokerEntryMetadata, MessageMetadata

M = TypeVar("M", bound=Message)
F = FieldDescriptor
_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
}
DECLARED_TYPES = sorted(n for n in BaseCommand.DESCRIPTOR.fields_by_number if n != 1)
"""Every command type with a sub-command declared (its BaseCommand field has the type's number)."""


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type in _INTS:
        low, high = _INTS[field.type]
        return st.one_of(st.sampled_from([0, 1, -1 if low else 2, low, high]), st.integers(low, high))
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type == F.TYPE_STRING:
        return st.text(max_size=12)
    if field.type == F.TYPE_BYTES:
        return st.binary(max_size=12)
    if field.type == F.TYPE_DOUBLE:
        return st.floats(allow_nan=False)
    if field.type == F.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values])
    raise AssertionError(f"no strategy for {field.full_name}")


@st.composite
def _fill(draw: st.DrawFn, descriptor: Descriptor, depth: int) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in descriptor.fields:
        nested = field.type == F.TYPE_MESSAGE
        if field.is_repeated:
            if nested and depth <= 0:
                continue
            count = draw(st.integers(0, 2))
        elif field.is_required:
            count = 1
        else:
            if nested and depth <= 0:
                continue
            count = draw(st.integers(0, 1))
        one = _fill(field.message_type, depth - 1) if nested else _scalar(field)
        drawn = [draw(one) for _ in range(count)]
        if drawn:
            values[field.name] = drawn if field.is_repeated else drawn[0]
    return values


def messages(cls: type[M], depth: int = 2) -> st.SearchStrategy[M]:
    """A complete ``cls`` (required fields set) with random optional and repeated fields."""
    return _fill(cls.DESCRIPTOR, depth).map(lambda values: cls(**values))


def command_of(kind: int) -> st.SearchStrategy[BaseCommand]:
    """A BaseCommand of type ``kind`` with a random sub-command."""
    field = BaseCommand.DESCRIPTOR.fields_by_number[kind]
    sub = messages(type(getattr(BaseCommand(), field.name)))
    return sub.map(lambda body: BaseCommand(type=kind, **{field.name: body}))


def commands() -> st.SearchStrategy[BaseCommand]:
    """A BaseCommand of any declared type but SEND and MESSAGE (those carry a payload)."""
    return st.sampled_from([t for t in DECLARED_TYPES if t not in PAYLOAD_COMMANDS]).flatmap(command_of)


@dataclass
class PayloadFrame:
    """What a SEND or MESSAGE frame is encoded from."""

    command: BaseCommand
    metadata: MessageMetadata
    stored: bytes
    checksum: bool
    entry_metadata: BrokerEntryMetadata | None


@st.composite
def payload_frames(draw: st.DrawFn) -> PayloadFrame:
    """A SEND or MESSAGE with random metadata and payload, with or without checksum and entry metadata."""
    command = draw(st.sampled_from(sorted(PAYLOAD_COMMANDS)).flatmap(command_of))
    metadata = draw(messages(MessageMetadata))
    stored = pack_stored(metadata, draw(st.binary(max_size=40)))
    entry = draw(st.none() | messages(BrokerEntryMetadata))
    return PayloadFrame(command, metadata, stored, draw(st.booleans()), entry)
