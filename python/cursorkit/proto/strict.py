"""Strict proto2 reads: a parse that also refuses a message missing a ``required`` field.

Python's protobuf runtime parses such a message without complaint and reads the field as 0, where
Pulsar's (Java) parser refuses it; a bucket without ``max_schedule_timestamp`` would then look due.
It also hands back a ``string`` field that is not valid UTF-8 as ``bytes``, which fails later, far
from the bytes that caused it, and it keeps a known field sent with the wrong wire type as an unknown
field, so bytes of another message type can parse as this one with fields silently missing. Every
persisted proto2 message cursorkit reads goes through :func:`parse` (or :func:`check` after its own
parse), which refuses all three (the wire-type check looks at the top-level message).
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

M = TypeVar("M", bound=Message)


def parse(cls: type[M], data: bytes) -> M:
    """``cls`` parsed from ``data``, every required field present and every string valid UTF-8.

    Raises:
        DecodeError: the bytes do not parse, a required field is missing (named in the message),
            or a string field holds bytes that are not UTF-8.
    """
    msg = cls.FromString(data)
    check(msg)
    return msg


def check(msg: Message) -> None:
    """Raises ``DecodeError`` unless ``msg`` has its required fields and only UTF-8 strings."""
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise DecodeError(f"{msg.DESCRIPTOR.name} lacks required field(s) {missing}")
    bad = _not_text(msg)
    if bad is not None:
        raise DecodeError(f"{msg.DESCRIPTOR.name}: string field {bad} is not valid UTF-8")
    clash = _mistyped_field(msg)
    if clash is not None:
        raise DecodeError(
            f"{msg.DESCRIPTOR.name}: field {clash} has the wrong wire type (bytes of another message?)"
        )


def _mistyped_field(msg: Message) -> str | None:
    """The name of a known field the parse kept as unknown (its wire type did not match), if any."""
    numbers = msg.DESCRIPTOR.fields_by_number
    unknown: Any = UnknownFieldSet(msg)  # iterable at run time; the stubs say otherwise
    for item in unknown:
        known = numbers.get(item.field_number)
        if known is not None:
            return str(known.name)
    return None


@cache
def _has_strings(descriptor: Descriptor) -> bool:
    """Whether a message type holds a string field, itself or in a nested message."""
    seen: set[str] = set()

    def walk(d: Descriptor) -> bool:
        if d.full_name in seen:
            return False
        seen.add(d.full_name)
        for f in d.fields:
            if f.type == FieldDescriptor.TYPE_STRING:
                return True
            if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type is not None and walk(f.message_type):
                return True
        return False

    return walk(descriptor)


_SKIP, _TEXT, _TEXTS, _NESTED, _NESTEDS = range(5)


@cache
def _kind(field: FieldDescriptor) -> int:
    """What the UTF-8 walk does with a field: skip it, check its string(s), or walk its message(s)."""
    if field.type == FieldDescriptor.TYPE_STRING:
        return _TEXTS if field.is_repeated else _TEXT
    if (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type is not None
        and _has_strings(field.message_type)
        and not field.message_type.GetOptions().map_entry  # no map of ours holds strings
    ):
        return _NESTEDS if field.is_repeated else _NESTED
    return _SKIP


def _not_text(msg: Message) -> str | None:
    """The name of the first string field holding non-UTF-8 bytes; only walks where strings live."""
    if not _has_strings(msg.DESCRIPTOR):
        return None
    field: Any
    for field, value in msg.ListFields():
        kind = _kind(field)
        if kind == _SKIP:
            continue
        if kind == _TEXT:
            if not isinstance(value, str):
                return str(field.full_name)
        elif kind == _TEXTS:
            if any(not isinstance(v, str) for v in value):
                return str(field.full_name)
        else:
            for sub in value if kind == _NESTEDS else (value,):
                bad = _not_text(sub)
                if bad is not None:
                    return bad
    return None
