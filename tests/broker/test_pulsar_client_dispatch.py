"""Dispatch with the official Pulsar client: a last consumer leaving, for each kind of dispatcher.

(The Python client cannot set a priority level; the levels are tested on ``SharedDispatcher``.)
"""

from __future__ import annotations

import pytest

from broker_process import BrokerProcess

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, nothing_more, receive_all  # noqa: E402


@pytest.mark.parametrize(
    "kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared, pulsar.ConsumerType.Exclusive]
)
def test_messages_of_a_last_consumer_leaving_go_to_the_next(broker: BrokerProcess, kind: object) -> None:
    """Unacked messages of the only consumer come to the next one to subscribe; acked ones never."""
    c = client(broker.url)
    try:
        first = c.subscribe("handover", "s", consumer_type=kind)
        producer = c.create_producer("handover", batching_enabled=False)
        for i in range(20):
            producer.send(f"m-{i}".encode(), partition_key=f"k-{i % 3}")
        got = receive_all(first, 20, ack=False)
        for m in got[:5]:
            first.acknowledge(m)
        first.close()
        second = c.subscribe("handover", "s", consumer_type=kind)
        again = receive_all(second, 15)
        assert sorted(m.data() for m in again) == sorted(f"m-{i}".encode() for i in range(5, 20))
        assert nothing_more(second)
    finally:
        c.close()


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize(
    "kind",
    [pulsar.ConsumerType.Shared, pulsar.ConsumerType.Failover, pulsar.ConsumerType.KeyShared],
    ids=["Shared", "Failover", "Key_Shared"],
)
def test_every_kind_with_and_without_batching(broker: BrokerProcess, kind: object, batching: bool) -> None:
    """300 messages in, the same 300 out, once each (Exclusive has its own test)."""
    c = client(broker.url)
    try:
        consumer = c.subscribe("kinds", "s", consumer_type=kind, receiver_queue_size=50)
        producer = c.create_producer(
            "kinds",
            batching_enabled=batching,
            batching_max_messages=20,
            batching_max_publish_delay_ms=5,
            batching_type=pulsar.BatchingType.KeyBased if batching else pulsar.BatchingType.Default,
        )
        for i in range(300):
            producer.send_async(f"m-{i}".encode(), None, partition_key=f"k-{i % 7}")
        producer.flush()
        got = receive_all(consumer, 300)
        assert sorted(m.data() for m in got) == sorted(f"m-{i}".encode() for i in range(300))
        if kind != pulsar.ConsumerType.Shared:  # one consumer: in order, per key and overall
            keys = [m.partition_key() for m in got]
            for k in set(keys):
                mine = [int(m.data()[2:]) for m in got if m.partition_key() == k]
                assert mine == sorted(mine)
        assert nothing_more(consumer)
    finally:
        c.close()


@pytest.mark.parametrize(
    ("first", "then"),
    [("Shared", "Exclusive"), ("Exclusive", "Shared"), ("KeyShared", "Failover"), ("Shared", "KeyShared")],
)
def test_a_subscription_of_another_type_gets_everything_left_unacked(
    broker: BrokerProcess, first: str, then: str
) -> None:
    """Once its consumers left, a subscription may change type; the new one receives what was not acked."""
    c = client(broker.url)
    try:
        topic = f"switch-{first}-{then}"
        before = c.subscribe(topic, "s", consumer_type=getattr(pulsar.ConsumerType, first))
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(6):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        got = receive_all(before, 6, ack=False)
        for m in got[:2]:
            before.acknowledge(m)
        before.close()
        after = c.subscribe(topic, "s", consumer_type=getattr(pulsar.ConsumerType, then))
        rest = sorted(m.data() for m in receive_all(after, 4))
        assert rest == sorted(m.data() for m in got[2:])
        assert nothing_more(after, 300)
    finally:
        c.close()
