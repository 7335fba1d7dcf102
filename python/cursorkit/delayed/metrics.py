"""Prometheus metrics of delayed delivery under PIP-195's names, as a collector over live trackers.

``OpStats`` is what a tracker records per snapshot operation; ``DelayedDeliveryCollector`` reads the
trackers registered with it at scrape time (nothing is copied on the delivery path).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

OP_TYPES = ("create", "load", "delete", "merge")
"""PIP-195's ``type`` label values."""

LATENCY_BOUNDS_MS = (50.0, 100.0, 500.0, 1000.0, 5000.0, 30000.0, 60000.0)
"""PIP-195's latency thresholds; a final ``+Inf`` bucket stands for its ``overflow``."""


class OpStats:
    """Counts and latencies of snapshot operations by type (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ok = dict.fromkeys(OP_TYPES, 0)
        self._failed = dict.fromkeys(OP_TYPES, 0)
        self._buckets = {t: [0] * (len(LATENCY_BOUNDS_MS) + 1) for t in OP_TYPES}
        self._sum = dict.fromkeys(OP_TYPES, 0.0)

    def record(self, op: str, ok: bool, latency_ms: float) -> None:
        """Counts one operation of type ``op`` (one of ``OP_TYPES``)."""
        with self._lock:
            (self._ok if ok else self._failed)[op] += 1
            i = next((k for k, b in enumerate(LATENCY_BOUNDS_MS) if latency_ms <= b), len(LATENCY_BOUNDS_MS))
            self._buckets[op][i] += 1
            self._sum[op] += latency_ms

    def count(self, op: str, state: str = "all") -> int:
        """Operations of type ``op`` that ``succeed``-ed, ``failed``, or ``all``."""
        with self._lock:
            ok, failed = self._ok[op], self._failed[op]
        return {"succeed": ok, "failed": failed, "all": ok + failed}[state]

    def latency(self, op: str) -> tuple[list[int], float]:
        """Cumulative bucket counts (last = +Inf) and the latency sum for ``op``."""
        with self._lock:
            raw, total = list(self._buckets[op]), self._sum[op]
        cumulative, running = [], 0
        for n in raw:
            running += n
            cumulative.append(running)
        return cumulative, total


@dataclass(frozen=True, slots=True)
class TrackerFigures:
    """What one scrape reads of a tracker."""

    delayed_messages: int
    buffer_memory_usage: int
    bucket_total: int | None = None
    loaded_indexes: int | None = None
    snapshot_size_bytes: int | None = None
    op_stats: OpStats | None = None
    damaged_buckets: int = 0
    """Buckets lost to damaged or vanished snapshots (their messages handed back for replay)."""


class ReportsFigures(Protocol):
    """A tracker that can be scraped (both trackers implement it)."""

    def metric_figures(self) -> TrackerFigures:
        """Current figures for the metrics."""
        ...


class DelayedDeliveryCollector(Collector):
    """Exposes every registered tracker's figures with PIP-195's metric names, labelled by topic.

    ``pulsar_subscription_delayed`` and ``pulsar_delayed_message_index_size_bytes`` are reported for
    both trackers; the ``…_bucket_*`` and ``…_loaded`` families only for bucket trackers. Pulsar's
    latency "quantile" thresholds become the histogram's ``le`` buckets.
    """

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self._lock = threading.Lock()
        self._trackers: weakref.WeakValueDictionary[tuple[str, str], ReportsFigures] = (
            weakref.WeakValueDictionary()
        )
        if registry is not None:
            registry.register(self)

    def track(self, tracker: ReportsFigures, *, topic: str, subscription: str = "") -> None:
        """Reports ``tracker`` under the labels until it is garbage-collected or ``untrack``-ed."""
        with self._lock:
            self._trackers[(topic, subscription)] = tracker

    def untrack(self, *, topic: str, subscription: str = "") -> None:
        """Stops reporting the tracker registered under these labels."""
        with self._lock:
            self._trackers.pop((topic, subscription), None)

    def describe(self) -> Iterator[Metric]:
        """No fixed description: the families depend on which trackers are registered."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        """One family per metric name, a sample per registered tracker."""
        with self._lock:
            items = list(self._trackers.items())
        labels = ["topic", "subscription"]
        delayed = GaugeMetricFamily("pulsar_subscription_delayed", "Delayed messages tracked", labels=labels)
        size = GaugeMetricFamily(
            "pulsar_delayed_message_index_size_bytes", "Memory of the delayed index queues", labels=labels
        )
        total = GaugeMetricFamily(
            "pulsar_delayed_message_index_bucket_total", "Immutable buckets + the mutable one", labels=labels
        )
        loaded = GaugeMetricFamily(
            "pulsar_delayed_message_index_loaded", "Delayed indexes held in memory", labels=labels
        )
        snap = GaugeMetricFamily(
            "pulsar_delayed_message_index_bucket_snapshot_size_bytes",
            "Bytes of bucket snapshots",
            labels=labels,
        )
        ops = CounterMetricFamily(
            "pulsar_delayed_message_index_bucket_op_count",
            "Bucket snapshot operations",
            labels=[*labels, "state", "type"],
        )
        lat = HistogramMetricFamily(
            "pulsar_delayed_message_index_bucket_op_latency_ms",
            "Latency of bucket snapshot operations (ms)",
            labels=[*labels, "type"],
        )
        damaged = CounterMetricFamily(
            "cursorkit_delayed_index_damaged_buckets",
            "Buckets whose snapshot was found damaged or missing (messages replayed from the cursor)",
            labels=labels,
        )
        for (topic, sub), tracker in items:
            f = tracker.metric_figures()
            lv = [topic, sub]
            delayed.add_metric(lv, f.delayed_messages)
            size.add_metric(lv, f.buffer_memory_usage)
            if f.op_stats is None:
                continue
            total.add_metric(lv, f.bucket_total or 0)
            damaged.add_metric(lv, f.damaged_buckets)
            loaded.add_metric(lv, f.loaded_indexes or 0)
            snap.add_metric(lv, f.snapshot_size_bytes or 0)
            for op in OP_TYPES:
                for state in ("succeed", "failed", "all"):
                    ops.add_metric([*lv, state, op], f.op_stats.count(op, state))
                cumulative, total_ms = f.op_stats.latency(op)
                bounds = [*(str(b) for b in LATENCY_BOUNDS_MS), "+Inf"]
                lat.add_metric([*lv, op], list(zip(bounds, cumulative, strict=True)), total_ms)
        yield from (delayed, size, total, loaded, snap, ops, lat, damaged)
