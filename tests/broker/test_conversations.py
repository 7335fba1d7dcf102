"""The fact sheet's minimal conversations, frame by frame, and conversation A with the real C++ client.

Conversations A (a producer sending one batch of three) and B (a Shared consumer) are encoded as the
client and the broker write them and decoded back, each direction one stream cut at random. The
last test plays the broker's side of A by script to ``pulsar-client`` over a socket: what the real
client sends must decode, checksum included, with the fields the sheet names.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit.broker.protocol import commands as c
from cursorkit.broker.protocol.batches import SingleMessage, pack_batch, split_batch
from cursorkit.broker.protocol.frames import (
    Frame,
    FrameDecoder,
    Payload,
    encode_command,
    encode_payload_command,
    pack_stored,
)
from cursorkit.proto.pulsar_api_pb2 import (
    BaseCommand,
    CommandAck,
    CommandCloseConsumer,
    CommandCloseProducer,
    CommandConnect,
    CommandFlow,
    CommandLookupTopic,
    CommandPartitionedTopicMetadata,
    CommandProducer,
    CommandRedeliverUnacknowledgedMessages,
    CommandSend,
    CommandSubscribe,
    FeatureFlags,
    MessageMetadata,
    SingleMessageMetadata,
)

TOPIC = "persistent://public/default/t"
T = BaseCommand
CONNECT = T(
    type=T.CONNECT,
    connect=CommandConnect(
        client_version="Pulsar-CPP-v4.1.0",
        auth_method_name="none",
        protocol_version=20,
        feature_flags=FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True),
    ),
)
PREAMBLE = [
    ("C", CONNECT, None),
    ("B", c.connected(protocol_version=20, max_message_size=5_242_880), None),
    (
        "C",
        T(
            type=T.PARTITIONED_METADATA,
            partitionMetadata=CommandPartitionedTopicMetadata(topic=TOPIC, request_id=1),
        ),
        None,
    ),
    ("B", c.partitioned_metadata(1, 0), None),
    (
        "C",
        T(
            type=T.LOOKUP,
            lookupTopic=CommandLookupTopic(
                topic=TOPIC, request_id=2, authoritative=False, advertised_listener_name=""
            ),
        ),
        None,
    ),
    ("B", c.lookup_connect(2, "pulsar://host:6650"), None),
]
BATCH = [SingleMessage(SingleMessageMetadata(payload_size=2, sequence_id=i), b"m%d" % i) for i in range(3)]
BATCH_STORED = pack_stored(
    MessageMetadata(
        producer_name="p-1", sequence_id=0, publish_time=1_700_000_000_000, num_messages_in_batch=3
    ),
    pack_batch(BATCH),
)
PRODUCER = CommandProducer(
    topic=TOPIC,
    producer_id=0,
    request_id=0,
    encrypted=False,
    epoch=0,
    user_provided_producer_name=False,
    producer_access_mode=0,
)
CONVERSATION_A = [
    *PREAMBLE,
    ("C", T(type=T.PRODUCER, producer=PRODUCER), None),
    ("B", c.producer_success(0, "p-1", last_sequence_id=-1), None),
    ("C", T(type=T.SEND, send=CommandSend(producer_id=0, sequence_id=0, num_messages=3)), BATCH_STORED),
    ("B", c.send_receipt(0, 0, 5, 0), None),
    ("C", T(type=T.CLOSE_PRODUCER, close_producer=CommandCloseProducer(producer_id=0, request_id=1)), None),
    ("B", c.success(1), None),
]
ONE = pack_stored(MessageMetadata(producer_name="p-1", sequence_id=1, publish_time=1_700_000_000_001), b"one")
SUBSCRIBE = CommandSubscribe(
    topic=TOPIC,
    subscription="s",
    subType=CommandSubscribe.Shared,
    consumer_id=0,
    request_id=3,
    consumer_name="0a1b2c3d4e",
    priority_level=0,
    durable=True,
    read_compacted=False,
    initialPosition=CommandSubscribe.Latest,
    replicate_subscription_state=False,
)
CONVERSATION_B = [
    *PREAMBLE,
    ("C", T(type=T.SUBSCRIBE, subscribe=SUBSCRIBE), None),
    ("B", c.success(3), None),
    ("C", T(type=T.FLOW, flow=CommandFlow(consumer_id=0, messagePermits=1000)), None),
    ("B", c.message(0, 5, 1), ONE),
    ("B", c.message(0, 5, 2), ONE),
    (
        "C",
        T(
            type=T.ACK,
            ack=CommandAck(consumer_id=0, ack_type=CommandAck.Individual, message_id=[c.message_id(5, 1)]),
        ),
        None,
    ),
    (
        "C",
        T(
            type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=CommandRedeliverUnacknowledgedMessages(
                consumer_id=0, message_ids=[c.message_id(5, 2)]
            ),
        ),
        None,
    ),
    ("B", c.message(0, 5, 2, redelivery_count=1), ONE),
    ("C", T(type=T.FLOW, flow=CommandFlow(consumer_id=0, messagePermits=500)), None),
    ("C", T(type=T.CLOSE_CONSUMER, close_consumer=CommandCloseConsumer(consumer_id=0, request_id=4)), None),
    ("B", c.success(4), None),
]


def encode(command: BaseCommand, stored: bytes | None) -> bytes:
    return encode_command(command) if stored is None else encode_payload_command(command, stored)


def expected(command: BaseCommand, stored: bytes | None) -> Frame:
    if stored is None:
        return Frame(command)
    metadata = MessageMetadata.FromString(stored[4 : 4 + int.from_bytes(stored[:4])])
    return Frame(command, Payload(metadata, stored, True))


@pytest.mark.parametrize("conversation", [CONVERSATION_A, CONVERSATION_B], ids=["A", "B"])
@given(cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_each_direction_decodes_back_to_its_frames(
    conversation: list[tuple[str, BaseCommand, bytes | None]], cuts: list[int]
) -> None:
    for side in "CB":
        steps = [(cmd, stored) for who, cmd, stored in conversation if who == side]
        data = b"".join(encode(cmd, stored) for cmd, stored in steps)
        bounds = [0, *sorted({min(cut, len(data)) for cut in cuts}), len(data)]
        decoder = FrameDecoder()
        frames = [f for a, b in zip(bounds, bounds[1:], strict=False) for f in decoder.feed(data[a:b])]
        assert frames == [expected(cmd, stored) for cmd, stored in steps]
        assert decoder.buffered == 0


def test_the_batch_of_conversation_a_splits_into_its_three_messages() -> None:
    (frame,) = FrameDecoder().feed(encode(*CONVERSATION_A[8][1:]))
    assert frame.payload is not None and frame.payload.metadata.num_messages_in_batch == 3
    assert split_batch(frame.payload.stored) == BATCH


class ScriptedBroker:
    """The broker's side of conversation A, by script, on one accepted connection; records every frame."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"pulsar://127.0.0.1:{self.listener.getsockname()[1]}"
        self.frames: list[Frame] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def answer(self, frame: Frame) -> bytes:
        cmd = frame.command
        replies = {
            T.CONNECT: lambda: c.connected(protocol_version=20, max_message_size=5_242_880),
            T.PARTITIONED_METADATA: lambda: c.partitioned_metadata(cmd.partitionMetadata.request_id, 0),
            T.LOOKUP: lambda: c.lookup_connect(cmd.lookupTopic.request_id, self.url),
            T.PRODUCER: lambda: c.producer_success(cmd.producer.request_id, "p-1"),
            T.SEND: lambda: c.send_receipt(cmd.send.producer_id, cmd.send.sequence_id, 5, 0),
            T.CLOSE_PRODUCER: lambda: c.success(cmd.close_producer.request_id),
            T.PING: c.pong,
        }
        return encode_command(replies[cmd.type]()) if cmd.type in replies else b""

    def serve(self) -> None:
        conn, _ = self.listener.accept()
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                for frame in decoder.feed(data):
                    self.frames.append(frame)
                    conn.sendall(self.answer(frame))


