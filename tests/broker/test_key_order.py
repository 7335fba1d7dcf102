"""The broker's key-ordered nacks (``--key-ordered-nacks``, beyond Pulsar) with the real client.

The application handles one key's messages in order, nacks one of them once and acks the rest.
Pulsar's client sends the nack after its delay and the acks of the later messages on its ack
timer, so they overtake it. Without key order (as Pulsar) the nacked message comes back last: the
messages' final handlings are out of order. With it, the later messages come back behind the
nacked one, and their final handlings are in position order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client  # noqa: E402 - needs pulsar


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    base = tmp_path_factory.mktemp("key-order")
    with (
        running_broker(base / "ordered", "--key-ordered-nacks") as ordered,
        running_broker(base / "plain") as plain,
    ):
        yield ordered, plain


def _final_handlings(url: str, topic: str) -> tuple[list[str], list[str]]:
    """Every handling in order, and each message's last handling in order (its ack counted)."""
    c = client(url)
    try:
        consumer = c.subscribe(
            topic,
            "ks",
            consumer_type=pulsar.ConsumerType.KeyShared,
            negative_ack_redelivery_delay_ms=100,
        )
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(8):
            producer.send(f"m{i}".encode(), partition_key="k")
        handled: list[str] = []
        nacked = False
        while True:
            # Until every message was seen, then until a second passes with nothing more.
            wait = TIMEOUT_MS if len(set(handled)) < 8 else 1000
            try:
                msg = consumer.receive(timeout_millis=wait)
            except pulsar.Timeout:
                if wait == TIMEOUT_MS:
                    raise
                break
            data = msg.data().decode()
            handled.append(data)
            if data == "m2" and not nacked:
                nacked = True
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
        last = sorted(set(handled), key=lambda m: max(i for i, h in enumerate(handled) if h == m))
        return handled, last
    finally:
        c.close()


def test_a_nack_keeps_its_keys_order(brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path) -> None:
    ordered, _ = brokers
    handled, last = _final_handlings(ordered.url, "ordered-nacks")
    assert last == [f"m{i}" for i in range(8)], handled
    # The later messages were handled before the retry, so they came back behind it.
    assert handled.count("m2") == 2 and handled.count("m7") == 2, handled


def test_without_it_the_nacked_message_comes_back_last(
    brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path
) -> None:
    _, plain = brokers
    handled, last = _final_handlings(plain.url, "plain-nacks")
    assert last == ["m0", "m1", "m3", "m4", "m5", "m6", "m7", "m2"], handled
