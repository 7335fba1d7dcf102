"""Two brokers, one ZooKeeper, one data directory: topic ownership, redirects, hand-over and fencing.

Each broker claims a topic with an ephemeral znode; a LOOKUP elsewhere redirects to the owner, and
the real client follows. When the owner stops, dies or loses its session, the other broker takes the
topic over: the client keeps producing and consuming there, every receipted message is delivered,
and no acknowledgement older than the flush window comes back.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from broker_process import BrokerProcess
from cursorkit import errors
from cursorkit.broker.server.broker import Broker
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.cursor_stores import ZkCursorStores
from cursorkit.broker.server.names import TopicName, topic_name
from cursorkit.broker.server.ownership import Ownership
from cursorkit.broker.server.services import Lookup
from cursorkit.broker.server.topic import Topic
from cursorkit.proto import pulsar_api_pb2 as api
from cursorkit.stores.location import java_url_encode
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # ZooKeeper runs from pyspark's jars

TIMEOUT_MS = 20_000
FLUSH_WINDOW_S = 1.0
"""The client groups acks for 100 ms and the broker flushes every 100 ms: older acks are durable."""


@pytest.fixture
def root() -> str:
    return f"/brokers-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pair(zk_server: Any, tmp_path: Path, root: str) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    metadata = f"zk://{zk_server.hosts}{root}"
    a = BrokerProcess(tmp_path / "data", "--metadata", metadata, name="a")
    b = BrokerProcess(tmp_path / "data", "--metadata", metadata, name="b")
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        for broker in (a, b):
            if broker.proc is not None and broker.proc.poll() is None:
                broker.resume()
            broker.kill()


def client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def both(a: BrokerProcess, b: BrokerProcess) -> str:
    """A service URL naming both brokers: the client's lookups reach whichever answers."""
    return f"pulsar://127.0.0.1:{a.port},127.0.0.1:{b.port}"


def owner(zk_client: Any, root: str, topic: str) -> str | None:
    """The owner's URL in the topic's claim, or None (one read: the claim may go at any moment)."""
    try:
        data, _ = zk_client.get(f"{root}/owners/{java_url_encode(topic_name(topic).full)}")
    except NoNodeError:
        return None
    return bytes(data).decode()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def own(broker: BrokerProcess, topic: str) -> None:
    """Makes ``broker`` the topic's owner: a client that knows only it looks the topic up."""
    c = client(broker.url)
    try:
        c.create_producer(topic).close()
    finally:
        c.close()


def lookup(url: str, topic: str) -> api.CommandLookupTopicResponse:
    raw = Raw(url)
    try:
        raw.connect()
        raw.send(
            api.BaseCommand(
                type=api.BaseCommand.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=topic, request_id=1)
            )
        )
        raw.sock.settimeout(15)
        return raw.receive().lookupTopicResponse
    finally:
        raw.close()


def create_producer(url: str, topic: str) -> api.BaseCommand:
    raw = Raw(url)
    try:
        raw.connect()
        raw.send(
            api.BaseCommand(
                type=api.BaseCommand.PRODUCER,
                producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1),
            )
        )
        return raw.receive()
    finally:
        raw.close()


def test_a_lookup_elsewhere_is_redirected_to_the_owner(
    pair: tuple[BrokerProcess, BrokerProcess], zk_client: Any, root: str
) -> None:
    a, b = pair
    own(a, "orders")
    assert owner(zk_client, root, "orders") == a.url
    # B's view: the topic is A's; A's view: it is its own. B serves no producer for it.
    redirected = lookup(b.url, "orders")
    assert redirected.response == api.CommandLookupTopicResponse.Redirect
    assert redirected.brokerServiceUrl == a.url and not redirected.proxy_through_service_url
    assert lookup(a.url, "orders").response == api.CommandLookupTopicResponse.Connect
    refused = create_producer(b.url, "orders")
    assert refused.type == api.BaseCommand.ERROR and refused.error.error == api.ServiceNotReady
    c = client(b.url)  # knows only B: follows the redirect to A
    try:
        consumer = c.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer("orders", batching_enabled=False)
        for i in range(20):
            producer.send(f"o-{i}".encode())
        got = sorted(consumer.receive(timeout_millis=TIMEOUT_MS).data() for _ in range(20))
        assert got == sorted(f"o-{i}".encode() for i in range(20))
    finally:
        c.close()
    assert owner(zk_client, root, "orders") == a.url


