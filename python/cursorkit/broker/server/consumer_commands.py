"""The consumer commands of a connection: subscribe, flow, ack, redeliver, close, unsubscribe, seek.

Each takes the connection it came on, the command and its payload (none), as the connection's
command table calls it; what a connection holds (its consumers, its replies) stays in
``connection.py``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from cursorkit import Position
from cursorkit.ackstate.starts import EARLIEST, LATEST, start_of
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.batches import last_index
from cursorkit.broker.protocol.frames import Payload, encode_command
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.meters import Peer
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection_like import ConnectionLike
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "ack",
    "ack_entries",
    "close_consumer",
    "consumer_of",
    "flow",
    "get_last_message_id",
    "give_permits",
    "redeliver",
    "seek",
    "subscribe",
    "unsubscribe",
]


def subscribe(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None] | None:
    """SUBSCRIBE: a consumer joins the topic's subscription (made on first use).

    A topic that is not open, or a durable subscription that does not exist yet, is opened or made
    off the loop (counted against the connection's and the broker's load rates); the connection's
    later commands wait. A reader's (non-durable) subscription is made in memory at its start.
    Whatever the broker refuses is refused before anything is made for it, and a refusal after
    that takes back what this command made: a refused SUBSCRIBE leaves no trace.
    """
    q = cmd.subscribe
    if q.consumer_id in conn.consumers:
        raise ProtocolError(
            f"consumer id {q.consumer_id} is in use on this connection", server_error=api.ConsumerBusy
        )
    request = SubscribeRequest.read(q)  # Pulsar's naming rules and ranges, before anything is made
    found = conn.topic(q.topic)
    if inspect.isawaitable(found) or (request.durable and request.name not in found.subscriptions):
        return _subscribe_later(conn, q, request, found)
    _subscribe(conn, q, request, found)
    return None


async def _subscribe_later(
    conn: ConnectionLike, q: api.CommandSubscribe, request: SubscribeRequest, found: Topic | Awaitable[Topic]
) -> None:
    loaded = inspect.isawaitable(found)
    topic = await found if inspect.isawaitable(found) else found
    made = request.durable and request.name not in topic.subscriptions
    if made:
        if not loaded:  # a new topic's first subscription comes with its load
            conn.take_load(f"subscription {request.name!r}")
            conn.broker.make_room()
        earliest = request.initial == EARLIEST
        await topic.add_subscription(request.name, request.sub_type, earliest=earliest)
    if conn.closed:
        return
    try:
        _subscribe(conn, q, request, topic)
    except Exception:
        sub = topic.subscriptions.get(request.name)
        if made and sub is not None and not sub.consumers:
            await topic.remove_subscription(request.name)  # refused: the subscription it made goes
        raise


def _subscribe(
    conn: ConnectionLike, q: api.CommandSubscribe, request: SubscribeRequest, topic: Topic
) -> None:
    name = request.name
    sub = topic.subscriptions.get(name)
    made = False
    if sub is None and not request.durable:
        sub, made = topic.add_reader(request), True
    elif sub is None:  # unsubscribed by another consumer while it was being made
        raise ProtocolError(
            f"subscription {name!r} was just deleted: retry", server_error=api.ServiceNotReady
        )
    elif sub.is_durable != request.durable:
        kind = "durable" if sub.is_durable else "non-durable"
        raise ProtocolError(
            f"subscription {name!r} exists and is {kind}: a "
            f"{'non-durable' if sub.is_durable else 'durable'} consumer cannot join it",
            server_error=api.NotAllowedError,
        )
    try:
        limit = conn.broker.config.max_consumers_per_subscription
        if limit and len(sub.consumers) >= limit:
            raise ProtocolError(
                f"subscription {name!r} reached its maximum of {limit} consumers",
                server_error=api.ConsumerBusy,
            )
        consumer = Consumer(
            q.consumer_id,
            q.consumer_name or f"consumer-{q.consumer_id}",
            conn.send,
            conn.writable,
            priority=q.priority_level,
            peer=Peer.now(conn.address, conn.client_version, q.metadata),
        )
        sub.add_consumer(consumer, request)
    except Exception:
        if made:
            topic.drop_if_unused(sub)
        raise
    conn.consumers[q.consumer_id] = (sub, consumer, topic)
    conn.success(q.request_id)
    if request.sub_type == api.CommandSubscribe.Failover:
        for c in sub.consumers:
            c.send(encode_command(commands.active_consumer_change(c.consumer_id, c is sub.consumers[0])))


def consumer_of(conn: ConnectionLike, consumer_id: int) -> tuple[Subscription, Consumer, Topic]:
    """The subscription, consumer and topic of a consumer id.

    An unknown one is ``MetadataError`` "Consumer not found", Pulsar's answer to an UNSUBSCRIBE, SEEK
    or GET_LAST_MESSAGE_ID naming no consumer of the connection.
    """
    found = conn.consumers.get(consumer_id)
    if found is None:
        raise ProtocolError(
            f"Consumer not found: {consumer_id} is not subscribed on this connection",
            server_error=api.MetadataError,
        )
    return found


def flow(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """FLOW decoded in Python: :func:`give_permits`, then the topic dispatches."""
    topic = give_permits(conn, cmd.flow.consumer_id, cmd.flow.messagePermits)
    if topic is not None:
        topic.dispatch()


def give_permits(conn: ConnectionLike, consumer_id: int, permits: int) -> Topic | None:
    """FLOW, whichever decoder read it: permits for more messages; the topic to dispatch, if any.

    A flow racing a close is dropped. The frame scanner calls this for the FLOWs it decodes and
    dispatches each topic once per read.
    """
    found = conn.consumers.get(consumer_id)
    if found is None:
        return None  # a flow racing a close: nothing to give permits to
    sub, consumer, topic = found
    sub.flow(consumer, permits)
    return topic


def ack(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None] | None:
    """An ACK the scanner left whole (batch indexes, a request id...): :func:`ack_entries` after them.

    One with a request id (a client with ack receipts on) gets ACK_RESPONSE once applied. One
    naming a batch the subscription does not know the size of waits for it to be read off the
    loop; the connection's later commands wait for it.
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
        return None
    sub, _consumer, topic = found
    whole = sub.ack_batch_indexes(q)
    if not isinstance(whole, list):
        return _ack_later(conn, q, whole, topic)
    _acked(conn, q, whole, topic)
    return None


