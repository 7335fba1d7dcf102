"""Damage in a topic's log with the official client: reported, and everything else keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_process import BrokerProcess

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, nothing_more, receive_all  # noqa: E402


def test_a_damaged_entry_stops_its_subscriptions_only(tmp_path: Path) -> None:
    """A flipped byte inside a stored entry: the entries before it are delivered.

    The damage is logged once; sends to that topic and consumers of another topic go on.
    """
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        c = client(broker.url)
        c.subscribe("hurt", "s", consumer_type=pulsar.ConsumerType.Shared).close()
        producer = c.create_producer("hurt", batching_enabled=False)
        for i in range(10):
            producer.send(f"entry-{i:02d}".encode())
        c.close()
        broker.stop()  # a clean stop: the ledger's index is written, so the open does not scan it
        (segment,) = (tmp_path / "data").rglob("*.seg")
        data = bytearray(segment.read_bytes())
        at = data.index(b"entry-06")
        data[at + 6] ^= 0xFF  # inside the payload: only the record's checksum can tell
        segment.write_bytes(bytes(data))
        broker.start()
        c = client(broker.url)
        consumer = c.subscribe("hurt", "s", consumer_type=pulsar.ConsumerType.Shared)
        got = receive_all(consumer, 6)
        assert [m.data() for m in got] == [f"entry-{i:02d}".encode() for i in range(6)]
        assert nothing_more(consumer, 1000)
        producer = c.create_producer("hurt", batching_enabled=False)
        producer.send(b"after the damage")  # appends and receipts go on
        other = c.subscribe("healthy", "s", consumer_type=pulsar.ConsumerType.Shared)
        c.create_producer("healthy", batching_enabled=False).send(b"fine")
        assert other.receive(timeout_millis=10_000).data() == b"fine"
        c.close()
    finally:
        broker.kill()
    log = broker.log_path.read_text()
    assert log.count("cannot dispatch past damage") == 1, log[-2000:]
