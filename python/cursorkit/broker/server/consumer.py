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
    writable: Callable[[], bool] = lambda: True
    """Whether the connection takes more now (a slow reader's unsent frames are bounded)."""
    priority: int = 0
    permits: int = 0
    pending: dict[Position, int] = field(default_factory=dict)
    unacked: int = 0
    """Messages sent and not yet acknowledged (the sum of ``pending``)."""
    connected: bool = True

    def hold(self, position: Position, messages: int) -> None:
        """Records an entry sent to this consumer."""
        self.pending[position] = messages
        self.unacked += messages

    def release(self, position: Position) -> int:
        """Forgets an entry (acknowledged or sent back); returns its message count (0: not held)."""
        messages = self.pending.pop(position, 0)
        self.unacked -= messages
        return messages

    def release_all(self) -> list[Position]:
        """Forgets every entry held; returns them."""
        held = list(self.pending)
        self.pending.clear()
        self.unacked = 0
        return held

    def __repr__(self) -> str:
        held = len(self.pending)
        return f"Consumer({self.name!r}, id={self.consumer_id}, permits={self.permits}, pending={held})"