async def _ack_later(
    conn: ConnectionLike, q: api.CommandAck, whole: Awaitable[list[Position]], topic: Topic
) -> None:
    _acked(conn, q, await whole, topic)


def _acked(conn: ConnectionLike, q: api.CommandAck, whole: list[Position], topic: Topic) -> None:
    """The whole entries of an ACK whose batch indexes are applied; ACK_RESPONSE; a dispatch."""
    ack_entries(conn, q.consumer_id, whole, q.ack_type == api.CommandAck.Cumulative)
    if q.HasField("request_id"):
        conn.reply(commands.ack_response(q.consumer_id, q.request_id))
    topic.dispatch()


def ack_entries(
    conn: ConnectionLike, consumer_id: int, positions: list[Position], cumulative: bool
) -> Topic | None:
    """ACK of whole entries, whichever decoder read it; the topic to dispatch, if any.

    Acks of a consumer that closed meanwhile are dropped (the subscription redelivers what they
    named). The frame scanner calls this for the ACKs it decodes.
    """
    found = conn.consumers.get(consumer_id)
    if found is None:
        return None
    sub, consumer, topic = found
    sub.ack_positions(consumer, positions, cumulative=cumulative)
    return topic


def redeliver(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES: the named messages (or all the consumer holds) go back."""
    q = cmd.redeliverUnacknowledgedMessages
    found = conn.consumers.get(q.consumer_id)
    if found is None:
        return
    sub, consumer, topic = found
    ids = [Position(m.ledgerId, m.entryId) for m in q.message_ids] if len(q.message_ids) else None
    sub.redeliver(consumer, ids)
    topic.dispatch()


def close_consumer(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """CLOSE_CONSUMER: the consumer leaves (what it held goes to the others, uncounted)."""
    q = cmd.close_consumer
    found = conn.consumers.pop(q.consumer_id, None)
    if found is not None:
        sub, consumer, topic = found
        sub.remove_consumer(consumer)
        topic.drop_if_unused(sub)
        topic.dispatch()
    conn.success(q.request_id)


def unsubscribe(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None]:
    """UNSUBSCRIBE: the subscription goes, if this consumer is its last.

    Its files are deleted off the loop; SUCCESS follows once they are gone.
    """
    q = cmd.unsubscribe
    sub, consumer, topic = consumer_of(conn, q.consumer_id)
    if [c for c in sub.consumers if c is not consumer]:
        raise ProtocolError(f"subscription {sub.name!r} has other consumers", server_error=api.ConsumerBusy)
    del conn.consumers[q.consumer_id]
    sub.remove_consumer(consumer)
    return _unsubscribed(conn, q.request_id, topic, sub.name)


async def _unsubscribed(conn: ConnectionLike, request_id: int, topic: Topic, name: str) -> None:
    await topic.remove_subscription(name)
    conn.success(request_id)


def seek(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """SEEK by message or publish time: the subscription restarts there, its consumers reconnect."""
    q = cmd.seek
    sub, _consumer, topic = consumer_of(conn, q.consumer_id)
    log = topic.log
    end = Position(log.last_position.ledger_id, log.last_position.entry_id + 1)
    if q.HasField("message_publish_time"):
        position = log.find_by_time(q.message_publish_time)
    elif q.HasField("message_id"):
        # Pulsar's ends (earliest: ledger -1; latest: ledger 2^63 - 1) and ids outside the log:
        # the first entry, or the end (nothing left to read).
        target = start_of(q.message_id.ledgerId, q.message_id.entryId)
        if target == EARLIEST:
            position = log.first_position
        elif target == LATEST:
            position = end
        else:
            assert isinstance(target, Position)
            position = min(max(target, log.first_position), end)
    else:
        raise ProtocolError("SEEK names neither a message nor a time", server_error=api.MetadataError)
    sub.seek(position)
    conn.success(q.request_id)
    # As Pulsar does: the subscription's consumers are closed and come back from the new position.
    for c in list(sub.consumers):
        c.send(encode_command(commands.close_consumer(c.consumer_id, 0)))
    conn.broker.reconnect_consumers(sub)


def get_last_message_id(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None]:
    """GET_LAST_MESSAGE_ID: the topic's last position and the subscription's mark-delete.

    The last entry is read off the loop: a batch names its last index (so ``has_message_available``
    sees the rest of it).
    """
    q = cmd.getLastMessageId
    sub, _consumer, topic = consumer_of(conn, q.consumer_id)
    return _last_message_id(conn, q.request_id, sub, topic)


async def _last_message_id(conn: ConnectionLike, request_id: int, sub: Subscription, topic: Topic) -> None:
    log = topic.log
    last = log.last_position
    partition = topic.partition if topic.partition >= 0 else None
    batch_index = None
    if last.entry_id >= 0:
        batch_index = last_index((await asyncio.to_thread(log.read, last)).data)
    md = sub.cursor.mark_delete_position
    last_id = commands.message_id(last.ledger_id, last.entry_id, partition=partition, batch_index=batch_index)
    md_id = commands.message_id(md.ledger_id, md.entry_id, partition=partition)
    conn.reply(commands.get_last_message_id_response(request_id, last_id, mark_delete=md_id))
