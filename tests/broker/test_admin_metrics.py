"""``GET /metrics`` on a real broker: Pulsar's names, types and label order; the figures of ``/stats``."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pulsar
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker_process import BrokerProcess
from cursorkit.broker.server.admin.metrics import collector_of, families, registry_of, render
from cursorkit.broker.server.config import BrokerConfig
from in_process_broker import InProcess
from pulsar_helpers import client, receive_all

pytest.importorskip("aiohttp")

T = TypeVar("T")
NS = "persistent://public/default"
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def fetch(url: str) -> tuple[str, str]:
    """The body and content type of a GET."""
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - a test broker on 127.0.0.1
        return r.read().decode(), r.headers["Content-Type"]


def scrape(broker: BrokerProcess) -> tuple[str, Samples, dict[str, str]]:
    """The raw text, every sample by family and labels, and every family's type."""
    text, _ = fetch(f"{broker.admin_url}/metrics")
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(s.labels.items())] = s.value
    return text, samples, types


def stats(broker: BrokerProcess, local: str) -> Any:
    body, _ = fetch(f"{broker.admin_url}/admin/v2/persistent/public/default/{local}/stats")
    return json.loads(body)


def eventually(check: Callable[[], T], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def topic_labels(local: str) -> tuple[tuple[str, str], ...]:
    return (("cluster", "standalone"), ("namespace", "public/default"), ("topic", f"{NS}/{local}"))


def sub_labels(local: str, sub: str) -> tuple[tuple[str, str], ...]:
    return (*topic_labels(local), ("subscription", sub))


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", "--http-port", "0")
    b.start()
    try:
        yield b
    finally:
        b.kill()


def test_an_empty_broker_has_pulsars_broker_wide_samples(broker: BrokerProcess) -> None:
    text, samples, types = scrape(broker)
    for name in ("pulsar_subscriptions_count", "pulsar_consumers_count", "pulsar_msg_backlog"):
        assert samples[name] == {(("cluster", "standalone"),): 0}
        assert f'{name}{{cluster="standalone"}} 0\n' in text
    assert set(types.values()) == {"gauge"}
    _, content_type = fetch(f"{broker.admin_url}/metrics")
    assert content_type.startswith("text/plain; version=0.0.4")


def test_metrics_match_the_stats_and_keep_pulsars_label_order(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/metered"
        consumer = c.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        c.subscribe(topic, "idle")
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(12):
            producer.send(b"payload-%d" % i)
        got = receive_all(consumer, 12, ack=False)
        for msg in got[1:8:2]:
            consumer.acknowledge(msg)

        def settled() -> Any:
            s = stats(broker, "metered")
            assert s["subscriptions"]["sub"]["msgBacklog"] == 8
            return s

        s = eventually(settled)
        text, samples, types = scrape(broker)
        assert types["pulsar_in_bytes_total"] == "gauge" and types["pulsar_out_messages_total"] == "gauge"
        t = topic_labels("metered")
        assert samples["pulsar_in_messages_total"][t] == s["msgInCounter"] == 12
        assert samples["pulsar_in_bytes_total"][t] == s["bytesInCounter"]
        assert samples["pulsar_storage_size"][t] == s["storageSize"]
        assert samples["pulsar_subscriptions_count"][t] == 2
        assert samples["pulsar_producers_count"][t] == 1 and samples["pulsar_consumers_count"][t] == 2
        assert samples["pulsar_msg_backlog"][t] == 8 + 12
        assert samples["pulsar_rate_in"][t] > 0
        for name in ("sub", "idle"):
            sub, labels = s["subscriptions"][name], sub_labels("metered", name)
            assert samples["pulsar_subscription_back_log"][labels] == sub["msgBacklog"]
            assert samples["pulsar_subscription_back_log_no_delayed"][labels] == sub["msgBacklogNoDelayed"]
            assert samples["pulsar_subscription_unacked_messages"][labels] == sub["unackedMessages"]
            assert samples["pulsar_out_messages_total"][labels] == sub["msgOutCounter"]
            assert samples["pulsar_out_bytes_total"][labels] == sub["bytesOutCounter"]
            assert samples["pulsar_subscription_consumers_count"][labels] == len(sub["consumers"])
            assert samples["pulsar_subscription_blocked_on_unacked_messages"][labels] == 0
            ranges = sub["nonContiguousDeletedMessagesRanges"]
            assert samples["cursorkit_subscription_ack_ranges"][labels] == ranges
        assert samples["pulsar_subscription_unacked_messages"][sub_labels("metered", "sub")] == 8
        assert samples["cursorkit_subscription_ack_ranges"][sub_labels("metered", "sub")] == 4
        # Pulsar's label order and its integer counts, as it writes them
        assert (
            'pulsar_subscription_back_log{cluster="standalone",namespace="public/default",'
            f'topic="{NS}/metered",subscription="sub"}} 8\n'
        ) in text
    finally:
        c.close()


def test_negative_acks_count_as_redeliveries(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/nacked"
        consumer = c.subscribe(
            topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
        )
        producer = c.create_producer(topic, batching_enabled=False)
        producer.send(b"again")
        [msg] = receive_all(consumer, 1, ack=False)
        consumer.negative_acknowledge(msg)
        again = consumer.receive(timeout_millis=10_000)
        assert again.redelivery_count() == 1
        labels = sub_labels("nacked", "sub")

        def counted() -> Samples:
            _, samples, _ = scrape(broker)
            assert samples["cursorkit_subscription_redelivered_messages_total"][labels] == 1
            return samples

        samples = eventually(counted)
        assert samples["pulsar_out_messages_total"][labels] == 2  # sent twice
        sub = stats(broker, "nacked")["subscriptions"]["sub"]
        assert sub["msgRateRedeliver"] > 0 and sub["consumers"][0]["msgRateRedeliver"] > 0
    finally:
        c.close()


def test_the_brokers_registry_gives_generate_latest_the_same_figures(tmp_path: Any) -> None:
    """The collector is a ``prometheus_client`` one: its registry serves ``generate_latest`` as well."""
    inproc = InProcess(BrokerConfig(data=tmp_path, port=0, sync=False))
    try:
        c = client(inproc.url)
        producer = c.create_producer(f"{NS}/registry", batching_enabled=False)
        for _ in range(3):
            producer.send(b"x")
        c.close()

        async def scrape_in_loop() -> tuple[bytes, bytes]:
            collector = collector_of(inproc.broker)
            ours = render(families(await collector.read()))
            return ours, generate_latest(registry_of(inproc.broker))

        ours, theirs = inproc.call(scrape_in_loop())
        values = []
        for text in (ours, theirs):
            samples = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text.decode())
                for s in f.samples
            }
            values.append(samples)
        key = ("pulsar_in_messages_total", tuple(sorted(topic_labels("registry"))))
        assert values[0][key] == values[1][key] == 3
        assert {k for k in values[0] if not k[0].startswith("pulsar_rate")} == {
            k for k in values[1] if not k[0].startswith("pulsar_rate")
        }
    finally:
        inproc.stop()
