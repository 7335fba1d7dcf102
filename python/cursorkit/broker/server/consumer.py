"""One consumer of a subscription, as the broker sees it: its connection, permits and unacked messages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cursorkit._core import Position

__all__ = ["Consumer"]


@dataclass(eq=False, slots=True)
class Consumer:
    """A subscribed consumer (hashable by identity, named as the client named it).

    ``permits`` counts messages, as the client's FLOW does; ``pending`` maps each entry sent and
    not yet acknowledged to its message count. ``send`` writes one frame to the consumer's
    connection (never blocks; a slow reader's frames queue in its connection).
    """

    consumer_id: int
    name: str
    send: Callable[[bytes], None]
    priority: int = 0
    permits: int = 0
    pending: dict[Position, int] = field(default_factory=dict)
    connected: bool = True

    def __repr__(self) -> str:
        held = len(self.pending)
        return f"Consumer({self.name!r}, id={self.consumer_id}, permits={self.permits}, pending={held})"
