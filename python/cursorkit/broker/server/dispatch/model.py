"""What every dispatch model offers its subscription, and what it needs from it (a :class:`Feed`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol

from cursorkit import Position
from cursorkit.ackstate import RaisedCounts
from cursorkit.broker.log import Read
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["SUB_TYPES", "CountOwner", "DispatchModel", "Feed"]

SUB_TYPES: dict[int, str] = {
    api.CommandSubscribe.Exclusive: "Exclusive",
    api.CommandSubscribe.Shared: "Shared",
    api.CommandSubscribe.Failover: "Failover",
    api.CommandSubscribe.Key_Shared: "Key_Shared",
}
"""Pulsar's names of the subscription types."""


class Feed(Protocol):
    """What a model needs of its subscription: the log's next entries, and frames sent to consumers."""

    read_batch: int

    def read(self, messages_wanted: int) -> Read:
        """Columns of the entries after the read position, for about ``messages_wanted`` messages."""
        ...

    def send(self, consumer: Consumer, positions: Sequence[Position], counts: Sequence[int]) -> None:
        """Sends a round's entries to one consumer."""
        ...


class CountOwner(Protocol):
    """A model's dispatcher: the one owner of the subscription's redelivery counts.

    It raises them (nacks, redelivery requests) and sends them; with its journal on, the
    subscription takes the raises for the durable store (``redeliveries.py``) and seeds a new
    dispatcher from that store.
    """

    def journal_redelivery_counts(self, on: bool = True) -> None:
        """Journals every raise; counts then outlive the last consumer."""
        ...

    def take_raised_counts(self) -> RaisedCounts:
        """The raises since the last call."""
        ...

    def seed_redelivery_counts(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Counts read back from the durable store."""
        ...

    def raise_redelivery_counts(self, positions: Sequence[Position]) -> None:
        """One more redelivery of each (a consumer lost holding them)."""
        ...


class DispatchModel(ABC):
    """One subscription type's dispatch: its consumers, their permits, acks, redeliveries, sends.

    Every method runs on the broker's event loop. A refused :meth:`add_consumer` changes nothing.
    """

    sub_type: int
    consumers: list[Consumer]
    dispatcher: CountOwner
    """The library dispatcher behind the model (the owner of the redelivery counts)."""
    kept_when_empty: bool = True
    """Whether the model serves the next consumers once its last one left (False: a new model is
    made, the old one having rewound reading to after mark-delete itself; see :meth:`take_rewind`)."""

    @property
    def type_name(self) -> str:
        """Pulsar's name of the type."""
        return SUB_TYPES.get(self.sub_type, "Exclusive")

    def fits(self, request: SubscribeRequest) -> bool:
        """Whether a consumer of ``request`` may join this model (else the subscription needs another)."""
        return request.sub_type == self.sub_type

    @abstractmethod
    def add_consumer(self, consumer: Consumer, request: SubscribeRequest) -> None:
        """Adds a consumer; ``ProtocolError`` (Pulsar's code) when it cannot join, changing nothing."""

    @abstractmethod
    def remove_consumer(self, consumer: Consumer) -> list[Position]:
        """Drops a consumer; returns what it held unacked (it goes to the others)."""

    def take_rewind(self) -> Position | None:
        """Where reading must start again (after a mark-delete) once the last consumer left, if anywhere."""
        return None

    @abstractmethod
    def flow(self, consumer: Consumer, permits: int) -> None:
        """The consumer may take ``permits`` more messages."""

    @abstractmethod
    def ack(self, consumer: Consumer, positions: list[Position]) -> None:
        """Individual acks of whole entries."""

    def ack_cumulative(self, positions: list[Position]) -> None:
        """Cumulative acks: refused, as Pulsar refuses them on Shared and Key_Shared."""
        raise ProtocolError(
            f"cumulative acks are not allowed on {self.type_name} subscriptions",
            server_error=api.NotAllowedError,
        )

    @abstractmethod
    def held_by(self, consumer: Consumer) -> list[Position]:
        """What the consumer holds unacked (what a redelivery request may take back)."""

    @abstractmethod
    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> int:
        """Takes back ``positions`` (all the consumer holds when None) to send again; how many went back."""

    @abstractmethod
    def reset(self) -> None:
        """A seek: everything read, queued or held is forgotten."""

    @abstractmethod
    def dispatch(self, feed: Feed) -> bool:
        """Sends what can be sent now; True when more is left to do soon (another dispatch)."""