def hand_over(
    a: BrokerProcess, b: BrokerProcess, zk_client: Any, root: str, topic: str, take_down: Callable[[], None]
) -> None:
    """A owns ``topic``; the client knows both. Halfway through, ``take_down`` stops A; B carries on."""
    own(a, topic)
    c = client(both(a, b))
    try:
        consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(60):
            producer.send(f"{i}".encode())
        first = [consumer.receive(timeout_millis=TIMEOUT_MS) for _ in range(60)]
        acked = {m.data() for i, m in enumerate(first) if i % 3 != 1}  # every third stays unacked
        for m in first:
            if m.data() in acked:
                consumer.acknowledge(m)
        time.sleep(FLUSH_WINDOW_S)
        receipted: set[bytes] = set()

        def done(body: bytes) -> Callable[[Any, Any], None]:
            return lambda result, _id: receipted.add(body) if result == pulsar.Result.Ok else None

        for i in range(60, 120):  # mid-stream: sent while A goes down, some only receipted by B
            producer.send_async(f"{i}".encode(), done(f"{i}".encode()))
        take_down()
        producer.flush()
        assert len(receipted) == 60
        expected = ({m.data() for m in first} - acked) | receipted
        seen: set[bytes] = set()
        while not expected <= seen:
            msg = consumer.receive(timeout_millis=TIMEOUT_MS)
            seen.add(msg.data())
            consumer.acknowledge(msg)
        assert not seen & acked, f"acked before the flush window came back: {sorted(seen & acked)[:5]}"
        assert owner(zk_client, root, topic) == b.url
    finally:
        c.close()


def test_a_stopped_owner_hands_its_topic_over(
    pair: tuple[BrokerProcess, BrokerProcess], zk_client: Any, root: str
) -> None:
    a, b = pair
    hand_over(a, b, zk_client, root, "graceful", a.stop)


def test_a_killed_owner_loses_its_topic_after_its_session(
    pair: tuple[BrokerProcess, BrokerProcess], zk_client: Any, root: str
) -> None:
    a, b = pair
    hand_over(a, b, zk_client, root, "killed", a.kill)


