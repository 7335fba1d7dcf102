"""``GET /metrics``: Pulsar's topic-level Prometheus metrics, and cursorkit's own, from the stats' figures.

A ``prometheus_client`` collector per broker reads every open topic's figures (``figures.py``, the
same ones ``/stats`` shows) on the event loop, a few topics per turn of it; the families and the
text are made off it. Names, labels and their
order are Pulsar's (``exposeTopicLevelMetricsInPrometheus``, its default): ``cluster``,
``namespace`` (``tenant/namespace``), ``topic`` (the full name; a partition is its own topic), then
``subscription``; every family is typed ``gauge`` as Pulsar types them, ``*_total`` ones too. The
text is written here rather than by ``generate_latest``, which sorts label names
(``subscription`` before ``topic``) and writes every count as a float: Pulsar's order and its
integer counts are kept. Like Pulsar, only topics loaded on the broker are reported, and the
first families also carry a ``{cluster=...} 0`` sample so they exist on an empty broker.
Consumer- and producer-level series are off, as Pulsar's defaults have them. cursorkit's own
figures are prefixed ``cursorkit_``.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample

from cursorkit.broker.server.admin.app_keys import broker_of
from cursorkit.broker.server.admin.figures import SubscriptionFigures, TopicFigures, topic_figures

if TYPE_CHECKING:
    from cursorkit.broker.server.broker import Broker

__all__ = [
    "CLUSTER",
    "CONTENT_TYPE",
    "BrokerCollector",
    "collector_of",
    "families",
    "registry_of",
    "render",
    "routes",
]

CLUSTER = "standalone"
"""The ``cluster`` label: a single broker is Pulsar's standalone cluster."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text format, as Pulsar serves it."""

TOPIC_LABELS = ("cluster", "namespace", "topic")
SUBSCRIPTION_LABELS = (*TOPIC_LABELS, "subscription")

TopicValue = Callable[[TopicFigures], float]
SubscriptionValue = Callable[[SubscriptionFigures], float | None]

WITH_BROKER_DEFAULT: tuple[tuple[str, TopicValue], ...] = (
    ("pulsar_subscriptions_count", lambda t: len(t.subscriptions)),
    ("pulsar_producers_count", lambda t: len(t.publishers)),
    ("pulsar_consumers_count", lambda t: t.consumers_count),
    ("pulsar_rate_in", lambda t: t.msg_rate_in),
    ("pulsar_rate_out", lambda t: t.msg_rate_out),
    ("pulsar_throughput_in", lambda t: t.msg_throughput_in),
    ("pulsar_throughput_out", lambda t: t.msg_throughput_out),
    ("pulsar_storage_size", lambda t: t.storage_size),
    ("pulsar_storage_logical_size", lambda t: t.storage_size),
    ("pulsar_msg_backlog", lambda t: t.msg_backlog),
)
"""Topic families Pulsar writes with a ``{cluster=...} 0`` sample first."""

TOPIC: tuple[tuple[str, TopicValue], ...] = (
    ("pulsar_average_msg_size", lambda t: t.average_msg_size),
    ("pulsar_storage_backlog_size", lambda t: t.backlog_size),
    ("pulsar_publish_rate_limit_times", lambda t: 0),
    ("pulsar_storage_offloaded_size", lambda t: 0),
    ("pulsar_storage_backlog_quota_limit", lambda t: -1),
    ("pulsar_storage_backlog_quota_limit_time", lambda t: -1),
    ("pulsar_in_bytes_total", lambda t: t.bytes_in),
    ("pulsar_in_messages_total", lambda t: t.msg_in),
    (
        "pulsar_delayed_message_index_size_bytes",
        lambda t: sum(s.delayed_index_bytes for s in t.subscriptions),
    ),
)

