"""The Rust frame scanner against the full decoder.

A frame it decodes is one the full decoder takes with the same values, any split of a stream gives
the same frames, and damage never passes as a frame.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit._core import FrameScanner, Position
from cursorkit.broker.protocol.batches import payload_holds
from cursorkit.broker.protocol.frames import (
    Frame,
    FrameDecoder,
    decode_frame,
    encode_command,
    encode_payload_command,
    pack_stored,
)
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

_T = api.BaseCommand
u64 = st.integers(0, 2**64 - 1)
ids = st.integers(0, 2**63 - 1)
text = st.text(max_size=8)


@st.composite
def metadata(draw: st.DrawFn) -> api.MessageMetadata:
    meta = api.MessageMetadata(producer_name=draw(text), sequence_id=draw(u64), publish_time=draw(u64))
    if draw(st.booleans()):
        meta.num_messages_in_batch = draw(st.integers(-(2**31), 2**31 - 1) | st.integers(0, 300))
    if draw(st.booleans()):
        meta.partition_key = draw(text)
    if draw(st.booleans()):
        meta.ordering_key = draw(st.binary(max_size=8))
    if draw(st.booleans()):
        meta.deliver_at_time = draw(st.integers(-(2**63), 2**63 - 1))
    if draw(st.booleans()):
        meta.properties.add(key=draw(text), value=draw(text))
    if draw(st.booleans()):
        meta.compression = draw(st.sampled_from([0, 1, 2, 3, 4]))
    if draw(st.booleans()):
        meta.uncompressed_size = draw(st.integers(0, 2**32 - 1))
    if draw(st.booleans()):
        meta.marker_type = 1  # a field the scanner leaves to the full decoder
    return meta


@st.composite
def send_frame(draw: st.DrawFn) -> bytes:
    send = api.CommandSend(producer_id=draw(st.integers(0, 2) | u64), sequence_id=draw(u64))
    if draw(st.booleans()):
        send.num_messages = draw(st.integers(1, 100))
    stored = pack_stored(draw(metadata()), draw(st.binary(max_size=16)))
    return encode_payload_command(_T(type=_T.SEND, send=send), stored, checksum=draw(st.booleans()))


@st.composite
def ack_frame(draw: st.DrawFn) -> bytes:
    ack = api.CommandAck(consumer_id=draw(u64), ack_type=draw(st.sampled_from([0, 1])))
    for _ in range(draw(st.integers(0, 3))):
        mid = ack.message_id.add(ledgerId=draw(ids), entryId=draw(ids))
        if draw(st.booleans()):
            mid.batch_index = draw(st.integers(-1, 10))
        if draw(st.integers(0, 4)) == 0:
            mid.ack_set.append(draw(st.integers(-(2**63), 2**63 - 1)))
    if draw(st.integers(0, 4)) == 0:
        ack.request_id = draw(u64)
    return encode_command(_T(type=_T.ACK, ack=ack))


@st.composite
def flow_frame(draw: st.DrawFn) -> bytes:
    flow = api.CommandFlow(consumer_id=draw(u64), messagePermits=draw(st.integers(0, 2**32 - 1)))
    return encode_command(_T(type=_T.FLOW, flow=flow))


frames = st.one_of(
    send_frame(), ack_frame(), flow_frame(), st.just(encode_command(_T(type=_T.PING, ping={})))
)


def _full(frame: bytes) -> Frame | ProtocolError:
    try:
        (decoded,) = FrameDecoder(max_frame_size=1 << 20).feed(frame)
    except ProtocolError as e:
        return e
    return decoded


def _check(item: tuple[object, ...], frame: bytes) -> None:
    """The scanner's tuple for ``frame`` says what the full decoder says of it."""
    full = _full(frame)
    kind = item[0]
    if kind == 0:
        assert item[1] == frame[4:]
        return
    assert isinstance(full, Frame), f"the scanner took a frame the full decoder refuses: {full}"
    cmd = full.command
    assert cmd.type == kind
    if kind == _T.SEND:
        payload = full.payload
        assert payload is not None and payload.checksum_ok is not False
        meta = payload.metadata
        assert payload_holds(meta, payload.stored), "the scanner took a batch its payload cannot hold"
        count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        want = (
            kind,
            cmd.send.producer_id,
            cmd.send.sequence_id,
            payload.stored,
            meta.publish_time,
            max(1, count),
        )
        assert item == want
    elif kind == _T.ACK:
        assert not any(len(m.ack_set) for m in cmd.ack.message_id) and not cmd.ack.HasField("request_id")
        positions = [Position(m.ledgerId, m.entryId) for m in cmd.ack.message_id]
        assert item == (kind, cmd.ack.consumer_id, cmd.ack.ack_type == api.CommandAck.Cumulative, positions)
    else:
        assert item == (kind, cmd.flow.consumer_id, cmd.flow.messagePermits)


@given(frame=frames)
def test_a_decoded_frame_is_what_the_full_decoder_reads(frame: bytes) -> None:
    (item,) = FrameScanner(1 << 20).feed(frame)
    _check(item, frame)


