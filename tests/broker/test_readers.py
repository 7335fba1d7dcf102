"""Readers with the official client: non-durable cursors at the start they name, seeks to the ends.

A Pulsar reader is an Exclusive consumer of a non-durable subscription: it starts at the message it
names (the client drops the start itself unless inclusive), at ``MessageId.earliest`` or at
``latest``; its subscription is never written and goes when the reader closes, holding nothing back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from broker_process import BrokerProcess, running_broker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("readers") / "data"
    with running_broker(data, "--no-sync", "--partitioned-topic", "parts=2") as b:
        yield b


@pytest.fixture
def c(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    cl = client(broker.url)
    yield cl
    cl.close()


def _produce(c: pulsar.Client, topic: str, n: int, *, batching: bool = False) -> list[pulsar.MessageId]:
    producer = c.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=50)
    ids: list[pulsar.MessageId] = []
    if batching:
        for i in range(n):
            producer.send_async(f"m{i}".encode(), lambda _res, mid: ids.append(mid))
        producer.flush()
    else:
        ids = [producer.send(f"m{i}".encode()) for i in range(n)]
    producer.close()
    return ids


def _drain(reader: pulsar.Reader) -> list[bytes]:
    """The common loop: read while the broker says more is available."""
    got = []
    deadline = time.monotonic() + 20
    while reader.has_message_available():
        assert time.monotonic() < deadline, f"has_message_available stayed True after {got}"
        got.append(reader.read_next(timeout_millis=TIMEOUT_MS).data())
    return got


def _names(n: int, start: int = 0) -> list[bytes]:
    return [f"m{i}".encode() for i in range(start, n)]


def test_a_reader_from_earliest_reads_everything_and_the_loop_ends(c: pulsar.Client) -> None:
    _produce(c, "r-earliest", 10)
    reader = c.create_reader("r-earliest", pulsar.MessageId.earliest)
    assert _drain(reader) == _names(10)
    reader.close()


@pytest.mark.parametrize("inclusive", [False, True])
def test_a_reader_from_a_message_id_starts_after_it_or_at_it(c: pulsar.Client, inclusive: bool) -> None:
    topic = f"r-from-id-{inclusive}"
    ids = _produce(c, topic, 10)
    reader = c.create_reader(topic, ids[4], start_message_id_inclusive=inclusive)
    assert _drain(reader) == _names(10, 4 if inclusive else 5)
    reader.close()


@pytest.mark.parametrize("inclusive", [False, True])
def test_a_reader_inside_a_batch_starts_at_its_batch_index(c: pulsar.Client, inclusive: bool) -> None:
    topic = f"r-batch-{inclusive}"
    ids = sorted(_produce(c, topic, 6, batching=True), key=lambda m: (m.entry_id(), m.batch_index()))
    start = ids[2]
    assert start.batch_index() >= 0, "the producer did not batch"
    reader = c.create_reader(topic, start, start_message_id_inclusive=inclusive)
    assert _drain(reader) == _names(6, 2 if inclusive else 3)
    reader.close()


def test_a_reader_from_latest_sees_only_what_comes_next(c: pulsar.Client) -> None:
    _produce(c, "r-latest", 5)
    reader = c.create_reader("r-latest", pulsar.MessageId.latest)
    assert not reader.has_message_available()
    producer = c.create_producer("r-latest", batching_enabled=False)
    producer.send(b"new")
    assert reader.read_next(timeout_millis=TIMEOUT_MS).data() == b"new"
    reader.close()


def test_the_last_message_id_names_the_last_batch_index(c: pulsar.Client) -> None:
    """After a batch of two, a reader that read the first still has one available (batch index 1)."""
    _produce(c, "r-last-batch", 2, batching=True)
    reader = c.create_reader("r-last-batch", pulsar.MessageId.earliest)
    first = reader.read_next(timeout_millis=TIMEOUT_MS)
    assert first.message_id().batch_index() == 0
    assert reader.has_message_available()
    assert reader.read_next(timeout_millis=TIMEOUT_MS).data() == b"m1"
    assert not reader.has_message_available()
    reader.close()


def test_a_reader_leaves_nothing_on_disk_and_holds_no_backlog(
    broker: BrokerProcess, c: pulsar.Client
) -> None:
    _produce(c, "r-gone", 3)
    reader = c.create_reader("r-gone", pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=TIMEOUT_MS).data() == b"m0"
    reader.close()
    subs = [p for p in broker.data.rglob("subscriptions/*") if "r-gone" in str(p)]
    assert subs == []
    # A durable subscriber made at Earliest afterwards sees all three: the reader acked nothing durable.
    consumer = c.subscribe("r-gone", "after", initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(timeout_millis=TIMEOUT_MS).data() for _ in range(3)] == _names(3)


def test_seek_to_earliest_and_latest(c: pulsar.Client) -> None:
    consumer = c.subscribe("r-seek", "s", initial_position=pulsar.InitialPosition.Earliest)
    _produce(c, "r-seek", 4)
    assert [consumer.receive(timeout_millis=TIMEOUT_MS).data() for _ in range(4)] == _names(4)
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(timeout_millis=TIMEOUT_MS).data() == b"m0"
    consumer.seek(pulsar.MessageId.latest)
    producer = c.create_producer("r-seek", batching_enabled=False)
    producer.send(b"after-latest")
    got = consumer.receive(timeout_millis=TIMEOUT_MS)
    assert got.data() == b"after-latest"


def test_a_reader_seeks_to_earliest_and_by_time(c: pulsar.Client) -> None:
    _produce(c, "r-reader-seek", 3)
    reader = c.create_reader("r-reader-seek", pulsar.MessageId.latest)
    reader.seek(pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=TIMEOUT_MS).data() == b"m0"
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    producer = c.create_producer("r-reader-seek", batching_enabled=False)
    producer.send(b"late")
    reader.seek(middle)
    assert reader.read_next(timeout_millis=TIMEOUT_MS).data() == b"late"
    reader.close()


def test_a_reader_of_a_partitioned_topic_reads_every_partition(c: pulsar.Client) -> None:
    producer = c.create_producer("parts", batching_enabled=False)
    receipts = [producer.send(f"p{i}".encode(), partition_key=f"k{i}") for i in range(20)]
    assert {m.partition() for m in receipts} == {0, 1}
    reader = c.create_reader("parts", pulsar.MessageId.earliest)
    assert reader.has_message_available()
    got = [reader.read_next(timeout_millis=TIMEOUT_MS) for _ in range(20)]
    assert not reader.has_message_available()
    assert sorted(m.data() for m in got) == sorted(f"p{i}".encode() for i in range(20))
    # Every id names its partition, as the producer's receipt did.
    assert {(m.message_id().partition(), m.message_id().entry_id()) for m in got} == {
        (r.partition(), r.entry_id()) for r in receipts
    }
    reader.close()


def test_consumed_ids_of_a_partitioned_topic_name_their_partition(c: pulsar.Client) -> None:
    consumer = c.subscribe("parts", "ids", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=TIMEOUT_MS) for _ in range(20)]
    assert {m.message_id().partition() for m in got} == {0, 1}
    assert len({str(m.message_id()) for m in got}) == 20  # none compare equal
    for m in got:
        consumer.acknowledge(m)


def test_a_rollback_duration_starts_at_what_was_published_within_it(broker: BrokerProcess) -> None:
    """``start_message_rollback_duration_sec`` (the client library does not send it; raw frames do)."""
    from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
    from cursorkit.proto import pulsar_api_pb2 as api
    from raw_client import Raw

    t = api.BaseCommand
    topic = "persistent://public/default/r-rollback"
    raw = Raw(broker.url)
    assert raw.connect().type == t.CONNECTED
    raw.send(t(type=t.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1)))
    assert raw.receive().type == t.PRODUCER_SUCCESS
    now = int(time.time() * 1000)
    for seq, published in enumerate([now - 3_600_000] * 3 + [now - 1_000] * 2):
        meta = api.MessageMetadata(producer_name="raw", sequence_id=seq, publish_time=published)
        send = t(type=t.SEND, send=api.CommandSend(producer_id=1, sequence_id=seq))
        raw.sock.sendall(encode_payload_command(send, pack_stored(meta, f"m{seq}".encode())))
        assert raw.receive().type == t.SEND_RECEIPT
    sub = api.CommandSubscribe(
        topic=topic,
        subscription="reader-rollback",
        subType=api.CommandSubscribe.Exclusive,
        consumer_id=1,
        request_id=2,
        durable=False,
        start_message_rollback_duration_sec=60,
    )
    raw.send(t(type=t.SUBSCRIBE, subscribe=sub))
    assert raw.receive().type == t.SUCCESS
    entries = []
    for _ in range(2):
        raw.send(t(type=t.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=1)))
        got = raw.receive()
        assert got.type == t.MESSAGE
        entries.append(got.message.message_id.entryId)
    assert entries == [3, 4]
    raw.close()


@pytest.mark.parametrize("batching", [False, True])
def test_a_seek_while_messages_are_in_flight_restarts_cleanly(c: pulsar.Client, batching: bool) -> None:
    """Messages already sent before the seek are dropped by the client; after it, all come in order once."""
    topic = f"r-seek-flight-{batching}"
    consumer = c.subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=100
    )
    _produce(c, topic, 500, batching=batching)
    first = [consumer.receive(timeout_millis=TIMEOUT_MS).data() for _ in range(20)]
    assert first == _names(20)
    consumer.seek(pulsar.MessageId.earliest)
    got = []
    for _ in range(500):
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == _names(500)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
