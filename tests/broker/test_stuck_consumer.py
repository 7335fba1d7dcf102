"""The broker's stuck-consumer isolation (``--stuck-consumer-timeout-ms``, beyond Pulsar), real client.

Two Key_Shared consumers share a topic. One hangs: its application stops receiving, so its
client's queue fills, it sends no more flow and acks nothing. In Pulsar its keys' entries fill
the replay queue up to the look-ahead limit (here 2 x 2,000 entries) and reads stop for the other
consumer too. With isolation the hung consumer's entries are dropped from memory and read again
later: the other consumer gets every message of its keys, and the hung one, when it comes back,
gets all of its own, each key in order. Which keys are whose comes from Pulsar's ring (consistent
hashing of the consumer names), not from what was delivered: the hung consumer surely owns some.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.keyshared import ConsistentHashingSelector
from cursorkit.keyshared.hashing import slot, sticky_key_hash

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client  # noqa: E402 - needs pulsar

MESSAGES = 20_000
KEYS = 100


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    base = tmp_path_factory.mktemp("stuck")
    with (
        running_broker(base / "isolating", "--stuck-consumer-timeout-ms", "300") as isolating,
        running_broker(base / "plain") as plain,
    ):
        yield isolating, plain


@dataclass(frozen=True)
class _Named:
    name: str


def _owners() -> dict[str, set[int]]:
    """Each consumer's keys on Pulsar's consistent-hashing ring ("hung" joins first, then "well")."""
    ring: ConsistentHashingSelector[_Named] = ConsistentHashingSelector()
    ring.add_consumer(_Named("hung"))
    ring.add_consumer(_Named("well"))
    owners: dict[str, set[int]] = {"hung": set(), "well": set()}
    for key in range(KEYS):
        owner = ring.select(slot(sticky_key_hash(f"key-{key}".encode()), "consistent"))
        assert owner is not None
        owners[owner.name].add(key)
    assert owners["hung"] and owners["well"], f"one consumer owns every key: {owners}"
    return owners


def _drain(consumer: pulsar.Consumer, quiet_ms: int) -> list[pulsar.Message]:
    """Receives and acks until nothing comes for ``quiet_ms``."""
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=quiet_ms)
        except pulsar.Timeout:
            return out
        out.append(msg)
        consumer.acknowledge(msg)


def _key(msg: pulsar.Message) -> int:
    return int(msg.data().decode().split(":")[0])


def _scenario(url: str, topic: str) -> tuple[list[pulsar.Message], list[pulsar.Message]]:
    """What the well consumer got while the other hung, and what the hung one got when it came back."""
    c = client(url)
    try:
        ks = pulsar.ConsumerType.KeyShared
        hung = c.subscribe(topic, "ks", consumer_type=ks, consumer_name="hung", receiver_queue_size=10)
        well = c.subscribe(topic, "ks", consumer_type=ks, consumer_name="well")
        producer = c.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        for i in range(MESSAGES):
            producer.send_async(f"{i % KEYS}:{i}".encode(), None, partition_key=f"key-{i % KEYS}")
        producer.flush()
        got = _drain(well, 3000)  # the hung consumer receives nothing meanwhile
        back = _drain(hung, 3000)  # then it comes back
        return got, back
    finally:
        c.close()


def test_a_hung_consumer_does_not_stall_the_other(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    isolating, _ = brokers
    owners = _owners()
    got, back = _scenario(isolating.url, "isolated")
    assert {_key(m) for m in got} == owners["well"], "the well consumer did not get exactly its keys"
    assert {_key(m) for m in back} == owners["hung"], "the hung consumer did not get exactly its keys back"
    assert len(got) == _messages_of(owners["well"]), "the well consumer stalled"
    assert len(back) == _messages_of(owners["hung"]), "the hung consumer did not get all of its messages back"
    last: dict[int, int] = {}
    for m in back:
        key, seq = _key(m), int(m.data().decode().split(":")[1])
        assert seq > last.get(key, -1), f"key {key}: {seq} after {last[key]}"
        last[key] = seq


def test_without_isolation_the_hung_consumer_stalls_the_other(
    brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    _, plain = brokers
    owners = _owners()
    got, _ = _scenario(plain.url, "stalled")
    assert {_key(m) for m in got} <= owners["well"], "the well consumer got the hung one's keys"
    mine = _messages_of(owners["well"])
    assert len(got) < mine, "reads did not stop: the hung consumer's keys never filled the look-ahead"


def _messages_of(keys: set[int]) -> int:
    return sum(1 for i in range(MESSAGES) if i % KEYS in keys)