SUBSCRIPTION: tuple[tuple[str, SubscriptionValue], ...] = (
    ("pulsar_subscription_back_log", lambda s: s.msg_backlog),
    ("pulsar_subscription_back_log_no_delayed", lambda s: s.backlog_no_delayed),
    ("pulsar_subscription_delayed", lambda s: s.msg_delayed),
    ("pulsar_subscription_in_replay", lambda s: s.msg_in_replay),
    ("pulsar_subscription_msg_rate_redeliver", lambda s: s.msg_rate_redeliver),
    ("pulsar_subscription_unacked_messages", lambda s: s.unacked_messages),
    ("pulsar_subscription_blocked_on_unacked_messages", lambda s: int(s.blocked_on_unacked)),
    ("pulsar_subscription_msg_rate_out", lambda s: s.msg_rate_out),
    ("pulsar_subscription_msg_ack_rate", lambda s: 0.0),
    ("pulsar_subscription_msg_throughput_out", lambda s: s.msg_throughput_out),
    ("pulsar_out_bytes_total", lambda s: s.bytes_out),
    ("pulsar_out_messages_total", lambda s: s.msg_out),
    ("pulsar_subscription_last_expire_timestamp", lambda s: 0),
    ("pulsar_subscription_last_acked_timestamp", lambda s: 0),
    ("pulsar_subscription_last_consumed_flow_timestamp", lambda s: 0),
    ("pulsar_subscription_last_consumed_timestamp", lambda s: s.last_consumed_ms),
    ("pulsar_subscription_last_mark_delete_advanced_timestamp", lambda s: 0),
    ("pulsar_subscription_msg_rate_expired", lambda s: 0.0),
    ("pulsar_subscription_total_msg_expired", lambda s: 0),
    ("pulsar_subscription_consumers_count", lambda s: len(s.consumers)),
    ("pulsar_subscription_delayed_message_index_size_bytes", lambda s: s.delayed_index_bytes),
    # PIP-195's bucket tracker figures (bucket trackers only)
    ("pulsar_delayed_message_index_bucket_total", lambda s: s.delayed_buckets),
    ("pulsar_delayed_message_index_loaded", lambda s: s.delayed_loaded),
    ("pulsar_delayed_message_index_bucket_snapshot_size_bytes", lambda s: s.delayed_snapshot_bytes),
    # cursorkit's own
    ("cursorkit_subscription_ack_state_bytes", lambda s: s.ack_state_bytes),
    ("cursorkit_subscription_ack_ranges", lambda s: s.ack_ranges),
    ("cursorkit_subscription_partial_batches", lambda s: s.partial_batches),
    ("cursorkit_subscription_redelivered_messages_total", lambda s: s.redelivered),
    ("cursorkit_delayed_index_damaged_buckets", lambda s: s.delayed_damaged_buckets),
    ("cursorkit_subscription_durable_redelivery_positions", lambda s: s.durable_redelivery_positions),
    ("cursorkit_subscription_durable_redelivery_bytes", lambda s: s.durable_redelivery_bytes),
    ("cursorkit_subscription_redeliveries_not_counted", lambda s: s.redeliveries_not_counted),
)
"""Per-subscription families; a figure of None (not kept for that subscription) writes no sample."""

_DOC = "Pulsar topic-level metric (see docs/reference/admin.md)"


TOPICS_PER_TURN = 64
"""Topics whose figures a scrape reads per turn of the event loop (it yields between turns)."""


