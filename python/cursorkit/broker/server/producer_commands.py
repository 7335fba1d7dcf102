"""The producer commands of a connection: producer, send (when not decoded in Rust), close producer.

Each takes the connection it came on, the command and its payload, as the connection's command
table calls it; the SENDs the frame scanner decodes are published by the connection itself, and
both paths receipt through the connection's ``receipts``. Who may produce on a topic (Pulsar's
access modes: Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing) is decided by the topic's
``access`` (``producer_access.py``); here its decisions reach the clients.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING, cast

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.batches import payload_holds
from cursorkit.broker.protocol.frames import Payload
from cursorkit.broker.server.meters import Peer, Publisher
from cursorkit.broker.server.waiting_producer import Waiting
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection_like import ConnectionLike
    from cursorkit.broker.server.topic import ProducerKey, Row, Topic

__all__ = ["close_producer", "detach_all", "producer", "publish", "release", "send"]


def _held(key: ProducerKey) -> tuple[ConnectionLike, int]:
    """A producer the topic's ``access`` names: its connection and id.

    The topic keeps keys without knowing what holds them (so it imports no connection); the keys
    it hands back are the ``(connection, producer id)`` pairs made here.
    """
    holder, producer_id = key
    return cast("ConnectionLike", holder), producer_id


def producer(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None] | None:
    """PRODUCER: a producer joins the topic, or queues for it (loaded off the loop when not open)."""
    q = cmd.producer
    if q.producer_id in conn.producers or q.producer_id in conn.waiting_producers:
        raise ProtocolError(
            f"producer id {q.producer_id} is in use on this connection", server_error=api.ProducerBusy
        )
    found = conn.topic(q.topic)
    if inspect.isawaitable(found):
        return _producer_later(conn, q, found)
    _add_producer(conn, q, found)
    return None


async def _producer_later(conn: ConnectionLike, q: api.CommandProducer, loading: Awaitable[Topic]) -> None:
    topic = await loading
    if not conn.closed:
        _add_producer(conn, q, topic)


def _add_producer(conn: ConnectionLike, q: api.CommandProducer, topic: Topic) -> None:
    """Admits the producer under its access mode: every check comes before any change."""
    name = q.producer_name if q.HasField("producer_name") and q.producer_name else conn.broker.producer_name()
    epoch = q.topic_epoch if q.HasField("topic_epoch") else None
    decision = topic.access.decide((conn, q.producer_id), q.producer_access_mode, epoch)
    if not decision.queued and q.user_provided_producer_name:
        fenced = map(_held, decision.fenced)
        fenced_names = [c.producers[pid][1] for c, pid in fenced if pid in c.producers]
        if topic.producer_names[name] > fenced_names.count(name):
            raise ProtocolError(
                f"producer {name!r} is already connected to {topic.name.full}", server_error=api.ProducerBusy
            )
    topic.check_producer_room(len(decision.fenced) + len(decision.fenced_waiting))
    for c, pid in map(_held, decision.fenced):
        _fence(c, pid)
    for c, pid in map(_held, decision.fenced_waiting):
        _refuse_waiter(c, pid, api.ProducerFenced, "an ExclusiveWithFencing producer took the topic")
    topic.access.apply(decision)
    if decision.queued:
        conn.waiting_producers[q.producer_id] = Waiting(topic, q.request_id, name)
        conn.reply(commands.producer_success(q.request_id, name, producer_ready=False))
    else:
        peer = Peer.now(conn.address, conn.client_version, q.metadata)
        _join(conn, q.producer_id, topic, name, q.request_id, decision.epoch, q.producer_access_mode, peer)


def _join(
    conn: ConnectionLike,
    producer_id: int,
    topic: Topic,
    name: str,
    request_id: int,
    epoch: int | None,
    mode: int = api.WaitForExclusive,
    peer: Peer | None = None,
) -> None:
    """The producer is on the topic: its SENDs are stored from now on (a granted waiter: the default mode)."""
    topic.add_producer(name)
    peer = peer if peer is not None else Peer.now(conn.address, conn.client_version)
    topic.publishers[(conn, producer_id)] = Publisher(
        producer_id, name, api.ProducerAccessMode.Name(mode), peer
    )
    conn.producers[producer_id] = (topic, name)
    conn.failed_producers.discard(producer_id)
    conn.reply(commands.producer_success(request_id, name, topic_epoch=epoch))


def _fence(conn: ConnectionLike, producer_id: int) -> None:
    """Closes a producer an ExclusiveWithFencing one displaced (its client comes back, to be refused)."""
    found = conn.producers.pop(producer_id, None)
    if found is not None:
        found[0].remove_producer(found[1])
        found[0].publishers.pop((conn, producer_id), None)
        conn.reply(commands.close_producer(producer_id, 0))
        conn.producer_closed(producer_id)


def _refuse_waiter(conn: ConnectionLike, producer_id: int, error: int, message: str) -> None:
    """Answers a waiter's pending PRODUCER with ``error`` (it leaves the queue)."""
    waiting = conn.waiting_producers.pop(producer_id)
    conn.reply(commands.error(waiting.request_id, error, message))


