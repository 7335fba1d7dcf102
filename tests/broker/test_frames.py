"""Frames: every command round-trips, payload sections decode as laid out, malformed frames are refused."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given

from cursorkit.broker.protocol import commands as c
from cursorkit.broker.protocol.frames import (
    MAX_FRAME_SIZE,
    Frame,
    FrameDecoder,
    Payload,
    encode_command,
    encode_payload_command,
    pack_stored,
    read_stored,
    sub_command,
)
from cursorkit.errors import InvalidArgument, ProtocolError
from cursorkit.proto.pulsar_api_pb2 import (
    BaseCommand,
    BrokerEntryMetadata,
    CommandPing,
    CommandSend,
    KeyValue,
    MessageMetadata,
    ServerError,
)
from pulsar_messages import PayloadFrame, commands, payload_frames

U32 = struct.Struct(">I")
METADATA = MessageMetadata(producer_name="p-1", sequence_id=7, publish_time=1_700_000_000_000)


def decode_one(frame: bytes) -> Frame:
    (decoded,) = FrameDecoder().feed(frame)
    return decoded


def send(producer_id: int = 0, sequence_id: int = 7) -> BaseCommand:
    return BaseCommand(
        type=BaseCommand.SEND, send=CommandSend(producer_id=producer_id, sequence_id=sequence_id)
    )


BUILT = [
    c.connected("cursorkit-test", max_message_size=5_242_880),
    c.connected(),
    c.ping(),
    c.pong(),
    c.success(3),
    c.error(4, ServerError.TopicNotFound, "no such topic"),
    c.partitioned_metadata(1, 0),
    c.partitioned_metadata_failed(1, ServerError.ServiceNotReady, "not yet"),
    c.lookup_connect(2, "pulsar://127.0.0.1:6650"),
    c.lookup_connect(2, "pulsar://a:1", broker_service_url_tls="pulsar+ssl://a:2", authoritative=False),
    c.lookup_failed(2, ServerError.TooManyRequests, "slow down"),
    c.lookup_redirect(2, "pulsar://owner:6651"),
    c.producer_success(0, "p-1"),
    c.producer_success(0, "p-1", last_sequence_id=41, schema_version=b"\0" * 8, topic_epoch=3),
    c.send_receipt(0, 7, 12, 34),
    c.send_receipt(0, 7, 12, 34, highest_sequence_id=9),
    c.send_error(0, 7, ServerError.ChecksumError, ""),
    c.ack_response(0, 5),
    c.ack_response(0, 5, server_error=ServerError.UnknownError, message="lost"),
    c.close_producer(0, 8),
    c.close_producer(0, 8, assigned_broker_url="pulsar://b:6650"),
    c.close_consumer(1, 9),
    c.get_last_message_id_response(6, c.message_id(12, -1 & 0xFFFF_FFFF_FFFF_FFFF)),
    c.get_last_message_id_response(6, c.message_id(12, 30), mark_delete=c.message_id(12, 29)),
    c.active_consumer_change(1, True),
    c.get_schema_error(10, ServerError.TopicNotFound, "no schema"),
    c.get_topics_of_namespace_response(11, ["persistent://public/default/t"]),
]


@pytest.mark.parametrize("command", BUILT, ids=lambda cmd: BaseCommand.Type.Name(cmd.type))
def test_every_builder_round_trips(command: BaseCommand) -> None:
    frame = encode_command(command)
    assert U32.unpack_from(frame, 0)[0] == len(frame) - 4
    assert decode_one(frame) == Frame(command)


def test_the_builders_fill_what_the_client_requires() -> None:
    lookup = c.lookup_connect(2, "pulsar://h:6650").lookupTopicResponse
    assert (lookup.response, lookup.authoritative, lookup.request_id) == (lookup.Connect, True, 2)
    meta = c.partitioned_metadata(1, 0).partitionMetadataResponse
    assert meta.HasField("partitions") and meta.response == meta.Success
    connected = c.connected().connected
    assert connected.protocol_version == c.PROTOCOL_VERSION >= 12
    assert not connected.HasField("max_message_size")
    assert c.producer_success(0, "p").producer_success.last_sequence_id == -1
    delivered = c.message(3, 12, 34, redelivery_count=2, ack_set=[5]).message
    assert (delivered.message_id.ledgerId, delivered.message_id.entryId, delivered.ack_set) == (12, 34, [5])
    assert not delivered.message_id.HasField("batch_index")


def test_builders_refuse_an_unknown_server_error() -> None:
    with pytest.raises(InvalidArgument, match="ServerError"):
        c.error(1, 99, "?")


@given(commands())
def test_any_command_round_trips(command: BaseCommand) -> None:
    assert decode_one(encode_command(command)) == Frame(command)


@given(payload_frames())
def test_any_payload_frame_round_trips(frame: PayloadFrame) -> None:
    encoded = encode_payload_command(
        frame.command, frame.stored, checksum=frame.checksum, broker_entry_metadata=frame.entry_metadata
    )
    expected = Payload(frame.metadata, frame.stored, True if frame.checksum else None, frame.entry_metadata)
    assert decode_one(encoded) == Frame(frame.command, expected)


def test_message_frame_layout_byte_by_byte() -> None:
    stored = pack_stored(METADATA, b"hello")
    frame = encode_payload_command(c.message(0, 12, 34), stored)
    command = c.message(0, 12, 34).SerializeToString()
    crc = U32.unpack_from(frame, 8 + len(command) + 2)[0]
    assert frame == (
        U32.pack(len(frame) - 4)
        + U32.pack(len(command))
        + command
        + b"\x0e\x01"
        + U32.pack(crc)
        + U32.pack(METADATA.ByteSize())
        + METADATA.SerializeToString()
        + b"hello"
    )
    assert read_stored(stored) == (METADATA, 4 + METADATA.ByteSize())


def test_a_send_with_a_wrong_crc_decodes_with_checksum_ok_false() -> None:
    stored = pack_stored(METADATA, b"payload")
    good = encode_payload_command(send(), stored)
    for at in (len(good) - 1, len(good) - len(stored) - 1):  # a payload byte, then a checksum byte
        bad = bytearray(good)
        bad[at] ^= 0x20
        decoded = decode_one(bytes(bad))
        assert decoded.command == send()
        assert decoded.payload is not None and decoded.payload.checksum_ok is False


def test_a_wrong_crc_over_garbage_metadata_still_gives_the_send() -> None:
    """The broker answers SEND_ERROR ChecksumError, so the frame decodes even if its metadata does not."""
    stored = U32.pack(3) + b"\xff\xff\xff" + b"x"
    frame = bytearray(encode_payload_command(send(), stored))
    frame[-len(stored) - 1] ^= 1  # the CRC's last byte
    decoded = decode_one(bytes(frame))
    assert decoded.payload == Payload(MessageMetadata(), stored, False)
    with pytest.raises(ProtocolError):
        decode_one(encode_payload_command(send(), stored))  # the same bytes, trusted, are refused


def test_without_checksum_it_is_unchecked_and_entry_metadata_is_skipped() -> None:
    stored = pack_stored(METADATA, b"")
    entry = BrokerEntryMetadata(broker_timestamp=5, index=9)
    decoded = decode_one(
        encode_payload_command(c.message(0, 1, 2), stored, checksum=False, broker_entry_metadata=entry)
    )
    assert decoded.payload == Payload(METADATA, stored, None, entry)


def test_a_size_over_the_limit_is_refused_before_its_bytes_arrive() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(ProtocolError, match="over the limit"):
        decoder.feed(U32.pack(1025))
    assert decoder.buffered == 0
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(encode_command(c.ping()))
    with pytest.raises(ProtocolError, match="over the limit"):
        FrameDecoder().feed(b"\xff\xff\xff\xff")


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    stored = pack_stored(METADATA, b"")
    head = len(encode_payload_command(send(), stored)) - 4
    stored = pack_stored(METADATA, bytes(MAX_FRAME_SIZE - head))
    frame = encode_payload_command(send(), stored)
    assert len(frame) - 4 == MAX_FRAME_SIZE
    assert decode_one(frame).payload is not None
    with pytest.raises(ProtocolError, match="over the limit"):
        FrameDecoder(max_frame_size=MAX_FRAME_SIZE - 1).feed(frame[:4])


def test_an_announced_frame_allocates_nothing_until_it_arrives() -> None:
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        decoder.feed(U32.pack(MAX_FRAME_SIZE) + U32.pack(10) + b"abc")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert decoder.buffered == 11


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (U32.pack(3) + b"abc", "no room for the command size"),
        (U32.pack(8) + U32.pack(5) + b"abcd", "does not fit"),
        (U32.pack(6) + U32.pack(2) + b"\x08\x02", "lacks its connect"),  # CONNECT without the sub-command
        (U32.pack(4) + U32.pack(0), "lacks required field"),  # no type
        (U32.pack(6) + U32.pack(2) + b"\x08\x32", "NEW_TXN \\(50\\) is not supported"),
        (U32.pack(6) + U32.pack(2) + b"\x08\x1b", "REACHED_END_OF_TOPIC"),
        (U32.pack(6) + U32.pack(2) + b"\x08\x45", "lacks required field"),  # type 69: not in the enum
        (U32.pack(7) + U32.pack(3) + b"\x08\x12\xff", "does not parse"),
    ],
)
def test_malformed_frames_are_refused(frame: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as caught:
        FrameDecoder().feed(frame)
    assert caught.value.server_error is None


def test_payload_sections_where_they_do_not_belong_or_are_missing() -> None:
    ping = c.ping().SerializeToString()
    with pytest.raises(ProtocolError, match="PING frame has 2 bytes after"):
        FrameDecoder().feed(U32.pack(4 + len(ping) + 2) + U32.pack(len(ping)) + ping + b"\x0e\x01")
    body = send().SerializeToString()
    bare = U32.pack(4 + len(body)) + U32.pack(len(body)) + body
    with pytest.raises(ProtocolError, match="no metadata size"):
        FrameDecoder().feed(bare)
    with pytest.raises(ProtocolError, match="no room for the 4 bytes"):
        FrameDecoder().feed(U32.pack(4 + len(body) + 3) + U32.pack(len(body)) + body + b"\x0e\x01\x00")
    stored = U32.pack(50) + METADATA.SerializeToString()
    with pytest.raises(ProtocolError, match="metadata of 50 bytes overruns"):
        FrameDecoder().feed(U32.pack(4 + len(body) + len(stored)) + U32.pack(len(body)) + body + stored)


def test_encoders_refuse_what_the_client_could_not_read() -> None:
    with pytest.raises(InvalidArgument, match="encode_payload_command"):
        encode_command(send())
    with pytest.raises(InvalidArgument, match="encode_command"):
        encode_payload_command(c.ping(), pack_stored(METADATA, b""))
    with pytest.raises(InvalidArgument, match="lacks its ping"):
        encode_command(BaseCommand(type=BaseCommand.PING))
    with pytest.raises(InvalidArgument, match="request_id"):
        encode_command(BaseCommand(type=BaseCommand.SUCCESS, success={}))
    with pytest.raises(InvalidArgument, match="metadata size"):
        encode_payload_command(send(), U32.pack(9) + b"short")
    with pytest.raises(InvalidArgument, match="publish_time"):
        pack_stored(MessageMetadata(producer_name="p", sequence_id=1), b"")
    with pytest.raises(InvalidArgument, match="at least 8"):
        FrameDecoder(max_frame_size=4)


def test_sub_command_is_the_field_of_the_type() -> None:
    assert sub_command(c.ping()) == CommandPing()
    assert sub_command(c.success(3)) == c.success(3).success


def test_no_entry_travels_as_the_largest_unsigned_id() -> None:
    """Pulsar's -1 ("no entry yet") is 2^64 - 1 on the wire, which the clients read back as -1."""
    from cursorkit.broker.protocol import commands

    mid = commands.message_id(7, -1)
    assert (mid.ledgerId, mid.entryId) == (7, 2**64 - 1)
    assert int.from_bytes(mid.entryId.to_bytes(8, "big"), "big", signed=True) == -1


@pytest.mark.parametrize("where", ["producer_name", "property value", "replicate_to"])
def test_metadata_strings_that_are_not_utf8_are_refused(where: str) -> None:
    """Non-UTF-8 bytes in a string of the metadata, at the top or nested, fail the SEND's frame."""
    meta = MessageMetadata(
        producer_name="pp",
        sequence_id=1,
        publish_time=2,
        replicate_to=["rr"],
        properties=[KeyValue(key="k", value="vv")],
    ).SerializeToString()
    marker = {"producer_name": b"\x02pp", "property value": b"\x02vv", "replicate_to": b"\x02rr"}[where]
    assert meta.count(marker) == 1
    bad = meta.replace(marker, b"\x02\xff\xfe")
    with pytest.raises(ProtocolError, match="UTF-8"):
        read_stored(struct.pack(">I", len(bad)) + bad + b"payload")
