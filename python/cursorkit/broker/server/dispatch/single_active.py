"""Exclusive and Failover: one active consumer receives everything (the others wait their turn).

The dispatcher knows only the active consumer. A Failover hand-over returns the old active
consumer's unacked messages, which the new one receives from the oldest on (Pulsar's rewind).
Delayed delivery does not apply (as in Pulsar); cumulative acks do.
"""

from __future__ import annotations

from cursorkit import Cursor, Position
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import encode_command
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.dispatch.model import Feed
from cursorkit.broker.server.dispatch.shared import SharedModel
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["SingleActive"]


class SingleActive(SharedModel):
    """Exclusive (one consumer) or Failover (the first by priority, then name, is active)."""

    def __init__(self, sub_type: int, *, name: str, cursor: Cursor) -> None:
        super().__init__(name=name, cursor=cursor, delayed=None)
        self.sub_type = sub_type
        self._active: Consumer | None = None
        """The consumer the dispatcher knows."""

    def add_consumer(self, consumer: Consumer, request: SubscribeRequest) -> None:
        """Adds a consumer (a second Exclusive one is refused); the active one may change."""
        if self.sub_type == api.CommandSubscribe.Exclusive and self.consumers:
            raise ProtocolError(
                f"exclusive subscription {self.name!r} already has a consumer", server_error=api.ConsumerBusy
            )
        self.consumers.append(consumer)
        if self.sub_type == api.CommandSubscribe.Failover:
            self.consumers.sort(key=lambda c: (c.priority, c.name))
        self._activate(announce=False)  # the connection announces after its SUCCESS

    def remove_consumer(self, consumer: Consumer) -> list[Position]:
        """Drops a consumer; when it was the active one, the next takes over its messages."""
        self.consumers.remove(consumer)
        return self._activate(announce=True)

    def _activate(self, *, announce: bool) -> list[Position]:
        """Registers the active consumer (the first); returns what the previous one held."""
        active = self.consumers[0] if self.consumers else None
        if active is self._active:
            return []
        returned: list[Position] = []
        if self._active is not None:
            returned = self.dispatcher.remove_consumer(self._active)
        self._active = active
        if active is not None:
            self.dispatcher.add_consumer(active, max(active.permits, 0))
            if announce and self.sub_type == api.CommandSubscribe.Failover:
                for c in self.consumers:
                    c.send(encode_command(commands.active_consumer_change(c.consumer_id, c is active)))
        return returned

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Permits count only for the active consumer (the others get them when they take over)."""
        if consumer is self._active:
            self.dispatcher.add_permits(consumer, permits)

    def ack_cumulative(self, positions: list[Position]) -> None:
        """Everything up to each position, as Pulsar allows on these types."""
        for position in positions:
            self.dispatcher.ack_cumulative(position)

    def held_by(self, consumer: Consumer) -> list[Position]:
        """What the active consumer holds; nothing for the others."""
        return self.dispatcher.held_by(consumer) if consumer is self._active else []

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> int:
        """Only the active consumer has anything to redeliver."""
        return super().redeliver(consumer, positions) if consumer is self._active else 0

    def dispatch(self, feed: Feed) -> bool:
        """Everything to the active consumer, unless its connection does not keep up."""
        self._pause_slow([self._active] if self._active is not None else [])
        self._rounds(feed, delays=False)
        return False
