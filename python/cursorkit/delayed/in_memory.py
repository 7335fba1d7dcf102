"""``InMemoryDelayedDeliveryTracker``: Pulsar's default delayed-delivery tracker, its queue in Rust.

Every per-message call (``add_message``, ``contains_message``) is inherited from the native
``InMemoryTrackerState``, so it is one call into Rust; this class adds the Python-side conveniences:
a timer delay for the dispatcher, metrics figures and a context manager.
"""

from __future__ import annotations

from types import TracebackType

from cursorkit._core import InMemoryTrackerState
from cursorkit.delayed.metrics import TrackerFigures


class InMemoryDelayedDeliveryTracker(InMemoryTrackerState):
    """Delayed indexes in one (deliver-at, ledger, entry) queue, with Pulsar's tick and fixed-delay rules.

    ``tick_time_ms`` (``delayedDeliveryTickTimeMillis``, 1000), ``strict``
    (``isDelayedDeliveryDeliverAtTimeStrict``, False), ``fixed_delay_lookahead``
    (``delayedDeliveryFixedDelayDetectionLookahead``, 50000; 0 disables), ``clock`` (ms; the system
    clock, read in Rust, when None). Deliver-at values are rounded to the tick's power-of-two
    precision (down, or up when strict), so nothing strict is ever early.
    """

    def timer_delay_ms(self, last_tick_run: int | None = None) -> int | None:
        """How long a dispatcher's timer should wait before reading again, or None for no timer.

        Pulsar's rule: ``max(next - now, last_tick_run + tick - now)``; no timer when the tracker is
        empty or a message is already due (the dispatcher reads at once).
        """
        nxt = self.next_delivery_time()
        if nxt is None:
            return None
        now = self.now()
        if nxt - now <= 0:
            return None
        delay = nxt - now
        if last_tick_run is not None:
            delay = max(delay, last_tick_run + self.tick_time_ms - now)
        return delay

    def metric_figures(self) -> TrackerFigures:
        """Figures for ``DelayedDeliveryCollector``."""
        return TrackerFigures(
            delayed_messages=self.number_of_delayed_messages, buffer_memory_usage=self.buffer_memory_usage
        )

    def __enter__(self) -> InMemoryDelayedDeliveryTracker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
