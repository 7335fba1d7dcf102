"""CRC-32C: published test vectors, continuation, and a bitwise reference implementation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit.broker.protocol.checksum import crc32c


def reference_crc32c(data: bytes) -> int:
    """CRC-32C one bit at a time: reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# RFC 3720 (iSCSI) appendix B.4 (the last one a SCSI Read command PDU), and the CRC catalogue's "check".
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (
        bytes.fromhex(
            "01c00000 00000000 00000000 00000000 14000000 00000400"
            "00000014 00000018 28000000 00000000 02000000 00000000"
        ),
        0xD9963A56,
    ),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_known_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert reference_crc32c(data) == expected


def test_buffers_of_every_kind_give_the_same_crc() -> None:
    data = b"pulsar frame"
    assert crc32c(data) == crc32c(bytearray(data)) == crc32c(memoryview(data)) == reference_crc32c(data)


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_matches_the_reference_and_continues(head: bytes, tail: bytes) -> None:
    whole = crc32c(head + tail)
    assert whole == reference_crc32c(head + tail)
    assert crc32c(tail, crc32c(head)) == whole
