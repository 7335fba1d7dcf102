"""The command table: which handler serves each command a connection receives after CONNECT.

A handler takes the connection the command came on, the command and its payload; it is done when
it returns, or once what it returns is (a topic being loaded). A command not listed here is
refused with NotAllowed. PING, PONG and GET_SCHEMA are answered here; the others are in
``lookup_commands.py``, ``producer_commands.py`` and ``consumer_commands.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import Payload
from cursorkit.broker.server import consumer_commands, lookup_commands, producer_commands
from cursorkit.broker.server.connection_like import ConnectionLike
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["HANDLERS", "Handler"]

Handler = Callable[[ConnectionLike, api.BaseCommand, Payload | None], Awaitable[None] | None]
"""A command's handler: done when it returns, or when what it returns is (a topic being loaded)."""


def ping(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """PING: answered with PONG."""
    conn.reply(commands.pong())


def pong(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """PONG: the client answered the connection's keep-alive (any command counts as life)."""


def get_schema(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """GET_SCHEMA: refused with TopicNotFound, as Pulsar answers for a topic without a schema."""
    message = "this broker keeps no schemas"
    conn.reply(commands.get_schema_error(cmd.getSchema.request_id, api.TopicNotFound, message))


_T = api.BaseCommand

HANDLERS: dict[int, Handler] = {
    _T.PING: ping,
    _T.PONG: pong,
    _T.PARTITIONED_METADATA: lookup_commands.partitioned_metadata,
    _T.LOOKUP: lookup_commands.lookup,
    _T.GET_TOPICS_OF_NAMESPACE: lookup_commands.get_topics_of_namespace,
    _T.PRODUCER: producer_commands.producer,
    _T.SEND: producer_commands.send,
    _T.CLOSE_PRODUCER: producer_commands.close_producer,
    _T.SUBSCRIBE: consumer_commands.subscribe,
    _T.FLOW: consumer_commands.flow,
    _T.ACK: consumer_commands.ack,
    _T.REDELIVER_UNACKNOWLEDGED_MESSAGES: consumer_commands.redeliver,
    _T.CLOSE_CONSUMER: consumer_commands.close_consumer,
    _T.UNSUBSCRIBE: consumer_commands.unsubscribe,
    _T.SEEK: consumer_commands.seek,
    _T.GET_LAST_MESSAGE_ID: consumer_commands.get_last_message_id,
    _T.GET_SCHEMA: get_schema,
}
"""Command type → its handler."""
