"""One consumer of a subscription, as the broker sees it: its connection, permits and whether it is paused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cursorkit.broker.server.meters import Meter, Peer

__all__ = ["Consumer"]


@dataclass(eq=False, slots=True)
class Consumer:
    """A subscribed consumer (hashable by identity, named as the client named it).

    ``permits`` counts messages, as the client's FLOW does. ``send`` writes one frame to the consumer's
    connection (never blocks; a slow reader's frames queue in its connection).
    """

    consumer_id: int
    name: str
    send: Callable[[bytes], None]
    writable: Callable[[], bool] = lambda: True
    """Whether the connection takes more now (a slow reader's unsent frames are bounded)."""
    priority: int = 0
    permits: int = 0
    """What the client asked for and was not yet sent (the dispatchers keep their own count)."""
    paused: bool = False
    """Whether the dispatcher was told to stop sending (the connection does not keep up)."""
    connected: bool = True
    peer: Peer = field(default_factory=Peer)
    """Its client, as the stats show it."""
    sent: Meter = field(default_factory=Meter)
    """What was sent to it (redeliveries too)."""
    redelivered: Meter = field(default_factory=Meter)
    """What it gave back to be sent again (nacks, redelivery requests)."""

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, id={self.consumer_id}, permits={self.permits})"
