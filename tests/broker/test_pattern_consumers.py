"""Regex subscriptions: GET_TOPICS_OF_NAMESPACE answered as Pulsar answers it.

The official client's pattern consumer receives from the topics its pattern matches, those created
later included.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.server import namespace_topics
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.namespace_topics import NamespaceTopics, scan_topics, topic_list, topics_hash
from cursorkit.broker.server.paths import NAME_FILE, topic_directory
from cursorkit.broker.server.topic_patterns import topic_pattern
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")
_pulsar = pytest.importorskip("_pulsar")

from pulsar_helpers import client, nothing_more  # noqa: E402

_NS = "persistent://public/default/"


@pytest.fixture
def fast_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rediscovery every second, in each consumer configuration made during the test.

    The Python wrapper (3.12, 3.13) takes ``pattern_auto_discovery_period`` and never passes it on.
    """
    made = _pulsar.ConsumerConfiguration

    def configuration() -> object:
        conf = made()
        conf.pattern_auto_discovery_period(1)
        return conf

    monkeypatch.setattr(_pulsar, "ConsumerConfiguration", configuration)


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(broker.url)
    r.connect()
    yield r
    r.close()


def ask(raw: Raw, namespace: str = "public/default", **fields: object) -> api.BaseCommand:
    q = api.CommandGetTopicsOfNamespace(request_id=7, namespace=namespace, **fields)  # type: ignore[arg-type]
    raw.send(api.BaseCommand(type=api.BaseCommand.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=q))
    reply = raw.receive()
    if reply.type == api.BaseCommand.ERROR:
        assert reply.error.request_id == 7
    else:
        assert reply.getTopicsOfNamespaceResponse.request_id == 7
    return reply


def make_topics(url: str, *names: str) -> None:
    c = client(url)
    try:
        for n in names:
            c.create_producer(n).close()
    finally:
        c.close()


def receive_data(consumer: pulsar.Consumer, n: int) -> set[tuple[str, bytes]]:
    got = set()
    for _ in range(n):
        msg = consumer.receive(timeout_millis=5000)
        consumer.acknowledge(msg)
        got.add((msg.topic_name(), msg.data()))
    return got


# -- the official client -------------------------------------------------------------------------------


