"""Names Pulsar accepts are served; what this broker does not serve is refused at once.

The refusal is NotAllowedError, a code the C++ client does not retry: users see a prompt failure,
not a 30 s timeout (InvalidTopicName, kept for names Pulsar refuses, the client retries).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, receive_all  # noqa: E402

_T = api.BaseCommand
_ACCEPTED = [
    "t@1",
    "a+b",
    "café",
    "x=y:z.w-v_u",
    "a b%20c?d#e",
    "..",
    "日本",
    "persistent://te.n=a:nt/n-s_1/t",
]


def _default_client(url: str) -> pulsar.Client:
    """The client as users make it: the default 30 s operation timeout."""
    return pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the refusals: none of them may leave a topic behind."""
    with running_broker(tmp_path_factory.mktemp("refusals") / "data") as b:
        yield b


@pytest.fixture
def raw(refusing: BrokerProcess) -> Iterator[Raw]:
    r = Raw(refusing.url)
    r.connect()
    yield r
    r.close()


def _commands(topic: str) -> dict[str, api.BaseCommand]:
    """The four commands naming a topic, each with request id 5."""
    return {
        "LOOKUP": _T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=topic, request_id=5)),
        "PARTITIONED_METADATA": _T(
            type=_T.PARTITIONED_METADATA,
            partitionMetadata=api.CommandPartitionedTopicMetadata(topic=topic, request_id=5),
        ),
        "PRODUCER": _T(
            type=_T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=5)
        ),
        "SUBSCRIBE": _T(
            type=_T.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic=topic,
                subscription="s",
                subType=api.CommandSubscribe.Shared,
                consumer_id=1,
                request_id=5,
            ),
        ),
    }


def _error_of(reply: api.BaseCommand) -> tuple[int, str]:
    """The server error a refusal carries, in whichever answer the command has."""
    if reply.type == _T.LOOKUP_RESPONSE:
        r = reply.lookupTopicResponse
        assert r.response == api.CommandLookupTopicResponse.Failed and r.request_id == 5
        return r.error, r.message
    if reply.type == _T.PARTITIONED_METADATA_RESPONSE:
        m = reply.partitionMetadataResponse
        assert m.response == api.CommandPartitionedTopicMetadataResponse.Failed and m.request_id == 5
        return m.error, m.message
    assert reply.type == _T.ERROR and reply.error.request_id == 5, reply
    return reply.error.error, reply.error.message


def _no_topic_dirs(data: Path) -> list[Path]:
    topics = data / "topics"
    return sorted(p for p in topics.rglob("*")) if topics.exists() else []


# -- what is not served: refused at once ---------------------------------------------------------------


@pytest.mark.parametrize(
    "topic", ["non-persistent://public/default/x", "persistent://public/cluster/default/x"]
)
@pytest.mark.parametrize("command", ["LOOKUP", "PARTITIONED_METADATA", "PRODUCER", "SUBSCRIBE"])
def test_what_is_not_served_is_not_allowed_and_leaves_no_trace(
    refusing: BrokerProcess, raw: Raw, topic: str, command: str
) -> None:
    raw.send(_commands(topic)[command])
    error, message = _error_of(raw.receive())
    assert error == api.NotAllowedError and "not served" in message
    assert _no_topic_dirs(refusing.data) == []


@pytest.mark.parametrize("topic", ["persistent://a b/ns/t", "persistent://public/default/", "memory://a/b/c"])
@pytest.mark.parametrize("command", ["LOOKUP", "PARTITIONED_METADATA", "PRODUCER", "SUBSCRIBE"])
def test_a_name_pulsar_refuses_is_still_invalid_topic_name(
    refusing: BrokerProcess, raw: Raw, topic: str, command: str
) -> None:
    raw.send(_commands(topic)[command])
    error, _ = _error_of(raw.receive())
    assert error == api.InvalidTopicName
    assert _no_topic_dirs(refusing.data) == []


@pytest.mark.parametrize(
    "topic", ["non-persistent://public/default/x", "persistent://public/cluster/default/x", "x" * 1000]
)
def test_the_client_fails_promptly_on_what_is_not_served(refusing: BrokerProcess, topic: str) -> None:
    """With the default 30 s operation timeout, the producer and the consumer fail in well under 5 s."""
    c = _default_client(refusing.url)
    try:
        for attempt in (lambda: c.create_producer(topic), lambda: c.subscribe(topic, "s")):
            started = time.monotonic()
            with pytest.raises(pulsar.NotAllowedError):
                attempt()
            assert time.monotonic() - started < 5.0
    finally:
        c.close()
    assert _no_topic_dirs(refusing.data) == []


# -- names Pulsar accepts: served, and kept --------------------------------------------------------------


def test_names_with_any_character_pulsar_accepts_are_produced_and_consumed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data) as b:
        c = client(b.url)
        try:
            for topic in _ACCEPTED:
                consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
                producer = c.create_producer(topic)
                producer.send(topic.encode())
                producer.send(b"kept")
                assert [m.data() for m in receive_all(consumer, 1)] == [topic.encode()]
                consumer.close()
        finally:
            c.close()
    with running_broker(data) as b:  # each topic has its own directory, found again after a restart
        c = client(b.url)
        try:
            for topic in _ACCEPTED:
                consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
                assert [m.data() for m in receive_all(consumer, 1)] == [b"kept"]
        finally:
            c.close()
    local_dirs = [p for p in (data / "topics" / "public" / "default").iterdir()]
    assert len(local_dirs) == len(_ACCEPTED) - 1  # one directory each (the last one is in another namespace)
    assert {p.name for p in local_dirs} >= {
        "x=y:z.w-v_u"
    }  # a plain name keeps the layout earlier versions wrote
