"""The topics an admin subscription request acts on: the topic itself, or each partition of it.

A partitioned topic's operations go to every partition, as Pulsar's admin sends them on to each.
A topic is found when it is open or on disk (never created by looking), and opened off the loop;
only creating a subscription makes a topic that does not exist (Pulsar's auto topic creation).
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.names import TopicName
from cursorkit.broker.server.paths import segment_component
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.broker import Broker
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "SUBSCRIPTION_NOT_FOUND",
    "TOPIC_NOT_FOUND",
    "open_topics",
    "partitions",
    "rest_error",
    "subscriptions_of",
]

TOPIC_NOT_FOUND = "Topic not found"
SUBSCRIPTION_NOT_FOUND = "Subscription not found"

_STATUS: dict[int, int] = {
    api.ServiceNotReady: 503,
    api.TooManyRequests: 429,
    api.NotAllowedError: 412,
    api.ProducerBusy: 412,
    api.ConsumerBusy: 412,
}
"""The HTTP status of a broker refusal met while serving an admin request."""


def rest_error(e: ProtocolError) -> RestError:
    """A broker refusal (too many topics, another owner...) as the admin answer for it."""
    return RestError(_STATUS.get(e.server_error or 0, 500), str(e))


def partitions(broker: Broker, name: TopicName) -> list[TopicName]:
    """The partitions of a partitioned topic, in order; ``[name]`` for any other topic."""
    n = broker.partitions_of(name)
    return [name.partition_name(i) for i in range(n)] if n else [name]


def _on_disk(root: Path, name: TopicName) -> bool:
    """Whether the topic's log directory exists (a disk read: off the loop)."""
    directory = root / "topics"
    for segment in name.segments:
        directory = directory / segment_component(segment)
    return (directory / "log").is_dir()


async def _open(broker: Broker, name: TopicName, *, create: bool) -> Topic | None:
    """The topic, opened off the loop when it is not open; None when it does not exist and not ``create``."""
    topic = broker.topics.get(name)
    if topic is not None:
        return topic
    if not create and not await asyncio.to_thread(_on_disk, broker.root, name):
        return None
    try:
        found = broker.lookup(name)
        where = await found if inspect.isawaitable(found) else found
        if where.redirect:
            raise RestError(503, f"{name.full} is served by another broker: {where.url}")
        return await broker.load_topic(name)
    except ProtocolError as e:
        raise rest_error(e) from e
    except BlockingIOError as e:
        raise RestError(503, f"{name.full} is open in another broker: retry") from e


async def open_topics(broker: Broker, name: TopicName, *, create: bool = False) -> list[Topic]:
    """The topic, or each partition of a partitioned one; 404 when one does not exist (unless ``create``)."""
    names = partitions(broker, name)
    opened = await asyncio.gather(*(_open(broker, n, create=create) for n in names))
    topics = [t for t in opened if t is not None]
    if len(topics) < len(names):
        raise RestError(404, TOPIC_NOT_FOUND)
    return topics


async def subscriptions_of(
    broker: Broker, name: TopicName, sub_name: str
) -> list[tuple[Topic, Subscription]]:
    """The subscription on the topic, or on each partition; 404 when a topic or one of them is missing.

    Nothing is changed before every one is found: a refused request leaves no trace.
    """
    found = []
    for topic in await open_topics(broker, name):
        sub = topic.subscriptions.get(sub_name)
        if sub is None:
            raise RestError(404, SUBSCRIPTION_NOT_FOUND)
        found.append((topic, sub))
    return found