def test_a_pattern_consumer_receives_from_the_topics_it_matches(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        producers = {n: c.create_producer(n) for n in ("rx-1", "rx-2", "other", "x-rx-3")}
        consumer = c.subscribe(
            re.compile(_NS + "rx-.*"), "rx", initial_position=pulsar.InitialPosition.Earliest
        )
        for n, p in producers.items():
            p.send(n.encode())
        assert receive_data(consumer, 2) == {(_NS + "rx-1", b"rx-1"), (_NS + "rx-2", b"rx-2")}
        assert nothing_more(consumer)
    finally:
        c.close()


def test_a_pattern_consumer_picks_up_a_topic_created_later(
    broker: BrokerProcess, fast_discovery: None
) -> None:
    c = client(broker.url)
    try:
        first = c.create_producer("late-1")
        consumer = c.subscribe(
            re.compile(_NS + "late-.*"), "s", initial_position=pulsar.InitialPosition.Earliest
        )
        later = c.create_producer("late-2")  # no consumer on it yet: the rediscovery subscribes
        c.create_producer("early-3").send(b"not for the pattern")
        later.send(b"later")
        first.send(b"first")
        deadline = time.monotonic() + 10
        got: set[tuple[str, bytes]] = set()
        while len(got) < 2 and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(msg)
            got.add((msg.topic_name(), msg.data()))
        assert got == {(_NS + "late-1", b"first"), (_NS + "late-2", b"later")}
        assert nothing_more(consumer)
    finally:
        c.close()


def test_a_pattern_consumer_receives_from_every_partition(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--partitioned-topic", "parts=3") as b:
        c = client(b.url)
        try:
            consumer = c.subscribe(
                re.compile(_NS + "par.*"), "s", initial_position=pulsar.InitialPosition.Earliest
            )
            producer = c.create_producer("parts", batching_enabled=False)
            for i in range(30):
                producer.send(f"{i}".encode(), partition_key=f"k{i}")
            got = receive_data(consumer, 30)
            assert {d for _, d in got} == {f"{i}".encode() for i in range(30)}
            assert {t for t, _ in got} == {f"{_NS}parts-partition-{i}" for i in range(3)}
        finally:
            c.close()


# -- GET_TOPICS_OF_NAMESPACE on the wire ------------------------------------------------------------------


def test_the_list_is_the_namespaces_persistent_topics_with_pulsars_hash(
    broker: BrokerProcess, raw: Raw
) -> None:
    make_topics(broker.url, "b", "a", "t@1", "café", "tn/ns/y")
    answer = ask(raw).getTopicsOfNamespaceResponse
    expected = [_NS + n for n in ("a", "b", "café", "t@1")]
    assert list(answer.topics) == expected
    assert not answer.filtered and answer.changed
    assert answer.topics_hash == topics_hash(expected)
    assert list(ask(raw, "tn/ns").getTopicsOfNamespaceResponse.topics) == ["persistent://tn/ns/y"]
    assert (
        list(ask(raw, mode=api.CommandGetTopicsOfNamespace.ALL).getTopicsOfNamespaceResponse.topics)
        == expected
    )
    none = ask(raw, mode=api.CommandGetTopicsOfNamespace.NON_PERSISTENT).getTopicsOfNamespaceResponse
    assert list(none.topics) == [] and none.topics_hash == "00000000"
    assert list(ask(raw, "empty/ns").getTopicsOfNamespaceResponse.topics) == []


def test_a_pattern_filters_and_a_known_hash_is_unchanged(broker: BrokerProcess, raw: Raw) -> None:
    make_topics(broker.url, "rx-1", "rx-2", "ry-1")
    answer = ask(raw, topics_pattern=_NS + "rx-.*").getTopicsOfNamespaceResponse
    assert list(answer.topics) == [_NS + "rx-1", _NS + "rx-2"] and answer.filtered and answer.changed
    assert answer.topics_hash == "8a45d56c"  # Guava's CRC-32C of the two names, as Pulsar's broker writes it
    same = ask(raw, topics_pattern=_NS + "rx-.*", topics_hash="8a45d56c").getTopicsOfNamespaceResponse
    assert list(same.topics) == [] and not same.changed and same.topics_hash == "8a45d56c"
    make_topics(broker.url, "rx-3")
    grown = ask(raw, topics_pattern=_NS + "rx-.*", topics_hash="8a45d56c").getTopicsOfNamespaceResponse
    assert list(grown.topics) == [_NS + f"rx-{i}" for i in (1, 2, 3)] and grown.changed


def test_a_long_or_unlinear_pattern_is_left_to_the_client(broker: BrokerProcess, raw: Raw) -> None:
    make_topics(broker.url, "rx-1", "ry-1")
    for pattern in (_NS + "rx-" + "1?" * 20, _NS + r"(r)\1*"):  # 51 characters; a back-reference
        answer = ask(raw, topics_pattern=pattern).getTopicsOfNamespaceResponse
        assert list(answer.topics) == [_NS + "rx-1", _NS + "ry-1"] and not answer.filtered


def test_a_catastrophic_pattern_is_answered_at_once(broker: BrokerProcess, raw: Raw) -> None:
    """``(a|aa)*b`` over 1000-character names: hours for a backtracking engine, milliseconds here."""
    make_topics(broker.url, *(f"{i}" + "a" * 990 for i in range(5)))
    started = time.monotonic()
    answer = ask(raw, topics_pattern="public/default/[0-9](a|aa)*b").getTopicsOfNamespaceResponse
    assert time.monotonic() - started < 2.0
    assert answer.filtered and list(answer.topics) == []


@pytest.mark.parametrize(
    ("namespace", "pattern", "error"),
    [
        ("public/default", _NS + "rx-(", api.MetadataError),
        ("public/default", "memory://public/default/.*", api.MetadataError),
        ("pub lic/default", None, api.InvalidTopicName),
        ("public", None, api.InvalidTopicName),
        ("public/cluster/default", None, api.NotAllowedError),
    ],
)
def test_refusals_are_pulsars_errors(
    broker: BrokerProcess, raw: Raw, namespace: str, pattern: str | None, error: int
) -> None:
    fields = {} if pattern is None else {"topics_pattern": pattern}
    reply = ask(raw, namespace, **fields)
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == error
    assert ask(raw).type == api.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE  # the connection serves on


def test_topics_on_disk_are_listed_after_a_restart(tmp_path: Path) -> None:
    long = "l" * 300 + "-é"
    with running_broker(tmp_path / "data") as b:
        make_topics(b.url, "kept", long, "persistent://./../odd")
    with running_broker(tmp_path / "data") as b:
        r = Raw(b.url)
        r.connect()
        assert list(ask(r).getTopicsOfNamespaceResponse.topics) == [_NS + "kept", _NS + long]
        assert list(ask(r, "./..").getTopicsOfNamespaceResponse.topics) == ["persistent://./../odd"]
        r.close()


@pytest.mark.spark
@pytest.mark.slow  # ZooKeeper runs from pyspark's jars
def test_brokers_sharing_a_data_directory_list_each_others_topics(zk_server: Any, tmp_path: Path) -> None:
    metadata = f"zk://{zk_server.hosts}/lists-{uuid.uuid4().hex[:8]}"
    a = BrokerProcess(tmp_path / "data", "--metadata", metadata, name="a")
    b = BrokerProcess(tmp_path / "data", "--metadata", metadata, name="b")
    a.start()
    b.start()
    try:
        make_topics(a.url, "made-on-a")
        r = Raw(b.url)
        r.connect()
        assert list(ask(r).getTopicsOfNamespaceResponse.topics) == [_NS + "made-on-a"]
        r.close()
    finally:
        a.kill()
        b.kill()


# -- the pieces ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], "00000000"),
        ([_NS + "rx-2", _NS + "rx-1"], "8a45d56c"),
        ([_NS + "rx-2", _NS + "rx-1", _NS + "other"], "16ab8b02"),
        (["persistent://t/n/\U0001f600", "persistent://t/n/\uff21", "persistent://t/n/café"], "7e77dff6"),
    ],
)
def test_the_hash_is_pulsars(names: list[str], expected: str) -> None:
    """Golden values from Guava 31.1's ``Hashing.crc32c()`` over Java's sorted, ``,``-joined names.

    The last one sorts differently by code point (Python) and by UTF-16 unit (Java): U+1F600 first.
    """
    assert topics_hash(names) == expected


