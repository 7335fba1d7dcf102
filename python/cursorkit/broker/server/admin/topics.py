"""Admin routes: topics — list, create and delete them, partitioned or not, their subscriptions, last id.

Pulsar's admin v2 paths, verbs, status codes and JSON (its 4.x behaviour where versions differ).
Every change is made under one lock per broker (its checks and its change together), its disk work
off the event loop; a refused request changes nothing. Partition counts take effect at once: the
next PARTITIONED_METADATA answers them (a client polls it, 60 s by default, to find new partitions).
When brokers share a metadata store the changes are refused with 501 (see ``topic_facts``).
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from cursorkit.broker.protocol.batches import last_index
from cursorkit.broker.server.admin.app_keys import broker_of
from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.admin.request_bodies import flag, partitions_body, properties_body
from cursorkit.broker.server.admin.topic_facts import (
    exists,
    local_only,
    max_partition_index,
    namespace_exists,
    open_or_load,
    refusal,
    subscription_names,
    subscriptions_by_topic,
    turn,
)
from cursorkit.broker.server.admin.topic_paths import PERSISTENT, namespace_of, topic_of
from cursorkit.broker.server.names import TopicName
from cursorkit.broker.server.partitioned_table import MAX_PARTITIONS
from cursorkit.errors import ProtocolError

__all__ = ["routes"]

_TOPIC = PERSISTENT + "/{topic}"
_BUSY = "Topic has active producers/subscriptions"
_MAX_LIST_BYTES = 256 * 1024 * 1024
"""The largest topic list answered (names of a namespace; past it 412, as a too-large topic list)."""


def routes() -> list[web.RouteDef]:
    """This module's routes (the namespace lists before the per-topic paths)."""
    return [
        web.get(PERSISTENT, list_topics),
        web.get(PERSISTENT + "/partitioned", list_partitioned),
        web.put(_TOPIC + "/partitions", create_partitioned),
        web.post(_TOPIC + "/partitions", update_partitions),
        web.get(_TOPIC + "/partitions", partitioned_metadata),
        web.delete(_TOPIC + "/partitions", delete_partitioned),
        web.get(_TOPIC + "/subscriptions", list_subscriptions),
        web.get(_TOPIC + "/lastMessageId", last_message_id),
        web.put(_TOPIC, create_topic),
        web.delete(_TOPIC, delete_topic),
    ]


def _no_content() -> web.Response:
    return web.Response(status=204)


async def _json(value: object) -> web.Response:
    """``value`` as a JSON answer, encoded off the loop (a namespace's names may be many)."""
    text = await asyncio.to_thread(json.dumps, value, ensure_ascii=False)
    return web.Response(text=text, content_type="application/json")


def _not_found(name: TopicName) -> RestError:
    return RestError(404, f"Topic {name.full} not found")


def _partitioned_topic_of(request: web.Request) -> TopicName:
    """The path's topic as a partitioned topic's name: 412 when it holds ``-partition-`` (as Pulsar)."""
    name = topic_of(request)
    if "-partition-" in name.local:
        raise RestError(412, "Partitioned Topic Name should not contain '-partition-'")
    return name


# -- namespaces -----------------------------------------------------------------------------------


async def list_topics(request: web.Request) -> web.StreamResponse:
    """GET a namespace: the full names of its topics, a partitioned topic's as its partitions."""
    broker = broker_of(request)
    namespace = namespace_of(request)
    try:
        listing = await broker.namespace_topics.answer(
            namespace, persistent=True, pattern=None, client_hash=None, max_bytes=_MAX_LIST_BYTES
        )
    except ProtocolError as e:
        raise refusal(e) from e
    if not namespace_exists(broker, namespace):
        raise RestError(404, "Namespace does not exist")
    return await _json(listing.topics)


