"""Shared: every consumer takes turns over its permits, redeliveries first (``SharedDispatcher``)."""

from __future__ import annotations

from cursorkit import Cursor, Position
from cursorkit.broker.protocol.hot_frames import entry_fields
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.delayed_trackers import DelayedTracker
from cursorkit.broker.server.dispatch.model import DispatchModel, Feed
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.proto import pulsar_api_pb2 as api
from cursorkit.shared import SharedDispatcher

__all__ = ["MAX_UNACKED_PER_CONSUMER", "SharedModel"]

MAX_UNACKED_PER_CONSUMER = 50_000
"""Pulsar's ``maxUnackedMessagesPerConsumer``: a consumer holding this many gets no more until it acks."""


class SharedModel(DispatchModel):
    """Shared: round-robin turns over the consumers' permits; delayed messages wait in the tracker."""

    sub_type: int = api.CommandSubscribe.Shared
    dispatcher: SharedDispatcher

    def __init__(self, *, name: str, cursor: Cursor, delayed: DelayedTracker | None) -> None:
        self.name = name
        self.consumers: list[Consumer] = []
        self.dispatcher = SharedDispatcher(
            cursor=cursor, delayed=delayed, max_unacked_per_consumer=MAX_UNACKED_PER_CONSUMER
        )

    def add_consumer(self, consumer: Consumer, request: SubscribeRequest) -> None:
        """Registers the consumer for round-robin turns (no permits yet)."""
        self.dispatcher.add_consumer(consumer, 0, priority=consumer.priority)
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> list[Position]:
        """Drops the consumer; what it held goes back to the queue, for the others."""
        self.consumers.remove(consumer)
        return self.dispatcher.remove_consumer(consumer)

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Adds permits to the consumer's turns."""
        self.dispatcher.add_permits(consumer, permits)

    def ack(self, consumer: Consumer, positions: list[Position]) -> None:
        """Individual acks (any consumer may ack any message, as Pulsar allows)."""
        self.dispatcher.ack(positions)

    def held_by(self, consumer: Consumer) -> list[Position]:
        """What the dispatcher sent the consumer and it has not acked."""
        return self.dispatcher.held_by(consumer)

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> int:
        """A nack of ``positions``, or every message the consumer holds (counted as redeliveries)."""
        if positions is None:
            return self.dispatcher.redeliver_all(consumer)
        return self.dispatcher.nack(consumer, positions)

    def reset(self) -> None:
        """Forgets the queue and what consumers hold (a seek)."""
        self.dispatcher.reset()

    def _pause_slow(self, dispatching: list[Consumer]) -> None:
        """A consumer whose connection does not keep up gets nothing until it drains."""
        for c in dispatching:
            paused = not c.writable()
            if paused != c.paused:
                c.paused = paused
                self.dispatcher.set_paused(c, paused)

    def dispatch(self, feed: Feed) -> bool:
        """Rounds of sends and reads; slow connections are paused first."""
        self._pause_slow(self.consumers)
        self._rounds(feed, delays=True)
        return False

    def _rounds(self, feed: Feed, *, delays: bool) -> None:
        """Sends, then reads for the permits left, until a read brings nothing."""
        shared = self.dispatcher
        while True:
            for consumer, positions, counts in shared.dispatch():
                feed.send(consumer, positions, counts)
            n = shared.entries_to_read(feed.read_batch * 1000)  # messages: the feed makes them entries
            got = feed.read(n) if n else None
            if not got:
                return
            due = entry_fields(got.datas)[0] if delays else None  # one call per read
            if due is not None and not any(due):
                due = None
            shared.add_read(got.positions, got.counts, due)
