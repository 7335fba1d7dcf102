"""Hostile clients on raw sockets: each gets Pulsar's error or a closed connection; the broker serves on."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("hostile") / "data") as b:
        yield b


def still_serving(broker: BrokerProcess) -> None:
    c = pulsar.Client(
        broker.url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        c.create_producer("hostile-check").send(b"ok")
    finally:
        c.close()


def producer(raw: Raw, topic: str = "hostile") -> None:
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.PRODUCER,
            producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1),
        )
    )
    assert raw.receive().type == api.BaseCommand.PRODUCER_SUCCESS


def subscribe(raw: Raw, topic: str, subscription: str) -> None:
    """Consumer 1 of a Shared ``subscription`` on ``topic``."""
    cmd = api.CommandSubscribe(
        topic=topic,
        subscription=subscription,
        subType=api.CommandSubscribe.Shared,
        consumer_id=1,
        request_id=1,
    )
    raw.send(api.BaseCommand(type=api.BaseCommand.SUBSCRIBE, subscribe=cmd))
    assert raw.receive().type == api.BaseCommand.SUCCESS


def send_frame(sequence_id: int, body: bytes, *, corrupt: bool = False) -> bytes:
    meta = api.MessageMetadata(producer_name="raw", sequence_id=sequence_id, publish_time=1)
    cmd = api.BaseCommand(
        type=api.BaseCommand.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id)
    )
    frame = bytearray(encode_payload_command(cmd, pack_stored(meta, body)))
    if corrupt:
        frame[-1] ^= 0xFF
    return bytes(frame)


def test_connected_announces_the_limits(broker: BrokerProcess) -> None:
    raw = Raw(broker.url)
    reply = raw.connect()
    assert reply.type == api.BaseCommand.CONNECTED
    assert reply.connected.protocol_version >= 12 and reply.connected.max_message_size == 5 * 1024 * 1024
    raw.close()


def test_a_bad_checksum_is_refused_and_not_stored(broker: BrokerProcess) -> None:
    raw = Raw(broker.url)
    raw.connect()
    producer(raw, "checked")
    raw.sock.sendall(send_frame(0, b"flipped", corrupt=True))
    reply = raw.receive()
    assert reply.type == api.BaseCommand.SEND_ERROR and reply.send_error.error == api.ChecksumError
    raw.sock.sendall(send_frame(1, b"good"))
    reply = raw.receive()
    assert reply.type == api.BaseCommand.SEND_RECEIPT and reply.send_receipt.sequence_id == 1
    raw.close()
    c = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = c.subscribe(
            "checked",
            "s",
            initial_position=pulsar.InitialPosition.Earliest,
            consumer_type=pulsar.ConsumerType.Shared,
        )
        assert consumer.receive(timeout_millis=5000).data() == b"good"
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=300)
    finally:
        c.close()


@pytest.mark.parametrize(
    "attack",
    [
        b"\x00\x00\x00\x10garbage-garbage!",
        struct.pack(">I", 64 * 1024 * 1024) + b"\x00" * 8,  # a frame far over the limit
        struct.pack(">II", 6, 2) + b"\x08\x7f",  # a command type nobody defined
    ],
    ids=["garbage", "oversized", "unknown-type"],
)
def test_broken_frames_close_the_connection(broker: BrokerProcess, attack: bytes) -> None:
    raw = Raw(broker.url)
    raw.connect()
    raw.sock.sendall(attack)
    assert raw.closed()
    raw.close()
    still_serving(broker)


def test_commands_out_of_order(broker: BrokerProcess) -> None:
    raw = Raw(broker.url)  # SEND before CONNECT
    raw.sock.sendall(send_frame(0, b"early"))
    assert raw.closed()
    raw.close()
    raw = Raw(broker.url)  # SEND before PRODUCER
    raw.connect()
    raw.sock.sendall(send_frame(0, b"no producer"))
    assert raw.closed()
    raw.close()
    raw = Raw(broker.url)  # ACK and FLOW for consumers never subscribed: ignored, the connection lives
    raw.connect()
    raw.send(
        api.BaseCommand(type=api.BaseCommand.FLOW, flow=api.CommandFlow(consumer_id=9, messagePermits=10))
    )
    ack = api.CommandAck(consumer_id=9, ack_type=api.CommandAck.Individual)
    ack.message_id.add(ledgerId=1, entryId=1)
    raw.send(api.BaseCommand(type=api.BaseCommand.ACK, ack=ack))
    raw.send(api.BaseCommand(type=api.BaseCommand.PING, ping=api.CommandPing()))
    assert raw.receive().type == api.BaseCommand.PONG
    raw.close()
    still_serving(broker)


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (
            "persistent://a/../../etc",
            api.NotAllowedError,
        ),  # Pulsar's legacy form (with a cluster): not served
        ("persistent://a/../../../etc", api.NotAllowedError),
        ("persistent://a b/../etc", api.InvalidTopicName),  # a tenant Pulsar refuses
    ],
)
def test_a_bad_topic_name_is_pulsars_error(broker: BrokerProcess, topic: str, error: int) -> None:
    raw = Raw(broker.url)
    raw.connect()
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.PRODUCER,
            producer=api.CommandProducer(topic=topic, producer_id=1, request_id=7),
        )
    )
    reply = raw.receive()
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == error
    assert reply.error.request_id == 7
    raw.close()


def test_many_idle_connections(broker: BrokerProcess) -> None:
    """A thousand connections that say nothing after CONNECT are each accepted and kept, and answer."""
    socks = []
    try:
        for _ in range(1000):
            raw = Raw(broker.url)
            socks.append(raw)
            assert raw.connect().type == api.BaseCommand.CONNECTED, f"connection {len(socks)} refused"
        still_serving(broker)
        for n, raw in enumerate(socks, 1):
            raw.send(api.BaseCommand(type=api.BaseCommand.PING, ping=api.CommandPing()))
            assert pong(raw), f"idle connection {n} of {len(socks)} was dropped"
    finally:
        for raw in socks:
            raw.close()


def pong(raw: Raw) -> bool:
    """Whether a PONG comes back (the broker's own keep-alive PINGs are answered on the way)."""
    try:
        while (reply := raw.receive()).type == api.BaseCommand.PING:
            raw.send(api.BaseCommand(type=api.BaseCommand.PONG, pong=api.CommandPong()))
    except OSError:
        return False
    return reply.type == api.BaseCommand.PONG


def test_nothing_outside_the_data_directory(broker: BrokerProcess, tmp_path: Path) -> None:
    data = broker.data.resolve()
    for path in data.rglob("*"):
        assert data in path.resolve().parents or path.resolve() == data


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_reader_that_never_reads_costs_a_bounded_buffer(broker: BrokerProcess) -> None:
    """It asks for a million messages and reads none: the others keep their pace, the broker its memory."""
    slow = Raw(broker.url)
    slow.connect()
    subscribe(slow, "busy", "slow")
    slow.send(
        api.BaseCommand(
            type=api.BaseCommand.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=1_000_000)
        )
    )
    assert broker.proc is not None
    before = rss_mb(broker.proc.pid)
    c = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        fast = c.subscribe("busy", "fast", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(
            "busy", batching_enabled=False, max_pending_messages=500, block_if_queue_full=True
        )
        body = b"x" * 10_000
        for _ in range(3000):
            producer.send_async(body, None)
        producer.flush()
        for _ in range(3000):
            fast.acknowledge(fast.receive(timeout_millis=10_000))
        grown = rss_mb(broker.proc.pid) - before
        assert grown < 100, f"the broker grew {grown:.0f} MB for a reader that reads nothing"
    finally:
        c.close()
        slow.close()


def test_an_ack_with_a_request_id_gets_its_receipt(broker: BrokerProcess) -> None:
    """A client with ack receipts on gets ACK_RESPONSE for each ACK with a request id.

    An error for a consumer that is not there or an ack that is refused; the connection stays.
    """
    raw = Raw(broker.url)
    raw.connect()
    subscribe(raw, "ack-receipts", "s")
    producer(raw, "ack-receipts")
    raw.sock.sendall(send_frame(0, b"m"))
    stored = raw.receive().send_receipt.message_id

    def ack(consumer_id: int, request_id: int, ledger: int, ack_type: int = api.CommandAck.Individual) -> int:
        cmd = api.CommandAck(consumer_id=consumer_id, ack_type=ack_type, request_id=request_id)
        cmd.message_id.add(ledgerId=ledger, entryId=stored.entryId)
        raw.send(api.BaseCommand(type=api.BaseCommand.ACK, ack=cmd))
        reply = raw.receive()
        assert reply.type == api.BaseCommand.ACK_RESPONSE
        assert reply.ackResponse.request_id == request_id
        return reply.ackResponse.error if reply.ackResponse.HasField("error") else -1

    assert ack(1, 7, stored.ledgerId) == -1
    assert ack(9, 8, stored.ledgerId) == api.ConsumerNotFound
    assert ack(1, 9, stored.ledgerId, api.CommandAck.Cumulative) == api.NotAllowedError
    assert ack(1, 10, stored.ledgerId + 1000) == api.UnknownError  # a ledger it never had
    raw.send(api.BaseCommand(type=api.BaseCommand.PING, ping=api.CommandPing()))
    assert raw.receive().type == api.BaseCommand.PONG
    raw.close()