def log_locked(data: Path, topic: str) -> bool:
    fd = os.open(data / "topics" / topic_name(topic).directory / "log", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_an_owner_that_lost_its_session_gives_the_topic_up_and_is_refused(
    pair: tuple[BrokerProcess, BrokerProcess], zk_client: Any, root: str
) -> None:
    """A frozen past its session: B claims the topic but waits for A's log; A, resumed, lets it go."""
    a, b = pair
    c = client(a.url)
    try:
        consumer = c.subscribe("frozen", "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer("frozen", batching_enabled=False)
        for i in range(10):
            producer.send(f"{i}".encode())
        for _ in range(10):
            consumer.acknowledge(consumer.receive(timeout_millis=TIMEOUT_MS))
        time.sleep(FLUSH_WINDOW_S)
        a.pause()
        wait_for("A's claim to expire", lambda: owner(zk_client, root, "frozen") is None)
        raw = Raw(b.url)
        raw.connect()
        raw.sock.settimeout(15)
        raw.send(
            api.BaseCommand(
                type=api.BaseCommand.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="frozen", request_id=7)
            )
        )
        wait_for("B's claim", lambda: owner(zk_client, root, "frozen") == b.url)
        time.sleep(0.5)
        assert log_locked(b.data, "frozen")  # A still holds the log: B cannot append to it yet
        a.resume()
        answer = raw.receive().lookupTopicResponse  # A gave the topic up: B has opened it
        deadline = time.monotonic() + 30
        request_id = 7
        while answer.response == api.CommandLookupTopicResponse.Failed:
            # B waited out its 10 s for A's log (A, loaded, took longer to give it up): a client
            # looks the topic up again, and so does this one.
            assert answer.error == api.ServiceNotReady, answer
            assert time.monotonic() < deadline, "B never opened the topic"
            time.sleep(0.5)
            request_id += 1
            lookup_again = api.CommandLookupTopic(topic="frozen", request_id=request_id)
            raw.send(api.BaseCommand(type=api.BaseCommand.LOOKUP, lookupTopic=lookup_again))
            answer = raw.receive().lookupTopicResponse
        raw.close()
        assert answer.response == api.CommandLookupTopicResponse.Connect and answer.brokerServiceUrl == b.url
        # The old owner refuses the topic and sends lookups to B.
        refused = create_producer(a.url, "frozen")
        assert refused.type == api.BaseCommand.ERROR and refused.error.error == api.ServiceNotReady
        assert lookup(a.url, "frozen").brokerServiceUrl == b.url
        # The client A closed the producer and consumer of follows the redirect to B.
        for i in range(10, 20):
            producer.send(f"{i}".encode())
        got = {consumer.receive(timeout_millis=TIMEOUT_MS).data() for _ in range(10)}
        assert got == {f"{i}".encode() for i in range(10, 20)}
    finally:
        a.resume()  # after a failure while A is frozen, the client's close needs it answering
        c.close()


def test_a_new_owner_fences_the_old_owners_cursor_and_log(zk_server: Any, tmp_path: Path, root: str) -> None:
    """In one process: B cannot open the topic while A has it; once B has, A's cursor writes are fenced."""
    from kazoo.client import KazooClient

    name = TopicName("public", "default", "fenced")
    clients = [KazooClient(hosts=zk_server.hosts) for _ in range(2)]
    for k in clients:
        k.start(timeout=15)
    config = BrokerConfig(data=tmp_path, sync=False)
    stores_a, stores_b = (
        ZkCursorStores(k, zk_server.hosts, root, name.full, u) for k, u in zip(clients, "ab", strict=True)
    )
    try:
        topic_a = Topic(name, tmp_path, config, stores_a)
        sub = topic_a.subscription("s", api.CommandSubscribe.Shared, earliest=True)
        first, second = topic_a.log.append([(b"m0", 1, 1), (b"m1", 1, 1)])
        sub.cursor.set_ledger_sizes(topic_a.log.ledger_sizes())
        sub.cursor.ack(first)
        topic_a.flush()
        with pytest.raises(BlockingIOError):
            Topic(name, tmp_path, config, stores_b)  # A has the log
        old = stores_a.open(sub.directory, "s")  # an old owner's handle, as a zombie would keep it
        cursor = old.recover()
        topic_a.close()
        topic_b = Topic(name, tmp_path, config, stores_b)
        assert list(topic_b.subscriptions) == ["s"]
        assert topic_b.subscriptions["s"].cursor.is_acked(first)
        cursor.ack(second)
        with pytest.raises(errors.Fenced):
            old.flush(cursor)
        old.close()
        topic_b.close()
    finally:
        for k in clients:
            k.stop()
            k.close()


def test_claims_win_once_and_are_watched(zk_server: Any, zk_client: Any, root: str) -> None:
    lost: list[TopicName | None] = []
    metadata = f"zk://{zk_server.hosts}{root}"
    a = Ownership(metadata, "pulsar://a:1", 4.0, lost.append)
    b = Ownership(metadata, "pulsar://b:1", 4.5, lost.append)  # another session (another timeout)
    try:
        name = topic_name("claimed")
        assert a.claim(name) == "pulsar://a:1" and b.claim(name) == "pulsar://a:1"
        assert a.claim(name) == "pulsar://a:1" and b.owner(name) == "pulsar://a:1"
        a.watch(name)
        zk_client.delete(a.path(name))  # as when A's session expires
        wait_for("A to hear of it", lambda: lost == [name], 5)
        assert b.claim(name) == "pulsar://b:1" and a.claim(name) == "pulsar://b:1"
        a.release(name)  # not A's: left alone
        assert b.owner(name) == "pulsar://b:1"
        b.release(name)
        assert a.owner(name) is None
    finally:
        a.close()
        b.close()


def test_a_broker_whose_cursor_is_taken_over_gives_the_topic_up(
    zk_server: Any, tmp_path: Path, root: str
) -> None:
    """Another opener takes a subscription's cursor: the broker's next flush is fenced and it lets go."""
    import asyncio

    from kazoo.client import KazooClient

    from cursorkit.broker.server.broker import Broker

    name = TopicName("public", "default", "taken")
    config = BrokerConfig(data=tmp_path, port=0, sync=False, metadata=f"zk://{zk_server.hosts}{root}")

    async def scenario() -> tuple[bool, bool]:
        broker = Broker(config)
        await broker.start()
        other = KazooClient(hosts=zk_server.hosts)
        other.start(timeout=15)
        try:
            lookup = broker.lookup(name)
            assert not isinstance(lookup, Lookup)
            assert (await lookup).url == broker.service_url
            topic = broker.topics[name]
            sub = topic.subscription("s", api.CommandSubscribe.Shared, earliest=True)
            (entry,) = topic.log.append([(b"m", 1, 1)])
            topic.flush()
            taker = ZkCursorStores(other, zk_server.hosts, root, name.full, "pulsar://other:1")
            await asyncio.to_thread(taker.open, sub.directory, "s")  # takes the cursor over
            sub.cursor.set_ledger_sizes(topic.log.ledger_sizes())
            sub.cursor.ack(entry)
            for _ in range(50):
                await asyncio.sleep(0.1)
                if name not in broker.topics:
                    break
            return name in broker.topics, sub.store.closed
        finally:
            await broker.stop()
            other.stop()
            other.close()

    still_open, store_closed = asyncio.run(scenario())
    assert not still_open and store_closed


def test_durable_redelivery_counts_survive_a_hand_over(zk_server: Any, tmp_path: Path, root: str) -> None:
    """A nack counted by the owner comes back counted from the next owner (beyond Pulsar)."""
    metadata = f"zk://{zk_server.hosts}{root}"
    flags = ("--metadata", metadata, "--durable-redelivery-counts")
    a = BrokerProcess(tmp_path / "data", *flags, name="a")
    b = BrokerProcess(tmp_path / "data", *flags, name="b")
    a.start()
    b.start()
    try:
        own(a, "poison")
        c = client(a.url)
        try:
            consumer = c.subscribe(
                "poison", "s", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
            )
            c.create_producer("poison", batching_enabled=False).send(b"p")
            msg = consumer.receive(timeout_millis=TIMEOUT_MS)
            assert msg.redelivery_count() == 0
            consumer.negative_acknowledge(msg)
            again = consumer.receive(timeout_millis=TIMEOUT_MS)  # counted, and durable before it came
            assert again.redelivery_count() == 1
        finally:
            c.close()
        a.kill()
        c = client(both(a, b))
        try:
            consumer = c.subscribe("poison", "s", consumer_type=pulsar.ConsumerType.Shared)
            msg = consumer.receive(timeout_millis=TIMEOUT_MS)
            assert msg.data() == b"p" and msg.redelivery_count() == 1
            consumer.acknowledge(msg)
        finally:
            c.close()
    finally:
        for broker in (a, b):
            broker.kill()


def test_a_client_that_connects_while_the_broker_joins_its_metadata_store_waits_for_it(
    zk_server: Any, zk_client: Any, tmp_path: Path, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker listens before it has joined ZooKeeper.

    A client served meanwhile must not open a topic without claiming it (another broker could
    serve it too): it waits, then the topic is claimed as any other.
    """
    from cursorkit.broker.server import ownership

    joined = threading.Event()

    class SlowToJoin(Ownership):
        def __init__(self, *args: Any) -> None:
            time.sleep(1.5)  # a slow metadata store
            super().__init__(*args)
            joined.set()

    monkeypatch.setattr(ownership, "Ownership", SlowToJoin)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = BrokerConfig(data=tmp_path / "data", port=port, metadata=f"zk://{zk_server.hosts}{root}")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    broker = Broker(config)
    starting = asyncio.run_coroutine_threadsafe(broker.start(), loop)
    try:
        wait_for("the broker to listen", lambda: _listening(port), 10)
        assert not joined.is_set()
        c = client(f"pulsar://127.0.0.1:{port}")
        try:
            c.create_producer("persistent://public/default/claimed-early").send(b"x")
            assert joined.is_set()  # served only once the broker joined
        finally:
            c.close()
        starting.result(10)
        assert owner(zk_client, root, "claimed-early") == broker.service_url
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True