def _leave(conn: ConnectionLike, producer_id: int) -> None:
    """A producer (or waiter) leaves; once the topic is free its first waiter is granted it."""
    waiting = conn.waiting_producers.pop(producer_id, None)
    if waiting is not None:
        waiting.topic.access.leave((conn, producer_id))
        return
    found = conn.producers.pop(producer_id, None)
    if found is None:
        return
    topic, name = found
    topic.remove_producer(name)
    topic.publishers.pop((conn, producer_id), None)
    handover = topic.access.leave((conn, producer_id))
    for c, pid in map(_held, handover.fenced):
        _refuse_waiter(c, pid, api.ProducerFenced, "the topic's epoch moved on while this producer waited")
    if handover.granted is not None:
        key, epoch = handover.granted
        c, pid = _held(key)
        granted = c.waiting_producers.pop(pid)
        _join(c, pid, topic, granted.name, granted.request_id, epoch)


def detach_all(conn: ConnectionLike) -> None:
    """The connection closed: its waiters leave their queues, then its producers their topics."""
    for producer_id in list(conn.waiting_producers):
        _leave(conn, producer_id)
    for producer_id in list(conn.producers):
        _leave(conn, producer_id)


def release(conn: ConnectionLike, topic: Topic) -> None:
    """The broker gave ``topic`` up: the connection's producers on it are closed, its waiters refused.

    As when Pulsar unloads a topic: the client looks it up again and finds its new owner (a waiter
    gets ServiceNotReady, which the client retries).
    """
    for pid, waiting in list(conn.waiting_producers.items()):
        if waiting.topic is topic:
            _refuse_waiter(conn, pid, api.ServiceNotReady, "the topic moved off this broker: retry")
    for pid, (t, _name) in list(conn.producers.items()):
        if t is topic:
            del conn.producers[pid]
            topic.publishers.pop((conn, pid), None)
            conn.reply(commands.close_producer(pid, 0))
            conn.producer_closed(pid)


def send(conn: ConnectionLike, cmd: api.BaseCommand, payload: Payload | None) -> None:
    """A SEND the frame scanner left whole: stored, and receipted once durable (or refused)."""
    q = cmd.send
    if _sending_topic(conn, q.producer_id) is None:
        return
    if payload is None:
        raise ProtocolError("SEND without a message")
    if payload.checksum_ok is False:
        message = "checksum mismatch: the message was not stored"
        conn.reply(commands.send_error(q.producer_id, q.sequence_id, api.ChecksumError, message))
        return
    meta = payload.metadata
    count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
    if not payload_holds(meta, payload.stored):
        # Pulsar's code for a message whose metadata a broker refuses; the client closes the
        # connection and sends again, so only a client that built the batch wrong sees it.
        message = f"a batch of {count} messages does not fit its payload: the message was not stored"
        conn.reply(commands.send_error(q.producer_id, q.sequence_id, api.MetadataError, message))
        return
    publish(conn, q.producer_id, [q.sequence_id], [(payload.stored, meta.publish_time, max(1, count))])


def publish(conn: ConnectionLike, producer_id: int, sequence_ids: list[int], rows: list[Row]) -> None:
    """SEND, whichever decoder read it: ``rows`` queued for the topic's next group commit.

    Each is receipted once durable; the frame scanner calls this once per run of one producer's
    SENDs. SENDs already on their way from a producer the broker closed are ignored (as Pulsar ignores a
    recently closed producer's); from a producer never created here they are a protocol error.
    """
    topic = _sending_topic(conn, producer_id)
    if topic is not None and rows:
        publisher = topic.publishers.get((conn, producer_id))
        if publisher is not None:
            publisher.meter.add_rows(rows)
        topic.publish_many(rows, partial(conn.receipts, producer_id, sequence_ids))


def _sending_topic(conn: ConnectionLike, producer_id: int) -> Topic | None:
    """The topic a SEND of ``producer_id`` goes to; None to ignore it (a producer the broker closed).

    A producer never created here is a protocol error.
    """
    found = conn.producers.get(producer_id)
    if found is not None:
        return found[0]
    if producer_id in conn.closed_producers:
        return None  # sent before the client learnt the broker closed it
    raise ProtocolError(f"SEND from producer {producer_id}, which was never created here")


def close_producer(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """CLOSE_PRODUCER: the producer leaves, or stops waiting (answered SUCCESS even when it was unknown)."""
    q = cmd.close_producer
    _leave(conn, q.producer_id)
    conn.success(q.request_id)