async def list_partitioned(request: web.Request) -> web.StreamResponse:
    """GET a namespace's ``partitioned``: the full names of its partitioned topics."""
    broker = broker_of(request)
    tenant, ns = namespace_of(request)
    prefix = f"persistent://{tenant}/{ns}/"
    names = sorted(
        n for n in broker.partitioned.copy() if n.startswith(prefix) and "/" not in n[len(prefix) :]
    )
    if not names and not namespace_exists(broker, (tenant, ns)):
        raise RestError(404, "Namespace does not exist")
    return await _json(names)


# -- partitioned topics ---------------------------------------------------------------------------


async def create_partitioned(request: web.Request) -> web.StreamResponse:
    """PUT ``partitions``: a new partitioned topic (its clients see the count at their next lookup)."""
    broker = broker_of(request)
    local_only(broker)
    name = _partitioned_topic_of(request)
    partitions = await partitions_body(request)
    if partitions <= 0:
        raise RestError(406, "Number of partitions should be more than 0")
    if partitions > MAX_PARTITIONS:
        raise RestError(406, f"Number of partitions should be less than or equal to {MAX_PARTITIONS}")
    async with turn(broker):
        if broker.partitions_of(name) > 0 or await exists(broker, name):
            raise RestError(409, "This topic already exists")
        known = broker.namespace_topics.known(name.namespace_key)
        highest = await asyncio.to_thread(max_partition_index, known, name)
        if highest >= partitions:
            raise RestError(
                409,
                f"The topic has a max partition index of {highest}, the number of partitions must be "
                f"at least {highest + 1}",
            )
        await broker.update_partitions(name, partitions)
    return _no_content()


async def update_partitions(request: web.Request) -> web.StreamResponse:
    """POST ``partitions``: more partitions (the new ones get partition 0's durable subscriptions)."""
    broker = broker_of(request)
    local_only(broker)
    name = _partitioned_topic_of(request)
    partitions = await partitions_body(request)
    async with turn(broker):
        current = broker.partitions_of(name)
        if current <= 0:
            raise RestError(409, f"Topic {name.full} is not the partitioned topic.")
        if partitions < current:
            raise RestError(
                422, f"Expect partitions {partitions} can't less than current partitions {current}."
            )
        if partitions > MAX_PARTITIONS:
            raise RestError(
                422,
                f"Expect partitions {partitions} grater than maximum partitions per topic {MAX_PARTITIONS}",
            )
        if partitions > current:
            await broker.update_partitions(name, partitions)
        await _copy_subscriptions(request, name, partitions)
    return _no_content()


async def _copy_subscriptions(request: web.Request, name: TopicName, partitions: int) -> None:
    """Partition 0's durable subscriptions made on every partition lacking them, at the earliest entry.

    As Pulsar does: a consumer that finds a new partition later reads it from its start, so what
    producers sent there first is not skipped.
    """
    broker = broker_of(request)
    members = [name.partition_name(i) for i in range(partitions)]
    held = await subscriptions_by_topic(broker, members)
    first = broker.topics.get(members[0])
    subs = (
        sorted(s.name for s in first.subscriptions.values() if s.is_durable)
        if first
        else sorted(held[members[0]])
    )
    for partition in members[1:]:
        missing = [s for s in subs if s not in held[partition]]
        if not missing:
            continue
        topic = await open_or_load(broker, partition)
        for sub in missing:
            try:
                await topic.add_subscription(sub, 0, earliest=True)
            except ProtocolError as e:
                raise refusal(e) from e


async def partitioned_metadata(request: web.Request) -> web.StreamResponse:
    """GET ``partitions``: ``{"partitions": N}``, 0 for a non-partitioned topic; 404 for none at all.

    With ``checkAllowAutoCreation=true`` a missing topic answers 0 (a client would create it so).
    """
    broker = broker_of(request)
    name = topic_of(request)
    partitions = broker.partitions_of(name)
    if partitions == 0 and not flag(request, "checkAllowAutoCreation") and not await exists(broker, name):
        raise _not_found(name)
    return await _json({"partitions": partitions, "deleted": False})


