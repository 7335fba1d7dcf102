"""The frame decoder against its model, the frames a stream was encoded from, under any split and any damage.

Valid streams: fed whole, byte by byte or in random chunks, the decoder returns exactly the frames
encoded. Damaged streams (flipped bytes, truncations, random bytes, a huge size spliced in): the only
exception is ``ProtocolError``; every split decodes a prefix of the byte-by-byte frames and fails iff
it fails; the decoder never holds more than one frame's worth of bytes.
"""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit.broker.protocol.frames import (
    Frame,
    FrameDecoder,
    Payload,
    encode_command,
    encode_payload_command,
)
from cursorkit.errors import ProtocolError
from fuzz_budget import runs
from pulsar_messages import PayloadFrame, commands, payload_frames

pytestmark = pytest.mark.fuzz

LIMIT = 1024
"""The hostile tests' max_frame_size: small, so that damage often lands near or over it."""
FUZZ = settings(max_examples=runs(150, 20_000), deadline=timedelta(seconds=10))


def encode(item: object) -> tuple[bytes, Frame]:
    """A frame's bytes and the Frame the decoder must give back for them."""
    if isinstance(item, PayloadFrame):
        data = encode_payload_command(
            item.command, item.stored, checksum=item.checksum, broker_entry_metadata=item.entry_metadata
        )
        checksum_ok = True if item.checksum else None
        return data, Frame(
            item.command, Payload(item.metadata, item.stored, checksum_ok, item.entry_metadata)
        )
    data = encode_command(item)  # type: ignore[arg-type]
    return data, Frame(item)  # type: ignore[arg-type]


streams = st.lists(st.one_of(commands(), payload_frames()), max_size=6).map(
    lambda items: [encode(item) for item in items]
)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def run(data_chunks: list[bytes], max_frame_size: int) -> tuple[list[Frame], bool]:
    """The frames a fresh decoder returns for the chunks, and whether it raised ProtocolError."""
    decoder = FrameDecoder(max_frame_size)
    frames: list[Frame] = []
    for chunk in data_chunks:
        try:
            frames += decoder.feed(chunk)
        except ProtocolError:
            assert decoder.buffered == 0
            return frames, True
        assert decoder.buffered < max_frame_size + 4
    return frames, False


@FUZZ
@given(streams, st.lists(st.integers(0, 4000), max_size=12))
def test_any_split_of_a_valid_stream_gives_the_encoded_frames(
    encoded: list[tuple[bytes, Frame]], cuts: list[int]
) -> None:
    data = b"".join(frame for frame, _ in encoded)
    expected = [frame for _, frame in encoded]
    limit = max([len(frame) for frame, _ in encoded], default=8)
    assert run([data], limit) == (expected, False)
    assert run(chunks(data, cuts), limit) == (expected, False)
    assert run([data[i : i + 1] for i in range(len(data))], limit) == (expected, False)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(b"".join(frame for frame, _ in draw(streams)))
    how = draw(st.sampled_from(["flip", "truncate", "random", "huge size", "overwrite"]))
    if how == "random":
        return draw(st.binary(max_size=300))
    if not data:
        return bytes(data)
    at = draw(st.integers(0, len(data) - 1))
    if how == "flip":
        for _ in range(draw(st.integers(1, 3))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    elif how == "truncate":
        del data[at:]
    elif how == "huge size":
        data[at:at] = struct.pack(">I", draw(st.sampled_from([LIMIT, LIMIT + 1, 2**31, 2**32 - 1])))
    else:
        data[at : at + 8] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


@FUZZ
@given(damaged(), st.lists(st.integers(0, 4000), max_size=12))
def test_damaged_streams_only_raise_protocol_error_and_agree_across_splits(
    data: bytes, cuts: list[int]
) -> None:
    bytewise, failed = run([data[i : i + 1] for i in range(len(data))], LIMIT)
    for split in ([data], chunks(data, cuts)):
        frames, split_failed = run(split, LIMIT)
        assert split_failed == failed
        assert frames == bytewise[: len(frames)]
        if not failed:
            assert frames == bytewise
