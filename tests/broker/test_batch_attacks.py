"""Hostile batches on raw sockets (issue 44 item 2): refused when their payload cannot hold them.

A huge ``ack_set`` costs the broker its batch's words, not a walk of every index on the loop.

Beside each attack an official-client producer and consumer measure their round trip: it stays low.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

_T = api.BaseCommand
ROUND_TRIP_LIMIT_S = 1.0
"""The slowest round trip the bystanders may see during an attack (a stalled loop: several seconds)."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("batches") / "data") as b:
        yield b


def _raw_producer(broker: BrokerProcess, topic: str) -> Raw:
    raw = Raw(broker.url)
    raw.sock.settimeout(30)
    raw.connect()
    raw.send(_T(type=_T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1)))
    assert raw.receive().type == _T.PRODUCER_SUCCESS
    cmd = api.CommandSubscribe(
        topic=topic, subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=2
    )
    raw.send(_T(type=_T.SUBSCRIBE, subscribe=cmd))
    assert raw.receive().type == _T.SUCCESS
    return raw


def _batch_send(sequence_id: int, count: int, payload: bytes, **meta: int) -> bytes:
    """A SEND whose metadata claims ``count`` batched messages in ``payload`` (not parsed by a broker)."""
    metadata = api.MessageMetadata(
        producer_name="raw", sequence_id=sequence_id, publish_time=1, num_messages_in_batch=count, **meta
    )
    cmd = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id, num_messages=count))
    return encode_payload_command(cmd, pack_stored(metadata, payload))


class Bystanders:
    """An official-client producer and consumer on their own topic, timing each message's round trip."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        self.client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        self.consumer = self.client.subscribe(topic, "s")
        self.producer = self.client.create_producer(topic, batching_enabled=False)
        self.trips: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.producer.send(b"ping")
            self.consumer.acknowledge(self.consumer.receive(timeout_millis=30_000))
            self.trips.append(time.monotonic() - started)
            time.sleep(0.01)

    def __enter__(self) -> Bystanders:
        self._run_once()
        self._thread.start()
        return self

    def _run_once(self) -> None:
        self.producer.send(b"warm-up")
        self.consumer.acknowledge(self.consumer.receive(timeout_millis=10_000))

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.client.close()


def test_a_batch_its_payload_cannot_hold_is_refused_and_not_stored(broker: BrokerProcess) -> None:
    """A million messages claimed in 7 bytes: SEND_ERROR MetadataError, nothing stored; the next is."""
    raw = _raw_producer(broker, "claims")
    raw.sock.sendall(_batch_send(0, 1_000_000, b"7 bytes"))
    reply = raw.receive()
    assert reply.type == _T.SEND_ERROR, reply
    assert reply.send_error.error == api.MetadataError and reply.send_error.sequence_id == 0
    # compressed: bounded by the stated uncompressed size too
    raw.sock.sendall(_batch_send(1, 1001, b"z" * 100, compression=api.ZSTD, uncompressed_size=6000))
    assert raw.receive().send_error.error == api.MetadataError
    raw.sock.sendall(_batch_send(2, 1000, b"z" * 100, compression=api.ZSTD, uncompressed_size=6000))
    first = raw.receive()
    assert first.type == _T.SEND_RECEIPT and first.send_receipt.sequence_id == 2
    raw.sock.sendall(_batch_send(3, 2, b"\x00" * 12))
    second = raw.receive()
    assert second.type == _T.SEND_RECEIPT and second.send_receipt.sequence_id == 3
    raw.close()
    # The refused SENDs took no entry: the two stored are the topic's first two.
    assert (first.send_receipt.message_id.entryId, second.send_receipt.message_id.entryId) == (0, 1)


def test_real_compressed_batches_are_taken(broker: BrokerProcess) -> None:
    """The official client's batches of tiny, alike messages compress far: every codec's are stored."""
    c = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        for codec in (
            pulsar.CompressionType.LZ4,
            pulsar.CompressionType.ZLib,
            pulsar.CompressionType.ZSTD,
            pulsar.CompressionType.SNAPPY,
        ):
            topic = f"compressed-{codec}"
            consumer = c.subscribe(topic, "s")
            producer = c.create_producer(
                topic,
                compression_type=codec,
                batching_enabled=True,
                batching_max_messages=1000,
                batching_max_publish_delay_ms=50,
            )
            for _ in range(1000):
                producer.send_async(b"", None)
            producer.flush()
            for _ in range(1000):
                consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    finally:
        c.close()


def _ack_with_set(at: api.MessageIdData, words: list[int]) -> _T:
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual)
    ack.message_id.add(ledgerId=at.ledgerId, entryId=at.entryId).ack_set.extend(words)
    return _T(type=_T.ACK, ack=ack)


def test_a_huge_ack_set_does_not_stall_the_others(broker: BrokerProcess) -> None:
    """ACKs whose ``ack_set`` spans millions of indexes: the bystanders' round trip stays under a second.

    Two entries: a zstd batch claiming 7,000,000 messages (its codec can expand 1,300 bytes that
    far) acked with 110,000 one-byte words (a walk of 7 million indexes took seconds per ACK), and
    a batch of 700,000 messages its payload holds, acked one index at a time with ~11,000 words.
    """
    raw = _raw_producer(broker, "huge-ack")
    claimed = 7_000_000
    raw.sock.sendall(
        _batch_send(0, claimed, b"\x00" * 1300, compression=api.ZSTD, uncompressed_size=6 * claimed)
    )
    size = 700_000
    raw.sock.sendall(_batch_send(1, size, b"\x00" * (6 * size)))
    receipts = [raw.receive(), raw.receive()]
    assert [r.type for r in receipts] == [_T.SEND_RECEIPT] * 2, receipts
    huge, real = (r.send_receipt.message_id for r in receipts)
    with Bystanders(broker, "bystanders") as bystanders:
        for _ in range(3):
            raw.send(_ack_with_set(huge, [1] * 110_000))
        words = [-1] * -(-size // 64)  # every index still unacked...
        for k in range(8):
            words[k] = ~(1 << k)  # ...but one more each time
            raw.send(_ack_with_set(real, words))
        raw.send(_T(type=_T.PING, ping=api.CommandPing()))
        assert raw.receive().type == _T.PONG  # every ACK was handled
        time.sleep(0.3)
    raw.close()
    assert bystanders.trips, "no round trip finished"
    slowest = max(bystanders.trips)
    assert slowest < ROUND_TRIP_LIMIT_S, f"a bystander's round trip took {slowest:.2f} s"
