"""STICKY Key_Shared with the official client: each consumer owns the hash ranges it names.

A key goes to the consumer whose range holds its slot (``murmur3(key) % 65536``); a slot nobody
holds waits until someone claims it; ranges another consumer holds are refused with
``ConsumerAssignError`` at once, and a refused SUBSCRIBE leaves no consumer behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.keyshared.hashing import slot, sticky_key_hash

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, nothing_more  # noqa: E402

_HALF = 32767


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("sticky") / "data", "--no-sync") as b:
        yield b


@pytest.fixture
def c(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    cl = pulsar.Client(
        broker.url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    yield cl
    cl.close()


def _sticky(c: pulsar.Client, topic: str, *ranges: tuple[int, int], sub: str = "ks") -> pulsar.Consumer:
    policy = pulsar.ConsumerKeySharedPolicy(
        key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges)
    )
    return c.subscribe(
        topic,
        sub,
        consumer_type=pulsar.ConsumerType.KeyShared,
        key_shared_policy=policy,
        initial_position=pulsar.InitialPosition.Earliest,
    )


def _slot(key: str) -> int:
    return slot(sticky_key_hash(key.encode()), "range")


def _receive(consumer: pulsar.Consumer, n: int) -> list[str]:
    out = []
    for _ in range(n):
        m = consumer.receive(timeout_millis=TIMEOUT_MS)
        consumer.acknowledge(m)
        out.append(m.partition_key())
    return out


def test_each_key_goes_to_the_consumer_owning_its_range(c: pulsar.Client) -> None:
    low = _sticky(c, "st-split", (0, _HALF))
    high = _sticky(c, "st-split", (_HALF + 1, 65535))
    keys = [f"key-{i}" for i in range(60)]
    producer = c.create_producer("st-split", batching_enabled=False)
    for k in keys:
        producer.send(k.encode(), partition_key=k)
    n_low = sum(1 for k in keys if _slot(k) <= _HALF)
    got_low, got_high = _receive(low, n_low), _receive(high, len(keys) - n_low)
    assert sorted(got_low) == sorted(k for k in keys if _slot(k) <= _HALF)
    assert sorted(got_high) == sorted(k for k in keys if _slot(k) > _HALF)
    assert nothing_more(low, 200) and nothing_more(high, 200)


def test_overlapping_ranges_are_refused_at_once_and_leave_no_consumer(c: pulsar.Client) -> None:
    first = _sticky(c, "st-overlap", (0, 1000))
    with pytest.raises(pulsar.ConsumerAssignError):
        _sticky(c, "st-overlap", (500, 2000))
    second = _sticky(c, "st-overlap", (1001, 65535))  # a free range still joins
    first.close()
    second.close()
    # Nobody is left: another type may take the subscription (a ghost would make this ConsumerBusy).
    shared = c.subscribe("st-overlap", "ks", consumer_type=pulsar.ConsumerType.Shared)
    shared.close()


def test_reversed_ranges_are_refused(c: pulsar.Client) -> None:
    with pytest.raises(pulsar.ConsumerAssignError):
        _sticky(c, "st-reversed", (10, 5))
    shared = c.subscribe("st-reversed", "ks", consumer_type=pulsar.ConsumerType.Shared)
    shared.close()


def test_uncovered_hashes_wait_for_their_owner(c: pulsar.Client) -> None:
    keys = [f"wait-{i}" for i in range(40)]
    low_keys = sorted(k for k in keys if _slot(k) <= _HALF)
    low = _sticky(c, "st-wait", (0, _HALF))
    producer = c.create_producer("st-wait", batching_enabled=False)
    for k in keys:
        producer.send(k.encode(), partition_key=k)
    assert sorted(_receive(low, len(low_keys))) == low_keys
    assert nothing_more(low, 300)  # the upper half waits
    high = _sticky(c, "st-wait", (_HALF + 1, 65535))
    assert sorted(_receive(high, len(keys) - len(low_keys))) == sorted(set(keys) - set(low_keys))


def test_a_sticky_consumer_cannot_join_an_auto_split_subscription(c: pulsar.Client) -> None:
    auto = c.subscribe("st-mode", "ks", consumer_type=pulsar.ConsumerType.KeyShared)
    with pytest.raises(pulsar.ConsumerBusy):
        _sticky(c, "st-mode", (0, 65535))
    auto.close()
