"""The broker's per-key in-flight cap (``--max-unacked-per-key``, beyond Pulsar) with the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, nothing_more, receive_all  # noqa: E402 - needs pulsar


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("key-cap") / "data", "--max-unacked-per-key", "2") as b:
        yield b


def test_a_hot_key_waits_for_its_acks_and_the_others_flow(capped: BrokerProcess, tmp_path: Path) -> None:
    c = client(capped.url)
    try:
        consumer = c.subscribe("capped", "ks", consumer_type=pulsar.ConsumerType.KeyShared)
        producer = c.create_producer("capped", batching_enabled=False)
        for i in range(6):
            producer.send(f"hot-{i}".encode(), partition_key="hot")
        for i in range(2):
            producer.send(f"cold-{i}".encode(), partition_key="cold")
        first = receive_all(consumer, 4, ack=False)  # two of each key
        assert sorted(m.data() for m in first) == [b"cold-0", b"cold-1", b"hot-0", b"hot-1"]
        assert nothing_more(consumer), "a third message of the hot key came with two unacked"
        consumer.acknowledge(next(m for m in first if m.data() == b"hot-0"))
        (third,) = receive_all(consumer, 1, ack=False)
        assert third.data() == b"hot-2"
        assert nothing_more(consumer)
        for m in [*first, third]:
            consumer.acknowledge(m)
        rest = receive_all(consumer, 3)
        assert [m.data() for m in rest] == [b"hot-3", b"hot-4", b"hot-5"]
    finally:
        c.close()
