"""What a connection asks of its broker: the broker implements it, and connections never import the broker."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cursorkit.broker.server.config import BrokerConfig
    from cursorkit.broker.server.limits import Buffers, TokenBucket, Warnings
    from cursorkit.broker.server.names import TopicName
    from cursorkit.broker.server.namespace_topics import NamespaceTopics
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = ["BrokerServices", "Lookup"]


@dataclass(frozen=True, slots=True)
class Lookup:
    """A LOOKUP's answer: connect to ``url`` (the topic is served there), or ask ``url`` (its owner) again."""

    url: str
    redirect: bool = False


class BrokerServices(Protocol):
    """Topics, names and settings, as a connection needs them."""

    @property
    def config(self) -> BrokerConfig:
        """The broker's settings."""
        ...

    @property
    def service_url(self) -> str:
        """The ``pulsar://`` URL lookups answer with."""
        ...

    @property
    def buffers(self) -> Buffers:
        """The bytes of unfinished frames over all connections."""
        ...

    @property
    def warnings(self) -> Warnings:
        """The broker's rate-limited log lines about clients past a limit."""
        ...

    @property
    def namespace_topics(self) -> NamespaceTopics:
        """The topics known per namespace, and the topic lists answered from them."""
        ...

    @property
    def topic_loads(self) -> TokenBucket:
        """New topics over all connections."""
        ...

    def open_topic(self, name: TopicName) -> Topic | None:
        """The topic when open here, else None; ServiceNotReady when this broker does not own it."""
        ...

    def make_room(self) -> None:
        """Closes idle topics when topics or descriptors run short; ServiceNotReady when none is idle."""
        ...

    def load_topic(self, name: TopicName) -> Awaitable[Topic]:
        """Opens or creates the topic off the event loop."""
        ...

    def lookup(self, name: TopicName) -> Lookup | Awaitable[Lookup]:
        """Where the client finds the topic (at once, or once this broker has claimed and opened it)."""
        ...

    def partitions_of(self, name: TopicName) -> int:
        """The topic's partition count (0: not partitioned)."""
        ...

    def producer_name(self) -> str:
        """A fresh broker-assigned producer name."""
        ...

    def reconnect_consumers(self, subscription: Subscription) -> None:
        """Detaches every consumer of ``subscription`` from its connection (after a seek)."""
        ...
