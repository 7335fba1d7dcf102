"""Admin routes: a topic's stats, partitioned stats and internal stats, as Pulsar's REST v2 serves them.

A topic not open here but on disk (or a declared partition) is opened first, off the event loop,
as Pulsar loads a topic its stats are asked for; an unknown one is 404 ``Topic not found`` and
nothing is made for it. The figures are read on the loop in one pass (``figures.py``); the only
disk reads, the publish times ``?getEarliestTimeInBacklog=true`` asks for (one entry per
subscription with a backlog), run off it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from cursorkit import Position
from cursorkit.broker.server.admin.app_keys import broker_of
from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.admin.figures import TopicFigures, topic_figures
from cursorkit.broker.server.admin.stats_json import internal_stats, partitioned_stats, topic_stats
from cursorkit.broker.server.admin.topic_paths import PERSISTENT, topic_of
from cursorkit.broker.server.broker import Broker
from cursorkit.errors import CursorkitError

if TYPE_CHECKING:
    from cursorkit.broker.log import MessageLog
    from cursorkit.broker.server.names import TopicName
    from cursorkit.broker.server.topic import Topic

__all__ = ["find_topic", "routes"]

TOPIC_NOT_FOUND = "Topic not found"


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter as JAX-RS reads one: ``true`` in any case, anything else false."""
    value = request.query.get(name)
    return default if value is None else value.lower() == "true"


def _on_disk(root: Path, name: TopicName) -> bool:
    return (root / "topics" / name.directory / "log").is_dir()


async def find_topic(broker: Broker, name: TopicName) -> Topic | None:
    """The topic when it exists: open, or opened now off the loop (None: no such topic, nothing made).

    A topic exists once its log is on disk; a partition of a declared partitioned topic exists as
    Pulsar's do from their topic's creation. 503 when the broker cannot open it now (another
    broker may own it, or no room for another open topic).
    """
    try:
        topic = broker.open_topic(name)
        if topic is not None:
            return topic
        declared = name.partition is not None and name.partition < broker.partitions_of(name.base)
        if not declared and not await asyncio.to_thread(_on_disk, broker.root, name):
            return None
        return await broker.load_topic(name)
    except CursorkitError as e:
        raise RestError(503, f"Topic {name.full} cannot be opened here now: {e}") from e


async def _figures(request: web.Request, name: TopicName) -> tuple[Topic, TopicFigures]:
    topic = await find_topic(broker_of(request), name)
    if topic is None:
        raise RestError(404, TOPIC_NOT_FOUND)
    return topic, topic_figures(topic)


def _first_publish_times(log: MessageLog, marks: dict[str, Position]) -> dict[str, int]:
    """Off the loop: the publish time of the entry after each mark-delete (-1 when there is none)."""
    out: dict[str, int] = {}
    for name, md in marks.items():
        try:
            got = log.read_from(Position(md.ledger_id, md.entry_id + 1), 1, 1)
        except Exception:  # noqa: BLE001 - the topic closed meanwhile, or damage: no time to show
            got = []
        out[name] = got[0].publish_time_ms if got else -1
    return out


async def _with_publish_times(topic: Topic, t: TopicFigures) -> TopicFigures:
    marks = {s.name: s.mark_delete for s in t.subscriptions if s.msg_backlog > 0}
    times = await asyncio.to_thread(_first_publish_times, topic.log, marks) if marks else {}
    times.update({s.name: -1 for s in t.subscriptions if s.name not in times})
    return dataclasses.replace(t, earliest_publish_ms=times)


def _owner(request: web.Request) -> str:
    """``host:port`` of this admin server (Pulsar's ``ownerBroker``)."""
    sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
    port = sock[1] if isinstance(sock, tuple) and len(sock) >= 2 else 0
    return f"{broker_of(request).config.host}:{port}"


async def _stats_json(request: web.Request, name: TopicName) -> dict[str, object]:
    topic, t = await _figures(request, name)
    earliest = _flag(request, "getEarliestTimeInBacklog")
    if earliest:
        t = await _with_publish_times(topic, t)
    return topic_stats(
        t,
        owner=_owner(request),
        backlog_size=_flag(request, "subscriptionBacklogSize"),
        earliest=earliest,
    )


async def get_stats(request: web.Request) -> web.Response:
    """GET ``…/{topic}/stats``: Pulsar's ``TopicStats``."""
    return web.json_response(await _stats_json(request, topic_of(request)))


async def get_partitioned_stats(request: web.Request) -> web.Response:
    """GET ``…/{topic}/partitioned-stats``: the partitions' stats added up (``?perPartition``: true)."""
    broker = broker_of(request)
    name = topic_of(request)
    n = broker.partitions_of(name)
    if n == 0:
        raise RestError(404, f"Partitioned Topic {name.full} not found")
    parts = {}
    for i in range(n):
        partition = name.partition_name(i)
        parts[partition.full] = await _stats_json(request, partition)
    return web.json_response(partitioned_stats(parts, per_partition=_flag(request, "perPartition", True)))


async def get_internal_stats(request: web.Request) -> web.Response:
    """GET ``…/{topic}/internalStats``: Pulsar's ``PersistentTopicInternalStats`` (ledgers, cursors)."""
    topic, t = await _figures(request, topic_of(request))
    return web.json_response(internal_stats(topic, t))


def routes() -> list[web.RouteDef]:
    """This module's routes."""
    return [
        web.get(f"{PERSISTENT}/{{topic}}/stats", get_stats),
        web.get(f"{PERSISTENT}/{{topic}}/partitioned-stats", get_partitioned_stats),
        web.get(f"{PERSISTENT}/{{topic}}/internalStats", get_internal_stats),
    ]
