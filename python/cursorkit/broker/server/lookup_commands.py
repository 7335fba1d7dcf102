"""The lookup commands of a connection: PARTITIONED_METADATA and LOOKUP.

Each takes the connection it came on, the command and its payload (none), as the connection's
command table calls it. A lookup that must claim or open the topic first is answered later, while
the connection serves its other commands.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import Payload
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.services import Lookup
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection import Connection

__all__ = ["lookup", "partitioned_metadata"]

log = logging.getLogger("cursorkit.broker")


def partitioned_metadata(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """PARTITIONED_METADATA: the topic's partition count (0: not partitioned)."""
    q = cmd.partitionMetadata
    conn.reply(commands.partitioned_metadata(q.request_id, conn.broker.partitions_of(topic_name(q.topic))))


def lookup(conn: Connection, cmd: api.BaseCommand, _: Payload | None) -> None:
    """LOOKUP: where the topic is served (here, or its owner when brokers share ZooKeeper)."""
    q = cmd.lookupTopic
    answer = conn.broker.lookup(topic_name(q.topic))
    if isinstance(answer, Lookup):
        _answer(conn, q.request_id, answer)
        return
    # The topic is claimed and opened first (brokers sharing ZooKeeper): that counts as a load.
    # Refused, the answer names ownership so that the client retries on the same connection.
    try:
        conn.take_load(q.topic)
    except ProtocolError as e:
        if inspect.iscoroutine(answer):
            answer.close()
        message = f"Failed to acquire ownership of {q.topic[:200]}: {e}"
        conn.reply(commands.lookup_failed(q.request_id, api.ServiceNotReady, message))
        return
    asyncio.get_running_loop().create_task(_later(conn, q.request_id, answer))


def _answer(conn: Connection, request_id: int, answer: Lookup) -> None:
    if answer.redirect:
        conn.reply(commands.lookup_redirect(request_id, answer.url))
    else:
        conn.reply(commands.lookup_connect(request_id, answer.url))


async def _later(conn: Connection, request_id: int, pending: Awaitable[Lookup]) -> None:
    try:
        answer = await pending
    except ProtocolError as e:
        conn.reply(commands.lookup_failed(request_id, e.server_error or api.UnknownError, str(e)))
        return
    except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable, a bug: the client looks it up again
        log.warning("lookup failed: %s: %s", type(e).__name__, e)
        message = f"Failed to acquire ownership: {type(e).__name__}: {e}"
        conn.reply(commands.lookup_failed(request_id, api.ServiceNotReady, message))
        return
    _answer(conn, request_id, answer)