@given(frame=send_frame())
def test_plain_sends_are_decoded_by_the_scanner(frame: bytes) -> None:
    """Every plain SEND is decoded, except a batch its payload cannot hold (the broker refuses it)."""
    (item,) = FrameScanner(1 << 20).feed(frame)
    full = _full(frame)
    assert isinstance(full, Frame) and full.payload is not None
    if not full.payload.metadata.HasField("marker_type"):
        assert item[0] == (_T.SEND if payload_holds(full.payload.metadata, full.payload.stored) else 0)


@settings(max_examples=300)
@given(frame=frames, data=st.data())
def test_damage_never_passes_as_a_frame(frame: bytes, data: st.DataObject) -> None:
    damaged = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(8, len(damaged) - 1)) if len(damaged) > 8 else 4
        damaged[at] ^= 1 << data.draw(st.integers(0, 7))
    (item,) = FrameScanner(1 << 20).feed(bytes(damaged))
    _check(item, bytes(damaged))


@given(stream=st.lists(frames, min_size=1, max_size=12), cuts=st.lists(st.integers(1, 200), max_size=30))
def test_any_split_gives_the_same_frames(stream: list[bytes], cuts: list[int]) -> None:
    data = b"".join(stream)
    whole = FrameScanner(1 << 20).feed(data)
    scanner = FrameScanner(1 << 20)
    got: list[tuple[object, ...]] = []
    at = 0
    for cut in [*cuts, len(data)]:
        got += scanner.feed(data[at : at + cut])
        at += cut
    got += scanner.feed(data[at:])
    assert got == whole and len(got) == len(stream) and scanner.buffered == 0
    for item, frame in zip(got, stream, strict=True):
        _check(item, frame)


def test_bad_sizes_close_the_stream_as_the_full_decoder_does() -> None:
    for raw in (b"\x00\x00\x01\x00", b"\x00\x00\x00\x03", b"\x00\x00\x00\x10\x00\x00\x00\x20"):
        with pytest.raises(ProtocolError):
            FrameDecoder(max_frame_size=64).feed(raw)
        scanner = FrameScanner(64)
        with pytest.raises(ProtocolError):
            scanner.feed(raw)
        with pytest.raises(ProtocolError, match="already failed"):
            scanner.feed(encode_command(_T(type=_T.PING, ping={})))


def test_a_frame_left_whole_decodes_as_before() -> None:
    frame = encode_command(_T(type=_T.PING, ping={}))
    (item,) = FrameScanner(1 << 20).feed(frame)
    assert item == (0, frame[4:])
    assert decode_frame(item[1]).command.type == _T.PING


def test_the_check_sees_a_wrong_value_or_a_frame_taken_wrongly() -> None:
    """The comparison above can fail: a value off by one, or a decoded frame the full decoder refuses."""
    meta = api.MessageMetadata(producer_name="p", sequence_id=1, publish_time=5)
    cmd = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=2))
    frame = encode_payload_command(cmd, pack_stored(meta, b"x"))
    (item,) = FrameScanner(1 << 20).feed(frame)
    _check(item, frame)
    with pytest.raises(AssertionError):
        _check((*item[:4], 6, *item[5:]), frame)  # another publish time
    damaged = frame[:-1] + bytes([frame[-1] ^ 1])  # the checksum fails: the full decoder refuses
    with pytest.raises(AssertionError):
        _check(item, damaged)


def _runs_of(items: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """``feed``'s items with each run of one producer's consecutive SENDs as one item (the model)."""
    out: list[tuple[object, ...]] = []
    for item in items:
        if item[0] == _T.SEND:
            _, producer, seq, stored, publish_time, count = item
            last = out[-1] if out else None
            if last is not None and last[0] == _T.SEND and last[1] == producer:
                last[2].append(seq)  # type: ignore[attr-defined]
                last[3].append((stored, publish_time, count))  # type: ignore[attr-defined]
                continue
            out.append((_T.SEND, producer, [seq], [(stored, publish_time, count)]))
        else:
            out.append(item)
    return out


@given(stream=st.lists(frames | send_frame(), min_size=1, max_size=16))
def test_runs_group_one_producers_consecutive_sends(stream: list[bytes]) -> None:
    """``feed_runs`` is ``feed`` with each run of consecutive SENDs from one producer as one item."""
    data = b"".join(stream)
    assert FrameScanner(1 << 20).feed_runs(data) == _runs_of(FrameScanner(1 << 20).feed(data))


def test_a_run_is_cut_by_another_producer_or_command() -> None:
    def send(producer: int, seq: int) -> bytes:
        meta = api.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=7)
        cmd = _T(type=_T.SEND, send=api.CommandSend(producer_id=producer, sequence_id=seq))
        return encode_payload_command(cmd, pack_stored(meta, b"m"))

    flow = encode_command(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=5)))
    data = send(1, 0) + send(1, 1) + send(2, 2) + send(1, 3) + flow + send(1, 4)
    runs = FrameScanner(1 << 20).feed_runs(data)
    assert [(r[0], r[1], r[2]) if r[0] == _T.SEND else r for r in runs] == [
        (_T.SEND, 1, [0, 1]),
        (_T.SEND, 2, [2]),
        (_T.SEND, 1, [3]),
        (_T.FLOW, 1, 5),
        (_T.SEND, 1, [4]),
    ]
