"""Admin routes of one subscription: create, delete, skip, clear backlog, expire, reset the cursor.

Pulsar's v2 paths under ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{sub}``,
their verbs and status codes; every success is a 204 once the cursor is durable (written off the
loop). On a partitioned topic, create, delete, skip-all, expiry and reset-by-time go to every
partition; skip and reset-to-a-message-id are refused (405), as in Pulsar. A refused request
changes nothing: everything is checked and found before the first cursor moves. How the cursor
moves is :mod:`.cursor_moves`; which topics, :mod:`.topic_targets`; numbers and ids,
:mod:`.message_ids`.

Decisions where Pulsar leaves room: creating a subscription creates its topic when missing (the
broker creates topics on first use, as Pulsar's auto topic creation); a negative count to skip or
age to expire is refused with 412 (Pulsar checks neither); a reset to a message id with no body is
a 400 (Pulsar fails with 500); subscription ``properties`` in a body are accepted and not kept.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from cursorkit import Position
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import encode_command
from cursorkit.broker.server.admin import cursor_moves
from cursorkit.broker.server.admin.app_keys import broker_of
from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.admin.message_ids import (
    CursorTarget,
    after_batch_indexes,
    next_valid,
    path_number,
    read_target,
    target_position,
)
from cursorkit.broker.server.admin.topic_paths import PERSISTENT, subscription_of, topic_of
from cursorkit.broker.server.admin.topic_targets import (
    SUBSCRIPTION_NOT_FOUND,
    open_topics,
    rest_error,
    subscriptions_of,
)
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = ["SUBSCRIPTION", "routes"]

SUBSCRIPTION = PERSISTENT + "/{topic}/subscription/{subscription}"
"""One subscription's path."""

_EXISTS = "Subscription already exists for topic"
_BUSY = "Subscription has active connected consumers"
_NO_PARTITIONED_SKIP = "Skip messages on a partitioned topic is not allowed"
_NO_PARTITIONED_RESET = "Reset-cursor at position is not allowed for partitioned-topic"


def routes() -> list[web.RouteDef]:
    """This module's routes."""
    return [
        web.put(SUBSCRIPTION, create_subscription),
        web.delete(SUBSCRIPTION, delete_subscription),
        web.post(SUBSCRIPTION + "/skip_all", skip_all),
        web.post(SUBSCRIPTION + "/skip/{count}", skip),
        web.post(SUBSCRIPTION + "/expireMessages/{seconds}", expire_messages),
        web.post(SUBSCRIPTION + "/expireMessages", expire_to_message),
        web.post(SUBSCRIPTION + "/resetcursor/{timestamp}", reset_cursor_to_time),
        web.post(SUBSCRIPTION + "/resetcursor", reset_cursor_to_message),
    ]


def _done() -> web.Response:
    """Pulsar's answer to a successful operation: 204, no body."""
    return web.Response(status=204)


async def create_subscription(request: web.Request) -> web.Response:
    """PUT: a durable subscription at the end of the topic, or at the message id of the body.

    On a partitioned topic it is made on every partition that lacks it; 409 when none does.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    target = await read_target(request)
    topics = await open_topics(broker, name, create=True)
    missing = [t for t in topics if sub_name not in t.subscriptions]
    if not missing:
        raise RestError(409, _EXISTS)
    made: list[Subscription] = []
    for topic in missing:
        try:
            sub = await topic.add_subscription(sub_name, api.CommandSubscribe.Exclusive, earliest=False)
        except ProtocolError as e:
            raise rest_error(e) from e
        if target is not None:  # as Pulsar: made at the end, then reset to the id
            cursor_moves.reset(broker, sub, target_position(topic.log, target.ledger_id, target.entry_id))
        made.append(sub)
    await cursor_moves.made_durable(made)
    return _done()


async def delete_subscription(request: web.Request) -> web.Response:
    """DELETE: the subscription and its files; with ``?force=true`` its consumers are closed first.

    Without force, 412 while a consumer is connected (on any partition). Its consumers are told
    once its files are gone, so the ones that come back make it anew.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    force = request.query.get("force", "false").lower() == "true"  # Java's Boolean.valueOf
    found = await subscriptions_of(broker, name, sub_name)
    if not force and any(sub.consumers for _, sub in found):
        raise RestError(412, _BUSY)
    for topic, sub in found:
        if topic.subscriptions.get(sub_name) is sub:
            await topic.remove_subscription(sub_name)
        for c in list(sub.consumers):
            c.send(_close(c.consumer_id))
        broker.reconnect_consumers(sub)
    return _done()


def _close(consumer_id: int) -> bytes:
    """CLOSE_CONSUMER: the client subscribes again (after a new lookup)."""
    return encode_command(commands.close_consumer(consumer_id, 0))


