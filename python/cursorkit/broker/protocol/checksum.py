"""CRC-32C (Castagnoli), the checksum Pulsar frames carry over a message's metadata and payload.

Computed in Rust (the ``crc32c`` crate: hardware-accelerated where the CPU allows), the same code
the frame scanner checks SENDs with; any bytes-like object, large ones with the GIL released.
"""

from __future__ import annotations

from cursorkit.wire import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data``, as an unsigned 32-bit int; pass an earlier result as ``value`` to continue.

    ``crc32c(b + c) == crc32c(c, crc32c(b))``. Standard CRC-32C: reflected polynomial 0x82F63B78,
    initial value and final xor 0xFFFFFFFF (``crc32c(b"123456789") == 0xE3069283``).
    """
    return _crc32c(data, value)