class BrokerCollector(Collector):
    """Every open topic's figures as metric families: a ``prometheus_client`` collector, on the loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=False)
        """The broker's own registry, holding this collector."""
        self.registry.register(self)

    def describe(self) -> Iterator[Metric]:
        """No fixed description: the samples follow the topics open now."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        """The families of :func:`families`, over the topics open now (read at once)."""
        now = time.monotonic()
        yield from families([topic_figures(t, now) for t in list(self.broker.topics.values())])

    async def read(self) -> list[TopicFigures]:
        """The open topics' figures, :data:`TOPICS_PER_TURN` per turn of the loop.

        Each topic's figures are read in one go; a topic closed meanwhile is left out.
        """
        now = time.monotonic()
        out: list[TopicFigures] = []
        topics = list(self.broker.topics.items())
        for i, (name, topic) in enumerate(topics):
            if i and not i % TOPICS_PER_TURN:
                await asyncio.sleep(0)
            if self.broker.topics.get(name) is topic:
                out.append(topic_figures(topic, now))
        return out


def families(topics: Sequence[TopicFigures]) -> list[Metric]:
    """Pulsar's families (then cursorkit's) over ``topics``, samples in Pulsar's label order."""
    out: list[Metric] = []
    for name, value in WITH_BROKER_DEFAULT:
        family = GaugeMetricFamily(name, _DOC, labels=TOPIC_LABELS)
        family.samples.append(Sample(name, {"cluster": CLUSTER}, 0, None, None))
        for t in topics:
            family.add_metric([CLUSTER, t.namespace, t.name], value(t))
        out.append(family)
    for name, value in TOPIC:
        family = GaugeMetricFamily(name, _DOC, labels=TOPIC_LABELS)
        for t in topics:
            family.add_metric([CLUSTER, t.namespace, t.name], value(t))
        out.append(family)
    for name, sub_value in SUBSCRIPTION:
        family = GaugeMetricFamily(name, _DOC, labels=SUBSCRIPTION_LABELS)
        for t in topics:
            for s in t.subscriptions:
                v = sub_value(s)
                if v is not None:
                    family.add_metric([CLUSTER, t.namespace, t.name, s.name], v)
        out.append(family)
    blocked = GaugeMetricFamily(
        "cursorkit_subscription_blocked_hashes",
        "Key_Shared hashes held back at the last dispatch, by reason",
        labels=(*SUBSCRIPTION_LABELS, "reason"),
    )
    read_blocked = GaugeMetricFamily(
        "cursorkit_subscription_read_blocked",
        "1 when a Key_Shared subscription's last dispatch read nothing, labelled with why",
        labels=(*SUBSCRIPTION_LABELS, "reason"),
    )
    for t in topics:
        for s in t.subscriptions:
            for reason, n in sorted(s.blocked_hashes.items()):
                blocked.add_metric([CLUSTER, t.namespace, t.name, s.name, reason], n)
            if s.read_blocked is not None:
                read_blocked.add_metric([CLUSTER, t.namespace, t.name, s.name, s.read_blocked], 1)
    out += [blocked, read_blocked]
    return [f for f in out if f.samples]


def _number(value: float) -> str:
    """A sample's value as Pulsar writes it: counts as integers, rates as Java doubles."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(metrics: Iterable[Metric]) -> bytes:
    """Prometheus' text format with each sample's labels in the order they were given (Pulsar's)."""
    lines: list[str] = []
    for metric in metrics:
        lines.append(f"# TYPE {metric.name} {metric.type}\n")
        for s in metric.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels.items())
            lines.append(
                f"{s.name}{{{labels}}} {_number(s.value)}\n" if labels else f"{s.name} {_number(s.value)}\n"
            )
    return "".join(lines).encode()


_collectors: weakref.WeakKeyDictionary[Broker, BrokerCollector] = weakref.WeakKeyDictionary()


def collector_of(broker: Broker) -> BrokerCollector:
    """The broker's collector and registry (made on the first scrape)."""
    collector = _collectors.get(broker)
    if collector is None:
        collector = _collectors[broker] = BrokerCollector(broker)
    return collector


def registry_of(broker: Broker) -> CollectorRegistry:
    """The broker's own registry (``prometheus_client.generate_latest`` takes it too)."""
    return collector_of(broker).registry


async def get_metrics(request: web.Request) -> web.Response:
    """GET ``/metrics``: the figures read on the loop (some topics per turn), families and text off it."""
    figures = await collector_of(broker_of(request)).read()
    body = await asyncio.to_thread(lambda: render(families(figures)))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def routes() -> list[web.RouteDef]:
    """This module's routes."""
    return [web.get("/metrics", get_metrics), web.get("/metrics/", get_metrics)]