async def delete_partitioned(request: web.Request) -> web.StreamResponse:
    """DELETE ``partitions``: the topic and every partition; 412 with clients unless ``force=true``."""
    broker = broker_of(request)
    local_only(broker)
    name = _partitioned_topic_of(request)
    force = flag(request, "force")
    async with turn(broker):
        partitions = broker.partitions_of(name)
        if partitions == 0:
            if await exists(broker, name):
                raise RestError(
                    409,
                    f"{name.full} is a non-partitioned topic. Instead of calling "
                    "delete-partitioned-topic please call delete.",
                )
            raise RestError(404, f"Topic {name.full} not found.")
        members = [name.partition_name(i) for i in range(partitions)]
        if not await broker.delete_topics(members, force=force):
            raise RestError(412, _BUSY)
        await broker.update_partitions(name, None)
    return _no_content()


# -- non-partitioned topics -----------------------------------------------------------------------


async def create_topic(request: web.Request) -> web.StreamResponse:
    """PUT a topic: a new non-partitioned topic (409 when it, or a partitioned one of its name, exists)."""
    broker = broker_of(request)
    local_only(broker)
    name = topic_of(request)
    await properties_body(request)
    async with turn(broker):
        index = name.partition
        if index is not None:
            base = broker.partitions_of(name.base)
            if base == 0:
                raise RestError(
                    412,
                    f'Can\'t create topic {name.full} with "-partition-" followed by a number: there is '
                    "no partitioned topic of that name",
                )
            if index >= base:
                raise RestError(
                    412,
                    f"Can't create topic {name.full}: its partitioned topic has {base} partitions",
                )
        if broker.partitions_of(name) > 0 or await exists(broker, name):
            raise RestError(409, "This topic already exists")
        await open_or_load(broker, name)
    return _no_content()


async def delete_topic(request: web.Request) -> web.StreamResponse:
    """DELETE a topic: its log and subscriptions; 412 with clients unless ``force=true``."""
    broker = broker_of(request)
    local_only(broker)
    name = topic_of(request)
    force = flag(request, "force")
    async with turn(broker):
        if broker.partitions_of(name) > 0:
            raise RestError(
                409,
                f"{name.full} is a partitioned topic. Instead of calling delete please call "
                "delete-partitioned-topic.",
            )
        if not await exists(broker, name):
            raise _not_found(name)
        if not await broker.delete_topics([name], force=force):
            raise RestError(412, _BUSY)
    return _no_content()


# -- per topic ------------------------------------------------------------------------------------


async def list_subscriptions(request: web.Request) -> web.StreamResponse:
    """GET ``subscriptions``: their names (a partitioned topic's: over all its partitions)."""
    broker = broker_of(request)
    name = topic_of(request)
    partitions = broker.partitions_of(name)
    if partitions:
        members = [name.partition_name(i) for i in range(partitions)]
    elif await exists(broker, name):
        members = [name]
    else:
        raise _not_found(name)
    return await _json(await subscription_names(broker, members))


async def last_message_id(request: web.Request) -> web.StreamResponse:
    """GET ``lastMessageId``: the topic's last entry as Pulsar's message id JSON.

    ``batchIndex`` names the last message of a batch of several (as GET_LAST_MESSAGE_ID does).
    A partitioned topic has no last entry of its own: ask a partition.
    """
    broker = broker_of(request)
    name = topic_of(request)
    if broker.partitions_of(name) > 0:
        raise RestError(404, f"Topic {name.full} not found: it is partitioned, ask one of its partitions")
    if not await exists(broker, name):
        raise _not_found(name)
    if name not in broker.topics:
        local_only(broker)
    topic = await open_or_load(broker, name)
    last = topic.log.last_position
    answer: dict[str, int] = {
        "ledgerId": last.ledger_id,
        "entryId": last.entry_id,
        "partitionIndex": topic.partition,
    }
    if last.entry_id >= 0:
        index = last_index((await asyncio.to_thread(topic.log.read, last)).data)
        if index is not None and index > 0:
            answer["batchIndex"] = index
    return await _json(answer)
