"""The producer commands of a connection: producer, send (when not decoded in Rust), close producer.

Each takes the connection it came on, the command and its payload, as the connection's command
table calls it; the SENDs the frame scanner decodes are published by the connection itself, and
both paths receipt through :meth:`Connection.receipts`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.batches import payload_holds
from cursorkit.broker.protocol.frames import Payload
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection import Connection
    from cursorkit.broker.server.topic import Topic

__all__ = ["close_producer", "producer", "send"]


def producer(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> Awaitable[None] | None:
    """PRODUCER: a producer joins the topic (loaded off the loop when not open)."""
    q = cmd.producer
    if q.producer_id in conn.producers:
        raise ProtocolError(
            f"producer id {q.producer_id} is in use on this connection", server_error=api.ProducerBusy
        )
    found = conn.topic(q.topic)
    if inspect.isawaitable(found):
        return _producer_later(conn, q, found)
    _add_producer(conn, q, found)
    return None


async def _producer_later(conn: Connection, q: api.CommandProducer, loading: Awaitable[Topic]) -> None:
    topic = await loading
    if not conn.closed:
        _add_producer(conn, q, topic)


def _add_producer(conn: Connection, q: api.CommandProducer, topic: Topic) -> None:
    name = q.producer_name if q.HasField("producer_name") and q.producer_name else conn.broker.producer_name()
    if q.user_provided_producer_name and name in topic.producer_names:
        raise ProtocolError(
            f"producer {name!r} is already connected to {topic.name.full}", server_error=api.ProducerBusy
        )
    topic.add_producer(name)
    conn.producers[q.producer_id] = (topic, name)
    conn.failed_producers.discard(q.producer_id)
    conn.reply(commands.producer_success(q.request_id, name))


def send(conn: Connection, cmd: api.BaseCommand, payload: Payload | None) -> None:
    """A SEND the frame scanner left whole: stored, and receipted once durable (or refused)."""
    q = cmd.send
    found = conn.producers.get(q.producer_id)
    if found is None:
        raise ProtocolError(f"SEND from producer {q.producer_id}, which was never created here")
    if payload is None:
        raise ProtocolError("SEND without a message")
    if payload.checksum_ok is False:
        message = "checksum mismatch: the message was not stored"
        conn.reply(commands.send_error(q.producer_id, q.sequence_id, api.ChecksumError, message))
        return
    topic, _name = found
    meta = payload.metadata
    count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
    if not payload_holds(meta, payload.stored):
        # Pulsar's code for a message whose metadata a broker refuses; the client closes the
        # connection and sends again, so only a client that built the batch wrong sees it.
        message = f"a batch of {count} messages does not fit its payload: the message was not stored"
        conn.reply(commands.send_error(q.producer_id, q.sequence_id, api.MetadataError, message))
        return
    row = (payload.stored, meta.publish_time, max(1, count))
    topic.publish_many([row], partial(conn.receipts, q.producer_id, [q.sequence_id]))


def close_producer(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """CLOSE_PRODUCER: the producer leaves (answered SUCCESS even when it was unknown)."""
    q = cmd.close_producer
    found = conn.producers.pop(q.producer_id, None)
    if found is not None:
        found[0].remove_producer(found[1])
    conn.success(q.request_id)
