"""CRC-32C (Castagnoli), the checksum Pulsar frames carry over a message's metadata and payload.

Computed by the ``crc32c`` package (hardware-accelerated where the CPU allows); install it with the
``broker`` extra: ``pip install cursorkit[broker]``.
"""

from __future__ import annotations

import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data``, as an unsigned 32-bit int; pass an earlier result as ``value`` to continue.

    ``crc32c(b + c) == crc32c(c, crc32c(b))``. Standard CRC-32C: reflected polynomial 0x82F63B78,
    initial value and final xor 0xFFFFFFFF (``crc32c(b"123456789") == 0xE3069283``).
    """
    return _crc32c.crc32c(data, value)
