"""Names are data, with a real broker: refused as Pulsar refuses them, and every name Pulsar accepts works.

A subscription named ``""`` once had the topic's whole ``subscriptions/`` as its directory, so its
unsubscribe removed every other cursor (issue 44); long names failed with ``OSError``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_process import BrokerProcess
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.paths import NAME_FILE, subscription_component
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client, nothing_more, receive_all  # noqa: E402 - needs pulsar


def _subscriptions(data: Path, topic: str) -> Path:
    return data / "topics" / topic_name(topic).directory / "subscriptions"


def _raw_subscribe(raw: Raw, topic: str, subscription: str | bytes, request_id: int) -> api.BaseCommand:
    """A Shared SUBSCRIBE of consumer 1; ``bytes`` go on the wire as they are (not UTF-8, say)."""
    cmd = api.CommandSubscribe(
        topic=topic, subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=request_id
    )
    if isinstance(subscription, str):
        cmd.subscription = subscription
        raw.send(api.BaseCommand(type=api.BaseCommand.SUBSCRIBE, subscribe=cmd))
        return raw.receive()
    placeholder = "\x01" * len(subscription)  # as long as the bytes: no length prefix changes
    cmd.subscription = placeholder
    command = api.BaseCommand(type=api.BaseCommand.SUBSCRIBE, subscribe=cmd).SerializeToString()
    command = command.replace(placeholder.encode(), subscription, 1)
    raw.sock.sendall((len(command) + 4).to_bytes(4, "big") + len(command).to_bytes(4, "big") + command)
    return raw.receive()


def test_an_empty_subscription_cannot_unsubscribe_the_others(tmp_path: Path) -> None:
    """The issue's reproduction: SUBSCRIBE "" then UNSUBSCRIBE; another subscription keeps its 7 messages."""
    topic = "persistent://public/default/kept"
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        c = client(broker.url)
        try:
            keep = c.subscribe(topic, "keep", consumer_type=pulsar.ConsumerType.Shared)
            producer = c.create_producer(topic, batching_enabled=False)
            for i in range(7):
                producer.send(f"m-{i}".encode())
            receive_all(keep, 7, ack=False)
        finally:
            c.close()

        raw = Raw(broker.url)
        raw.connect()
        reply = _raw_subscribe(raw, topic, "", request_id=1)
        assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.ProducerBusy
        assert reply.error.request_id == 1
        unsubscribe = api.CommandUnsubscribe(consumer_id=1, request_id=2)
        raw.send(api.BaseCommand(type=api.BaseCommand.UNSUBSCRIBE, unsubscribe=unsubscribe))
        reply = raw.receive()
        assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.MetadataError  # as Pulsar
        raw.close()
        subs = _subscriptions(broker.data, topic)
        assert sorted(p.name for p in subs.iterdir()) == [subscription_component("keep")]  # no trace of ""

        broker.stop()
        broker.start()
        c = client(broker.url)
        try:
            keep = c.subscribe(topic, "keep", consumer_type=pulsar.ConsumerType.Shared)
            got = receive_all(keep, 7)
            assert sorted(m.data() for m in got) == [f"m-{i}".encode() for i in range(7)]
        finally:
            c.close()
    finally:
        broker.stop()


@pytest.mark.parametrize("name", [" ", "\u2003\t", "pulsar.dedup", "pulsar.repl-east"])
def test_blank_and_reserved_subscriptions_are_refused_without_a_trace(
    broker: BrokerProcess, name: str
) -> None:
    topic = "persistent://public/default/refused"
    raw = Raw(broker.url)
    raw.connect()
    reply = _raw_subscribe(raw, topic, name, request_id=5)
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.ProducerBusy
    reply = _raw_subscribe(raw, topic, "fine", request_id=6)  # the connection serves on
    assert reply.type == api.BaseCommand.SUCCESS
    raw.close()
    subs = _subscriptions(broker.data, topic)
    assert [p.name for p in subs.iterdir()] == [subscription_component("fine")]


def test_a_subscription_that_is_not_utf8_closes_the_connection_without_a_trace(broker: BrokerProcess) -> None:
    raw = Raw(broker.url)
    raw.connect()
    with pytest.raises(ConnectionError):
        _raw_subscribe(raw, "persistent://public/default/not-utf8", b"\xff\xfe", request_id=5)
    raw.close()
    assert not (broker.data / "topics").exists()


@pytest.mark.parametrize("local", ["t" * 300, "déjà vu ~%?#"], ids=["300-byte segment", "other characters"])
def test_long_and_unusual_names_work_end_to_end(tmp_path: Path, local: str) -> None:
    """A 200-byte subscription on such a topic: produce, consume, restart, consume again."""
    topic, sub = f"persistent://public/default/{local}", "s" * 200
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        c = client(broker.url)
        try:
            consumer = c.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared)
            producer = c.create_producer(topic, batching_enabled=False)
            for i in range(10):
                producer.send(f"m-{i}".encode())
            got = receive_all(consumer, 10, ack=False)
            for m in got[:5]:
                consumer.acknowledge(m)
        finally:
            c.close()
        broker.stop()
        broker.start()
        c = client(broker.url)
        try:
            consumer = c.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared)
            again = receive_all(consumer, 5)
            assert sorted(m.data() for m in again) == [f"m-{i}".encode() for i in range(5, 10)]
            c.create_producer(topic, batching_enabled=False).send(b"after")
            assert consumer.receive(timeout_millis=TIMEOUT_MS).data() == b"after"
            assert nothing_more(consumer)
        finally:
            c.close()
        subs = _subscriptions(broker.data, topic)
        assert (subs.parent / NAME_FILE).read_text(encoding="utf-8") == local
        (sub_dir,) = subs.iterdir()
        assert sub_dir.name.startswith("~") and (sub_dir / NAME_FILE).read_text() == sub
    finally:
        broker.stop()


def test_short_names_keep_the_layout_earlier_versions_wrote(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        c.subscribe("persistent://t-1/ns.1/orders", "sub-é", consumer_type=pulsar.ConsumerType.Shared)
    finally:
        c.close()
    sub_dir = broker.data / "topics" / "t-1" / "ns.1" / "orders" / "subscriptions" / "sub-é".encode().hex()
    assert (sub_dir / "cursor").is_dir()
    assert not list(broker.data.rglob(NAME_FILE))
