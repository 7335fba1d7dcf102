"""Durable redelivery counts (``--durable-redelivery-counts``, beyond Pulsar) with the real client.

Pulsar's counts live in memory: after a restart a nacked message comes back with count 0, so a
dead-letter policy can be outrun by restarts. With the flag, the client's own dead-letter policy
fires across restarts, and a consumer that dies holding a message counts as a redelivery of it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_process import BrokerProcess

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client, nothing_more  # noqa: E402 - needs pulsar

_TOPIC = "persistent://public/default/poison"


def _consumer(c: pulsar.Client, max_redeliveries: int) -> pulsar.Consumer:
    return c.subscribe(
        _TOPIC,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=max_redeliveries),
    )


def _nack_then_restart(broker: BrokerProcess, max_redeliveries: int, *, kill: bool) -> int:
    """Receives the message with a fresh client, nacks it, lets the redelivery happen, restarts."""
    c = client(broker.url)
    try:
        consumer = _consumer(c, max_redeliveries)
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        count = int(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
        time.sleep(0.6)  # the client's nack timer sends REDELIVER; the broker counts and resends
    finally:
        c.close()
    if kill:
        broker.kill()
    else:
        broker.stop()
    broker.start()
    return count


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "pulsar"])
def test_a_dead_letter_policy_fires_across_restarts(tmp_path: Path, durable: bool) -> None:
    broker = BrokerProcess(tmp_path / "data", *(["--durable-redelivery-counts"] if durable else []))
    broker.start()
    try:
        c = client(broker.url)
        c.subscribe(_TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared).close()
        c.create_producer(_TOPIC, batching_enabled=False).send(b"poison")
        c.close()
        seen = [_nack_then_restart(broker, 2, kill=i % 2 == 0) for i in range(2)]
        if not durable:
            assert seen == [0, 0], "Pulsar's counts restart at 0 with the broker"
            return
        assert seen == [0, 1], "the count came back with the restarted broker"
        # The third delivery has count 2 = the policy's limit: its nack sends it to the dead letters.
        c = client(broker.url)
        try:
            dlq = c.subscribe(f"{_TOPIC}-s-DLQ", "dlq", initial_position=pulsar.InitialPosition.Earliest)
            consumer = _consumer(c, 2)
            msg = consumer.receive(timeout_millis=TIMEOUT_MS)
            assert msg.redelivery_count() == 2
            consumer.negative_acknowledge(msg)
            dead = dlq.receive(timeout_millis=TIMEOUT_MS)
            assert dead.data() == b"poison"
            dlq.acknowledge(dead)
            assert nothing_more(consumer, 1000), "the dead-lettered message came back"
        finally:
            c.close()
    finally:
        broker.stop()


_HOLDER = """
import sys, time, pulsar
c = pulsar.Client(sys.argv[1], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
consumer = c.subscribe(sys.argv[2], "s", consumer_type=pulsar.ConsumerType.Shared)
msg = consumer.receive(timeout_millis=10000)
print(msg.redelivery_count(), flush=True)
time.sleep(60)
"""


def test_a_consumer_killed_holding_a_message_counts_a_redelivery(tmp_path: Path) -> None:
    """The poison message that kills its consumer (apache/pulsar#5881) counts, so it can be dead-lettered."""
    broker = BrokerProcess(tmp_path / "data", "--durable-redelivery-counts")
    broker.start()
    try:
        c = client(broker.url)
        c.subscribe(_TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared).close()
        c.create_producer(_TOPIC, batching_enabled=False).send(b"poison")
        for expected in (0, 1):
            holder = subprocess.Popen(
                [sys.executable, "-c", _HOLDER, broker.url, _TOPIC], stdout=subprocess.PIPE, text=True
            )
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == str(expected)
            holder.kill()  # dies holding the message: its connection is lost
            holder.wait()
        consumer = c.subscribe(_TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared)
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        assert msg.redelivery_count() == 2
        consumer.acknowledge(msg)
        consumer.close()  # a graceful close holding nothing: nothing counts
        c.close()
    finally:
        broker.stop()
