"""The consumer commands of a connection: subscribe, flow, ack, redeliver, close, unsubscribe, seek.

Each takes the connection it came on, the command and its payload (none), as the connection's
command table calls it; what a connection holds (its consumers, its replies) stays in
``connection.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from cursorkit import Position
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import Payload, encode_command
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.names import subscription_name
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection import Connection
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "ack",
    "close_consumer",
    "consumer_of",
    "flow",
    "get_last_message_id",
    "redeliver",
    "seek",
    "subscribe",
    "unsubscribe",
]


def subscribe(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None] | None:
    """SUBSCRIBE: a consumer joins the topic's subscription (made on first use).

    A topic that is not open, or a subscription that does not exist yet, is opened or made off
    the loop (counted against the connection's and the broker's load rates); the connection's later
    commands wait. A name Pulsar refuses is refused before anything is made for it.
    """
    q = cmd.subscribe
    if q.consumer_id in conn.consumers:
        raise ProtocolError(
            f"consumer id {q.consumer_id} is in use on this connection", server_error=api.ConsumerBusy
        )
    name = subscription_name(q.subscription)  # Pulsar's naming rules, before anything is made for it
    found = conn.topic(q.topic)
    if inspect.isawaitable(found) or name not in found.subscriptions:
        return _subscribe_later(conn, q, name, found)
    _subscribe(conn, q, name, found)
    return None


async def _subscribe_later(
    conn: Connection, q: api.CommandSubscribe, name: str, found: Topic | Awaitable[Topic]
) -> None:
    loaded = inspect.isawaitable(found)
    topic = await found if inspect.isawaitable(found) else found
    if name not in topic.subscriptions:
        if not loaded:  # a new topic's first subscription comes with its load
            conn.take_load(f"subscription {name!r}")
            conn.broker.make_room()
        earliest = q.HasField("initialPosition") and q.initialPosition == api.CommandSubscribe.Earliest
        await topic.add_subscription(name, q.subType, earliest=earliest)
    if not conn.closed:
        _subscribe(conn, q, name, topic)


def _subscribe(conn: Connection, q: api.CommandSubscribe, name: str, topic: Topic) -> None:
    sub = topic.subscriptions.get(name)
    if sub is None:  # unsubscribed by another consumer while it was being made
        raise ProtocolError(
            f"subscription {name!r} was just deleted: retry", server_error=api.ServiceNotReady
        )
    limit = conn.broker.config.max_consumers_per_subscription
    if limit and len(sub.consumers) >= limit:
        raise ProtocolError(
            f"subscription {name!r} reached its maximum of {limit} consumers", server_error=api.ConsumerBusy
        )
    consumer = Consumer(
        q.consumer_id,
        q.consumer_name or f"consumer-{q.consumer_id}",
        conn.send,
        conn.writable,
        priority=q.priority_level,
    )
    sub.add_consumer(consumer, q.subType, q.keySharedMeta if q.HasField("keySharedMeta") else None)
    conn.consumers[q.consumer_id] = (sub, consumer, topic)
    conn.success(q.request_id)
    if q.subType == api.CommandSubscribe.Failover:
        for c in sub.consumers:
            c.send(encode_command(commands.active_consumer_change(c.consumer_id, c is sub.consumers[0])))


def consumer_of(conn: Connection, consumer_id: int) -> tuple[Subscription, Consumer, Topic]:
    """The subscription, consumer and topic of a consumer id (``ConsumerNotFound`` when unknown)."""
    found = conn.consumers.get(consumer_id)
    if found is None:
        raise ProtocolError(
            f"consumer {consumer_id} was never subscribed here", server_error=api.ConsumerNotFound
        )
    return found


def flow(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """FLOW: permits for more messages (a flow racing a close is dropped)."""
    q = cmd.flow
    found = conn.consumers.get(q.consumer_id)
    if found is None:
        return  # a flow racing a close: nothing to give permits to
    sub, consumer, topic = found
    sub.flow(consumer, q.messagePermits)
    topic.dispatch()


def ack(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """An ACK the scanner left whole (batch indexes, a request id...).

    One with a request id (a client with ack receipts on) gets ACK_RESPONSE once applied.
    """
    q = cmd.ack
    found = conn.consumers.get(q.consumer_id)
    if found is None:
        # acks of a closed consumer: the subscription redelivers what they named
        if q.HasField("request_id"):
            message = f"consumer {q.consumer_id} is not subscribed here"
            conn.reply(
                commands.ack_response(
                    q.consumer_id, q.request_id, server_error=api.ConsumerNotFound, message=message
                )
            )
        return
    sub, consumer, topic = found
    sub.ack(consumer, q)
    if q.HasField("request_id"):
        conn.reply(commands.ack_response(q.consumer_id, q.request_id))
    topic.dispatch()


def redeliver(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES: the named messages (or all the consumer holds) go back."""
    q = cmd.redeliverUnacknowledgedMessages
    found = conn.consumers.get(q.consumer_id)
    if found is None:
        return
    sub, consumer, topic = found
    ids = [Position(m.ledgerId, m.entryId) for m in q.message_ids] if len(q.message_ids) else None
    sub.redeliver(consumer, ids)
    topic.dispatch()


def close_consumer(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """CLOSE_CONSUMER: the consumer leaves (what it held goes to the others, uncounted)."""
    q = cmd.close_consumer
    found = conn.consumers.pop(q.consumer_id, None)
    if found is not None:
        sub, consumer, topic = found
        sub.remove_consumer(consumer)
        topic.dispatch()
    conn.success(q.request_id)


def unsubscribe(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """UNSUBSCRIBE: the subscription goes, if this consumer is its last."""
    q = cmd.unsubscribe
    sub, consumer, topic = consumer_of(conn, q.consumer_id)
    if [c for c in sub.consumers if c is not consumer]:
        raise ProtocolError(f"subscription {sub.name!r} has other consumers", server_error=api.ConsumerBusy)
    del conn.consumers[q.consumer_id]
    sub.remove_consumer(consumer)
    topic.unsubscribe(sub.name)
    conn.success(q.request_id)


def seek(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """SEEK by message or publish time: the subscription restarts there, its consumers reconnect."""
    q = cmd.seek
    sub, _consumer, topic = consumer_of(conn, q.consumer_id)
    if q.HasField("message_publish_time"):
        position = topic.log.find_by_time(q.message_publish_time)
    elif q.HasField("message_id"):
        position = Position(q.message_id.ledgerId, q.message_id.entryId)
    else:
        raise ProtocolError("SEEK names neither a message nor a time", server_error=api.MetadataError)
    sub.seek(position)
    conn.success(q.request_id)
    # As Pulsar does: the subscription's consumers are closed and come back from the new position.
    for c in list(sub.consumers):
        c.send(encode_command(commands.close_consumer(c.consumer_id, 0)))
    conn.broker.reconnect_consumers(sub)


def get_last_message_id(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """GET_LAST_MESSAGE_ID: the topic's last position and the subscription's mark-delete."""
    q = cmd.getLastMessageId
    sub, _consumer, topic = consumer_of(conn, q.consumer_id)
    last = topic.log.last_position
    md = sub.cursor.mark_delete_position
    last_id = commands.message_id(last.ledger_id, last.entry_id)
    md_id = commands.message_id(md.ledger_id, md.entry_id)
    conn.reply(commands.get_last_message_id_response(q.request_id, last_id, mark_delete=md_id))
