"""The Python layer of the in-memory tracker: Pulsar's timer rule, metrics figures, context manager."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from cursorkit.delayed import DelayedDeliveryCollector, InMemoryDelayedDeliveryTracker
from manual_clock import Clock


def test_timer_delay_follows_pulsars_rule() -> None:
    clock = Clock(10_000)
    t = InMemoryDelayedDeliveryTracker(tick_time_ms=1000, clock=clock)
    assert t.timer_delay_ms() is None  # empty: no timer
    assert t.add_message(1, 0, 20_000)
    nxt = t.next_delivery_time()
    assert nxt is not None and nxt <= 20_000
    assert t.timer_delay_ms() == nxt - 10_000
    # a tick that ran just now holds the next run back by a whole tick when that is later
    clock.now = nxt - 10
    assert t.timer_delay_ms(last_tick_run=clock.now) == 1000
    clock.now = nxt
    assert t.timer_delay_ms() is None  # due: the dispatcher reads at once


def test_metrics_and_context_manager() -> None:
    registry = CollectorRegistry()
    collector = DelayedDeliveryCollector(registry)
    clock = Clock(0)
    with InMemoryDelayedDeliveryTracker(tick_time_ms=10, clock=clock) as t:
        collector.track(t, topic="t", subscription="s")
        for e in range(3):
            t.add_message(1, e, 5000)
        labels = {"topic": "t", "subscription": "s"}
        assert registry.get_sample_value("pulsar_subscription_delayed", labels) == 3
        size = registry.get_sample_value("pulsar_delayed_message_index_size_bytes", labels)
        assert size == t.buffer_memory_usage > 0
        assert registry.get_sample_value("pulsar_delayed_message_index_bucket_total", labels) is None
    assert t.closed