def test_partitions_match_by_their_topics_name() -> None:
    names = [_NS + "p-partition-0", _NS + "p-partition-1", _NS + "q-partition-0", _NS + "p-partition-01"]
    answer = topic_list(names, topic_pattern(_NS + "p"), None, max_bytes=1 << 20)
    assert answer.topics == [_NS + "p-partition-0", _NS + "p-partition-1"] and answer.filtered


def test_past_the_match_budget_the_answer_is_unfiltered(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"{_NS}t{i}" for i in range(100)]
    pattern = topic_pattern(_NS + "t1.*")
    assert pattern is not None
    cost = sum(pattern.cost(len(n.removeprefix("persistent://"))) for n in names)
    monkeypatch.setattr(namespace_topics, "MATCH_BUDGET", cost)
    assert len(topic_list(names, pattern, None, max_bytes=1 << 20).topics) == 11  # t1, t10..t19
    monkeypatch.setattr(namespace_topics, "MATCH_BUDGET", cost - 1)
    answer = topic_list(names, pattern, None, max_bytes=1 << 20)
    assert not answer.filtered and len(answer.topics) == 100


def test_an_answer_past_the_message_size_is_not_allowed() -> None:
    names = [f"{_NS}{i:0100d}" for i in range(1000)]
    with pytest.raises(ProtocolError) as e:
        topic_list(names, None, None, max_bytes=100_000)
    assert e.value.server_error == api.NotAllowedError
    assert len(topic_list(names, None, None, max_bytes=200_000).topics) == 1000


def test_the_disk_scan_reads_long_names_and_steps_over_damage(tmp_path: Path) -> None:
    topics = tmp_path / "topics"
    made = [
        "persistent://t/n/plain",
        "persistent://t/n/" + "x" * 300,
        "persistent://t/n/a b",
        "persistent://./n/c",
    ]
    for full in made:
        topic_directory(topics, topic_name(full).segments, sync=False)
    (topics / "t" / "n" / "not plain").mkdir()  # no directory of ours is named so
    (topics / "t" / "n" / ("~" + "0" * 64)).mkdir()  # a long form whose name file was never written
    (topics / "t" / "n" / "stray-file").write_text("")
    assert scan_topics(topics) == {("t", "n"): {"plain", "x" * 300, "a b"}, (".", "n"): {"c"}}
    long_dir = topics / "t" / "n" / topic_name(made[1]).directory.split("/")[2]
    (long_dir / NAME_FILE).write_text("y" * 300)  # holds another name than its hash says: damage
    assert scan_topics(topics)[("t", "n")] == {"plain", "a b"}


def test_the_registry_knows_created_topics_and_partitions(tmp_path: Path) -> None:
    known = NamespaceTopics(tmp_path / "topics")
    known.add(topic_name("a"))
    known.add_partitioned(topic_name("p"), 2)
    assert sorted(known.known(("public", "default"))) == [
        _NS + "a",
        _NS + "p-partition-0",
        _NS + "p-partition-1",
    ]
