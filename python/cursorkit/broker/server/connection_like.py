"""What a command handler uses of its connection: the connection implements it, handlers never import it.

The command modules (``lookup_commands.py``, ``producer_commands.py``, ``consumer_commands.py``)
name this protocol, so ``connection.py`` can use them without either importing the other.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cursorkit import Position
    from cursorkit.broker.server.consumer import Consumer
    from cursorkit.broker.server.services import BrokerServices
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic
    from cursorkit.broker.server.waiting_producer import Waiting
    from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["ConnectionLike"]


class ConnectionLike(Protocol):
    """One client connection, as its commands see it: its broker, its producers and consumers, its replies."""

    producers: dict[int, tuple[Topic, str]]
    """Producers by id: their topic and name."""
    consumers: dict[int, tuple[Subscription, Consumer, Topic]]
    """Consumers by id: their subscription, themselves and their topic."""
    waiting_producers: dict[int, Waiting]
    """Producers queued for exclusive access to their topic (WaitForExclusive)."""
    failed_producers: set[int]
    """Producers whose append failed: no more receipts until they are created again."""
    closed_producers: dict[int, None]
    """Producers the broker closed, whose SENDs still on the way are ignored."""
    address: str
    """``/host:port`` of the client (for the stats)."""
    client_version: str
    """The client's CONNECT ``client_version`` (for the stats)."""

    @property
    def broker(self) -> BrokerServices:
        """The broker, as a connection needs it."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (a command finishing later then leaves no trace)."""
        ...

    def __hash__(self) -> int:
        """By identity: a topic keys the producers it admits by their connection and id."""
        ...

    def send(self, frame: bytes) -> None:
        """Queues one frame for the client (dropped once the connection is closed)."""
        ...

    def writable(self) -> bool:
        """Whether the client has read enough of what was sent to be sent more."""
        ...

    def reply(self, cmd: api.BaseCommand) -> None:
        """Queues one command to the client."""
        ...

    def success(self, request_id: int) -> None:
        """Answers request ``request_id`` with SUCCESS."""
        ...

    def topic(self, text: str) -> Topic | Awaitable[Topic]:
        """The topic a command names: at once when open, else once loaded off the loop."""
        ...

    def take_load(self, what: str) -> None:
        """Counts opening a topic or a subscription against the load rates (past them: ServiceNotReady)."""
        ...

    def producer_closed(self, producer_id: int) -> None:
        """The broker closed ``producer_id``: SENDs still on their way are ignored."""
        ...

    def receipts(self, producer_id: int, sequence_ids: list[int], result: list[Position] | Exception) -> None:
        """The receipts of a group of SENDs once durable, or the error of a failed append."""
        ...