@pytest.fixture
def broker() -> Iterator[ScriptedBroker]:
    server = ScriptedBroker()
    yield server
    server.listener.close()
    server.thread.join(timeout=10)


def test_the_real_client_speaks_conversation_a(broker: ScriptedBroker) -> None:
    pulsar = pytest.importorskip("pulsar")
    client = pulsar.Client(
        broker.url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        producer = client.create_producer(
            "t", batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000
        )
        ids = []
        for i in range(3):
            producer.send_async(b"m%d" % i, lambda _res, msg_id: ids.append(msg_id))
        producer.flush()
        producer.close()
    finally:
        client.close()
    broker.thread.join(timeout=10)
    kinds = [T.Type.Name(f.command.type) for f in broker.frames if f.command.type not in (T.PING, T.PONG)]
    assert kinds == ["CONNECT", "PARTITIONED_METADATA", "LOOKUP", "PRODUCER", "SEND", "CLOSE_PRODUCER"]
    connect, meta, lookup, producer_cmd, sent = (f.command for f in broker.frames[:5])
    assert connect.connect.client_version == "Pulsar-CPP-v4.1.0"
    assert connect.connect.protocol_version == 20 and connect.connect.auth_method_name == "none"
    assert meta.partitionMetadata.topic == TOPIC == lookup.lookupTopic.topic
    assert lookup.lookupTopic.HasField("advertised_listener_name") and not lookup.lookupTopic.authoritative
    assert (producer_cmd.producer.producer_id, producer_cmd.producer.epoch) == (0, 0)
    assert (sent.send.sequence_id, sent.send.num_messages) == (0, 3)
    payload = broker.frames[4].payload
    assert payload is not None and payload.checksum_ok is True
    assert payload.metadata.producer_name == "p-1" and payload.metadata.num_messages_in_batch == 3
    assert [m.payload for m in split_batch(payload.stored)] == [b"m0", b"m1", b"m2"]
    assert [(m.ledger_id(), m.entry_id(), m.batch_index()) for m in ids] == [(5, 0, i) for i in range(3)]
