"""The lookup commands of a connection: PARTITIONED_METADATA, LOOKUP and GET_TOPICS_OF_NAMESPACE.

Each takes the connection it came on, the command and its payload (none), as the connection's
command table calls it. A lookup that must claim or open the topic first is answered later, while
the connection serves its other commands; so is a topic list, built off the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import Payload
from cursorkit.broker.server.names import namespace_name, topic_name
from cursorkit.broker.server.namespace_topics import TopicList
from cursorkit.broker.server.services import Lookup
from cursorkit.broker.server.topic_patterns import topic_pattern
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.connection_like import ConnectionLike

__all__ = ["get_topics_of_namespace", "lookup", "partitioned_metadata"]

log = logging.getLogger("cursorkit.broker")

_pending: set[asyncio.Task[None]] = set()
"""Answers being built (the loop keeps only weak references to tasks)."""


def partitioned_metadata(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """PARTITIONED_METADATA: the topic's partition count (0: not partitioned)."""
    q = cmd.partitionMetadata
    conn.reply(commands.partitioned_metadata(q.request_id, conn.broker.partitions_of(topic_name(q.topic))))


def lookup(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
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


def _answer(conn: ConnectionLike, request_id: int, answer: Lookup) -> None:
    if answer.redirect:
        conn.reply(commands.lookup_redirect(request_id, answer.url))
    else:
        conn.reply(commands.lookup_connect(request_id, answer.url))


async def _later(conn: ConnectionLike, request_id: int, pending: Awaitable[Lookup]) -> None:
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


def get_topics_of_namespace(conn: ConnectionLike, cmd: api.BaseCommand, _: Payload | None) -> None:
    """GET_TOPICS_OF_NAMESPACE: the namespace's topics, filtered by the client's pattern if it sends one.

    A bad namespace or a pattern that does not compile is refused at once; the list is built off
    the loop and answered when ready.
    """
    q = cmd.getTopicsOfNamespace
    namespace = namespace_name(q.namespace)
    pattern = topic_pattern(q.topics_pattern) if q.HasField("topics_pattern") else None
    listing = conn.broker.namespace_topics.answer(
        namespace,
        persistent=q.mode != api.CommandGetTopicsOfNamespace.NON_PERSISTENT,
        pattern=pattern,
        client_hash=q.topics_hash if q.HasField("topics_hash") else None,
        max_bytes=conn.broker.config.max_message_size,
    )
    task = asyncio.get_running_loop().create_task(_topics_later(conn, q.request_id, listing))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


async def _topics_later(conn: ConnectionLike, request_id: int, pending: Awaitable[TopicList]) -> None:
    try:
        found = await pending
    except ProtocolError as e:
        conn.reply(commands.error(request_id, e.server_error or api.UnknownError, str(e)))
        return
    except Exception as e:  # noqa: BLE001 - a bug of ours: logged, and the client asks again
        log.exception("listing a namespace's topics failed")
        conn.reply(commands.error(request_id, api.UnknownError, f"internal error: {type(e).__name__}"))
        return
    conn.reply(
        commands.get_topics_of_namespace_response(
            request_id,
            found.topics,
            filtered=found.filtered,
            topics_hash=found.topics_hash,
            changed=found.changed,
        )
    )
