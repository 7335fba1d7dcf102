"""Strict proto2 reads: a parse that also refuses a message missing a ``required`` field.

Python's protobuf runtime parses such a message without complaint and reads the field as 0, where
Pulsar's (Java) parser refuses it; a bucket without ``max_schedule_timestamp`` would then look due.
Every persisted proto2 message cursorkit reads goes through :func:`parse`.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import DecodeError, Message

M = TypeVar("M", bound=Message)


def parse(cls: type[M], data: bytes) -> M:
    """``cls`` parsed from ``data``, with every required field present, nested ones included.

    Raises:
        DecodeError: the bytes do not parse, or a required field is missing (named in the message).
    """
    msg = cls.FromString(data)
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise DecodeError(f"{cls.DESCRIPTOR.name} lacks required field(s) {missing}")
    return msg
