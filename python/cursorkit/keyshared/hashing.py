"""Key_Shared sticky keys and their hashes, exactly as Pulsar's broker computes them.

A message's *sticky key* is its ordering key, else its partition key (Base64-decoded when the
producer flagged it), else (Pulsar 4.0, #23219) ``f"{producer_name}-{sequence_id}"``, else
``NONE_KEY`` (:func:`sticky_key`). Its hash is Murmur3 x86_32 with seed 0, masked to 31 bits:
:func:`sticky_key_hash` per key, :func:`hash_many` for a list, numpy array or Arrow binary/string
(chunked) array, read without copying and hashed in Rust with the GIL released. An Arrow null is
``InvalidArgument`` naming its index (Pulsar never hashes a missing key: resolve it with
:func:`sticky_key`). A selector maps a hash to a slot of its range (:func:`slot`, :func:`slots`):
consistent hashing ``h % 65535 + 1``; auto-split and exclusive ``h % 65536`` with 0 turned into 1
(0 is Pulsar's ``STICKY_KEY_HASH_NOT_SET``).
"""

from __future__ import annotations

import base64
import numbers
import re
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from cursorkit import _core
from cursorkit._core import hash_many, sticky_key_hash
from cursorkit.errors import InvalidArgument, InvalidInputType

__all__ = [
    "DEFAULT_RANGE_SIZE",
    "NONE_KEY",
    "SlotKind",
    "hash_many",
    "slot",
    "slots",
    "sticky_key",
    "sticky_key_hash",
]

DEFAULT_RANGE_SIZE = 65536
"""Pulsar's ``DEFAULT_RANGE_SIZE`` (``2 << 15``): the hash range of the Key_Shared selectors."""

NONE_KEY = b"NONE_KEY"
"""The sticky key of a message with no ordering key, partition key or producer fallback."""

SlotKind = Literal["consistent", "range"]
"""A selector's slot function: ``"consistent"`` hashing, or ``"range"`` (auto-split, exclusive)."""

_INT64_MIN = -(2**63)
_UINT64_END = 2**64
_BASE64 = re.compile(r"[A-Za-z0-9+/]*(={0,2})")


def slot(hash: int, kind: SlotKind, range_size: int = DEFAULT_RANGE_SIZE) -> int:
    """The slot of a sticky-key hash under a selector's slot function (Pulsar 4.0's ``makeStickyKeyHash``).

    ``"consistent"``: ``hash % (range_size - 1) + 1``, in ``[1, 65535]`` by default; ``"range"``
    (auto-split and exclusive selectors): ``hash % range_size``, with 0 turned into 1.
    """
    return _core.slot_for(hash, kind, range_size)


def slots(hashes: Any, kind: SlotKind, range_size: int = DEFAULT_RANGE_SIZE) -> npt.NDArray[np.uint32]:
    """:func:`slot` of each hash of an integer column (numpy, Arrow or sequence), as a uint32 array."""
    return _core.slots_many(hashes, kind, range_size)


def _java_base64_decode(text: str) -> bytes:
    """Decodes like Java's ``Base64.getDecoder()``: the basic alphabet, padding optional but exact."""
    match = _BASE64.fullmatch(text)
    if match is None:
        raise InvalidArgument(f"partition_key is flagged Base64 but is not Base64: {text!r}")
    padding = len(match.group(1))
    body = len(text) - padding
    if (padding and len(text) % 4) or (not padding and body % 4 == 1):
        raise InvalidArgument(f"partition_key is flagged Base64 but is not Base64: {text!r}")
    return base64.b64decode(text[:body] + "=" * (-body % 4), validate=True)


def _check(value: object, name: str, types: type | tuple[type, ...], expected: str) -> None:
    if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
        raise InvalidInputType(f"{name} must be {expected} or None, got {type(value).__name__}")


def sticky_key(
    *,
    ordering_key: bytes | bytearray | memoryview | None = None,
    partition_key: str | None = None,
    partition_key_b64_encoded: bool = False,
    producer_name: str | None = None,
    sequence_id: int | None = None,
) -> bytes:
    """The sticky key of a message, resolved as Pulsar 4.0's broker does from its metadata.

    The ordering key if present (even empty); else the partition key (Base64-decoded when
    ``partition_key_b64_encoded``, invalid Base64 being ``InvalidArgument``; else UTF-8); else, when
    both are present, ``f"{producer_name}-{sequence_id}"`` in UTF-8 (#23219; a ``sequence_id`` is
    printed as Java's signed long, so ``2**64 - 1`` reads ``-1``); else ``NONE_KEY``. ``None``
    means the field is absent.
    """
    _check(ordering_key, "ordering_key", (bytes, bytearray, memoryview), "bytes")
    _check(partition_key, "partition_key", str, "a str")
    _check(producer_name, "producer_name", str, "a str")
    _check(sequence_id, "sequence_id", numbers.Integral, "an int")
    if not isinstance(partition_key_b64_encoded, bool):
        raise InvalidInputType(
            f"partition_key_b64_encoded must be a bool, got {type(partition_key_b64_encoded).__name__}"
        )
    if sequence_id is not None and not _INT64_MIN <= int(sequence_id) < _UINT64_END:
        raise InvalidArgument(f"sequence_id must fit a signed or unsigned 64-bit integer, got {sequence_id}")
    if ordering_key is not None:
        return bytes(ordering_key)
    if partition_key is not None:
        if partition_key_b64_encoded:
            return _java_base64_decode(partition_key)
        return _utf8(partition_key, "partition_key")
    if producer_name is not None and sequence_id is not None:
        seq = int(sequence_id)
        java_long = seq - _UINT64_END if seq >= 2**63 else seq
        return _utf8(f"{producer_name}-{java_long}", "producer_name")
    return NONE_KEY


def _utf8(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{name} is not valid Unicode ({e})") from e
