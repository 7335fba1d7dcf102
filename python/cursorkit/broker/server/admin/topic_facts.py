"""What the topic admin paths ask of a broker: whether a topic or namespace exists, its subscriptions.

Questions that need the disk are answered off the event loop. cursorkit keeps no namespace
registry: ``public/default`` always exists, and any other namespace once a topic is known in it
(made by a client or over REST, or found on disk at start). A partition of a partitioned topic
exists as soon as the partitioned topic does (Pulsar makes the partitions with it; this broker
makes each on first use).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.broker import Broker
from cursorkit.broker.server.names import TopicName
from cursorkit.broker.server.paths import listed_subscription
from cursorkit.errors import CursorkitError, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "DEFAULT_NAMESPACE",
    "exists",
    "local_only",
    "max_partition_index",
    "namespace_exists",
    "open_or_load",
    "refusal",
    "subscription_names",
    "subscriptions_by_topic",
    "turn",
]

log = logging.getLogger("cursorkit.broker.admin")

DEFAULT_NAMESPACE = ("public", "default")
"""The namespace that exists before any topic is made in it (as in a fresh Pulsar standalone)."""

_turns: weakref.WeakKeyDictionary[Broker, asyncio.Lock] = weakref.WeakKeyDictionary()
_STATUS: dict[int, int] = {api.ServiceNotReady: 503, api.TooManyRequests: 429, api.NotAllowedError: 412}
"""The HTTP status of a broker refusal met while serving a REST call (others: 500)."""


def turn(broker: Broker) -> asyncio.Lock:
    """Held by every topic admin change: each one's checks and its change are made together."""
    lock = _turns.get(broker)
    if lock is None:
        lock = _turns[broker] = asyncio.Lock()
    return lock


def local_only(broker: Broker) -> None:
    """501 when brokers share a metadata store: each keeps its own partitioned-topic table."""
    if broker.config.metadata:
        raise RestError(
            501,
            "topic administration is not served when brokers share a metadata store "
            "(each broker keeps its own table of partitioned topics)",
        )


def _directory(broker: Broker, name: TopicName) -> Path:
    return broker.namespace_topics.topics_dir / name.directory


async def exists(broker: Broker, name: TopicName) -> bool:
    """Whether the non-partitioned topic (or partition) ``name`` exists: open, declared, or on disk."""
    if name in broker.topics:
        return True
    index = name.partition
    if index is not None and index < broker.partitions_of(name.base):
        return True
    return await asyncio.to_thread(_directory(broker, name).is_dir)


def namespace_exists(broker: Broker, namespace: tuple[str, str]) -> bool:
    """Whether the namespace exists (call after the topics on disk were listed)."""
    return namespace == DEFAULT_NAMESPACE or broker.namespace_topics.has_namespace(namespace)


def max_partition_index(known: list[str], base: TopicName) -> int:
    """The highest ``N`` of a known ``<base>-partition-N`` topic (-1: none); blocking, run off the loop."""
    highest = -1
    prefix = f"{base.local}-partition-"
    for full in known:
        local = full.rpartition("/")[2]
        if local.startswith(prefix):
            index = TopicName(base.tenant, base.namespace, local).partition
            if index is not None:
                highest = max(highest, index)
    return highest


def _subscriptions_on_disk(directories: list[Path]) -> list[set[str]]:
    """The durable subscriptions kept in each topic directory; damaged entries are logged and skipped."""
    found: list[set[str]] = []
    for directory in directories:
        names: set[str] = set()
        found.append(names)
        try:
            entries = sorted(d for d in (directory / "subscriptions").iterdir() if (d / "cursor").is_dir())
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                names.add(listed_subscription(entry))
            except CursorkitError as e:
                log.warning("not listing %s as a subscription: %s", entry, e)
    return found


async def subscriptions_by_topic(broker: Broker, names: list[TopicName]) -> dict[TopicName, set[str]]:
    """Each topic's subscriptions: an open one's from memory, the others' from disk (one job off the loop)."""
    found = {name: set(topic.subscriptions) for name in names if (topic := broker.topics.get(name))}
    closed = [name for name in names if name not in found]
    if closed:
        on_disk = await asyncio.to_thread(_subscriptions_on_disk, [_directory(broker, n) for n in closed])
        found.update(zip(closed, on_disk, strict=True))
    return found


async def subscription_names(broker: Broker, names: list[TopicName]) -> list[str]:
    """The subscriptions of the topics, together, sorted."""
    return sorted(set().union(*(await subscriptions_by_topic(broker, names)).values()))


async def open_or_load(broker: Broker, name: TopicName) -> Topic:
    """The topic, opened off the loop when it is not open; a broker refusal as its HTTP status."""
    topic = broker.topics.get(name)
    if topic is not None:
        return topic
    try:
        return await broker.load_topic(name)
    except ProtocolError as e:
        raise refusal(e) from e


def refusal(e: ProtocolError) -> RestError:
    """A broker refusal (a full broker, a busy listing) as the REST error Pulsar's admin would answer."""
    code = e.server_error
    return RestError(500 if code is None else _STATUS.get(int(code), 500), str(e))