async def skip(request: web.Request) -> web.Response:
    """POST skip/{count}: the next ``count`` unacknowledged entries are acknowledged.

    405 on a partitioned topic; ``count`` past the backlog clears it. Consumers stay connected.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    count = path_number(request, "count", bits=32)
    if broker.partitions_of(name):
        raise RestError(405, _NO_PARTITIONED_SKIP)
    if count < 0:
        raise RestError(412, f"Invalid number of messages to skip: {count} (0 or more)")
    found = await subscriptions_of(broker, name, sub_name)
    for topic, sub in found:
        cursor_moves.skip(sub, count)
        topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    return _done()


async def skip_all(request: web.Request) -> web.Response:
    """POST skip_all: the backlog is cleared (mark-delete at the last entry), on every partition."""
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    found = await subscriptions_of(broker, name, sub_name)
    for topic, sub in found:
        cursor_moves.clear_backlog(sub)
        topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    return _done()


async def expire_messages(request: web.Request) -> web.Response:
    """POST expireMessages/{seconds}: mark-delete up to the last entry published over ``seconds`` ago.

    409 as in Pulsar when a subscription has no backlog, or has consumers and is almost caught up
    (under 1000 entries, its oldest not expired); on a partitioned topic the others still expire.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    seconds = path_number(request, "seconds", bits=32)
    if seconds < 0:
        raise RestError(412, f"Invalid expiry time: {seconds} seconds (0 or more)")
    found = await subscriptions_of(broker, name, sub_name)
    refused = []
    for topic, sub in found:
        now = topic.clock()
        if cursor_moves.expiry_refused(sub, topic.log, seconds, now):
            refused.append(topic.name.full)
        elif cursor_moves.expire(sub, topic.log, seconds, now):
            topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    if refused:
        raise RestError(
            409,
            f"Expire message by timestamp not issued on topic {refused[0]} for subscription {sub_name}: "
            "it has no backlog, or its consumers have almost caught up (other partitions may have expired)",
        )
    return _done()


async def expire_to_message(request: web.Request) -> web.Response:
    """POST expireMessages with a ``ResetCursorData`` body: mark-delete up to that message.

    Through it, or up to the entry before it when ``isExcluded``; a mark-delete already past it
    stays. 405 on a partitioned topic, as in Pulsar; consumers stay connected.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    target = await read_target(request)
    if broker.partitions_of(name):
        raise RestError(405, "Expire message at position is not supported for partitioned-topic")
    if target is None:
        raise RestError(400, "a message id is required (ledgerId, entryId)")
    found = await subscriptions_of(broker, name, sub_name)
    for topic, sub in found:
        if cursor_moves.expire_to(
            sub,
            topic.log,
            target_position(topic.log, target.ledger_id, target.entry_id),
            excluded=target.excluded,
        ):
            topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    return _done()


async def reset_cursor_to_time(request: web.Request) -> web.Response:
    """POST resetcursor/{timestamp}: the first entry published at or after the time is delivered next.

    Before every entry: from the first; after every one: nothing left. Every partition of a
    partitioned topic; consumers are closed and come back from there.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    timestamp = path_number(request, "timestamp", bits=64)
    found = await subscriptions_of(broker, name, sub_name)
    for topic, sub in found:
        cursor_moves.reset(broker, sub, topic.log.find_by_time(timestamp))
        topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    return _done()


async def reset_cursor_to_message(request: web.Request) -> web.Response:
    """POST resetcursor with a ``ResetCursorData`` body: the subscription restarts at that message.

    ``isExcluded``: after it; ``batchIndex``: inside its batch (the indexes before it, or through
    it when excluded, count as acknowledged). 405 on a partitioned topic.
    """
    broker = broker_of(request)
    name, sub_name = topic_of(request), subscription_of(request)
    target = await read_target(request)
    if broker.partitions_of(name):
        raise RestError(405, _NO_PARTITIONED_RESET)
    if target is None:
        raise RestError(400, "a message id is required (ledgerId, entryId)")
    found = await subscriptions_of(broker, name, sub_name)
    for topic, sub in found:
        position, batch = await _reset_point(topic, target)
        if topic.subscriptions.get(sub_name) is not sub:  # deleted while its batch was read
            raise RestError(404, SUBSCRIPTION_NOT_FOUND)
        cursor_moves.reset(broker, sub, position, batch)
        topic.dispatch()
    await cursor_moves.made_durable([sub for _, sub in found])
    return _done()


async def _reset_point(topic: Topic, target: CursorTarget) -> tuple[Position, tuple[list[int], int] | None]:
    """Where a reset to ``target`` goes: a position, and the batch indexes acknowledged in it.

    As Pulsar computes it: with a batch index, the entry's batch size is read (off the loop) and
    the indexes before it (through it when excluded) are acknowledged, or the next entry when
    that leaves none; without one, the entry, or the next when excluded. An id the log does not
    hold goes to the next entry it holds; the ends (earliest, latest) ignore the rest.
    """
    log = topic.log
    position = target_position(log, target.ledger_id, target.entry_id)
    exact = (position.ledger_id, position.entry_id) == (target.ledger_id, target.entry_id)
    if not exact or not target.excluded and target.batch_index <= 0:
        return position, None
    if target.batch_index < 0:  # excluded, no batch: the entry after it
        return next_valid(log, Position(position.ledger_id, position.entry_id + 1)), None
    size = await asyncio.to_thread(_batch_size, topic, position)
    acked = target.batch_index + 1 if target.excluded else target.batch_index
    if acked >= size:
        return next_valid(log, Position(position.ledger_id, position.entry_id + 1)), None
    return position, (after_batch_indexes(size, acked), size)


def _batch_size(topic: Topic, position: Position) -> int:
    """The message count of the entry at ``position`` (1 when it cannot be read: as a lone message)."""
    try:
        return max(1, topic.log.read(position).num_messages)
    except Exception:  # noqa: BLE001 - trimmed meanwhile: Pulsar falls back to the entry alone
        return 1
