"""One client connection: frames in, commands handled in order, replies and messages out.

A command the protocol refuses gets Pulsar's ERROR (or SEND_ERROR, or a lookup's failed response;
see ``refusals.py``) and the connection stays; one without a request id to answer (ACK, FLOW,
REDELIVER) is ignored and logged, as Pulsar ignores it. Only framing errors close a connection:
bytes that are not a frame, a frame past the size limit, a first command other than CONNECT, a
SEND for a producer never created. A SEND with a bad checksum is refused with ChecksumError and
stored nowhere, and so is one whose batch count its payload cannot hold (MetadataError). Receipts
go out in send order, each once its entry is durable. What a connection may hold (an unfinished
frame, its time before CONNECT) is bounded: see ``limits.py``. Which handler serves which command
is ``command_table.py``; the handlers see the connection as ``connection_like.py``'s protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from cursorkit import Position
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import Payload, decode_frame, encode_command
from cursorkit.broker.protocol.hot_frames import send_receipts
from cursorkit.broker.protocol.scanner import FrameScanner
from cursorkit.broker.server import consumer_commands, producer_commands
from cursorkit.broker.server.command_table import HANDLERS
from cursorkit.broker.server.limits import TokenBucket
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.refusals import command_name, failure, refusal
from cursorkit.errors import CursorkitError, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.consumer import Consumer
    from cursorkit.broker.server.services import BrokerServices
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Row, Topic
    from cursorkit.broker.server.waiting_producer import Waiting

__all__ = ["READ_SIZE", "Connection"]

log = logging.getLogger("cursorkit.broker")

SERVER_VERSION = "cursorkit-broker"
_U32 = struct.Struct(">I")
READ_SIZE = 65536
"""Bytes taken from the socket per read (a connection holds at most one read beyond its frame)."""
_KEPT_CAPACITY = 4 * READ_SIZE
"""An unfinished frame past this makes the scanner renewed once it is done (the buffer's capacity
would otherwise stay with an idle connection)."""
WRITE_BUFFER = 4 * 1024 * 1024
"""Bytes sent to a client and not yet taken by it past which its consumers get no more messages:
a consumer that asks for many and reads none costs the broker this much, not its whole backlog."""
_T = api.BaseCommand
_CLOSED_PRODUCERS_KEPT = 1024
"""Producer ids the broker closed, kept per connection to ignore their late SENDs."""


class Connection:
    """The broker's side of one TCP connection."""

    def __init__(
        self, broker: BrokerServices, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.scanner = FrameScanner(broker.config.max_frame_size)
        self._sends: list[tuple[int, list[int], list[Row]]] = []
        """This read's SENDs not yet published: (producer id, sequence ids, rows) per run."""
        self._to_dispatch: set[Topic] = set()
        """Topics whose consumers this read's ACKs and FLOWs gave room: dispatched once after it."""
        self.connected = False
        self.producers: dict[int, tuple[Topic, str]] = {}
        self.consumers: dict[int, tuple[Subscription, Consumer, Topic]] = {}
        self.waiting_producers: dict[int, Waiting] = {}
        """Producers queued for exclusive access to their topic (WaitForExclusive)."""
        self.failed_producers: set[int] = set()
        """Producers whose append failed: no more receipts until they are created again."""
        self.closed_producers: dict[int, None] = {}
        """Producers the broker closed (fenced, topic given up), newest last: their SENDs already on
        the way are ignored, as Pulsar ignores a recently closed producer's; at most 1,024 kept."""
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._last_seen = self._opened = self._loop.time()
        self._partial_since: float | None = None
        """When the unfinished frame began (None: no frame unfinished)."""
        self._grown = False
        """Whether the scanner held a large frame (its buffer keeps that capacity until renewed)."""
        rate = broker.config.topic_loads_per_s
        self._topic_loads = TokenBucket(rate, max(1.0, 2 * rate))
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_due = False
        peer = writer.get_extra_info("peername")
        self.address = f"/{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else ""
        """``/host:port`` of the client, as Pulsar's stats show it."""
        self.client_version = ""
        """The client's CONNECT ``client_version``."""

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (a command finishing later then leaves no trace)."""
        return self._closed

    # -- output --------------------------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        """Queues one frame for the client (dropped once the connection is closed).

        Frames queued in one turn of the event loop go out in one write (one system call for a
        dispatch round's messages, or a group commit's receipts).
        """
        if self._closed:
            return
        self._out.append(frame)
        self._out_bytes += len(frame)
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush_out)

    def _flush_out(self) -> None:
        self._flush_due = False
        out, self._out = self._out, []
        self._out_bytes = 0
        if out and not self._closed:
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))

    def writable(self) -> bool:
        """Whether the client has read enough of what was sent to be sent more (see ``WRITE_BUFFER``)."""
        return self.writer.transport.get_write_buffer_size() + self._out_bytes < WRITE_BUFFER

    def reply(self, cmd: api.BaseCommand) -> None:
        """Queues one command to the client."""
        self.send(encode_command(cmd))

    def success(self, request_id: int) -> None:
        """Answers request ``request_id`` with SUCCESS."""
        self.reply(commands.success(request_id))

    async def serve(self) -> None:
        """Reads and handles frames until the client leaves or breaks the protocol.

        A command that must wait (a topic being opened) holds back the commands after it, so each
        connection's commands still take effect in order.
        """
        keep_alive = asyncio.get_running_loop().create_task(self._keep_alive())
        try:
            while not self._closed:
                data = await self._read()
                if not data or self._closed:
                    break
                self._last_seen = self._loop.time()
                await self._handle_read(data)
                del data  # nothing of a read is held while the connection waits for the next
                self._flush_out()
                await self.writer.drain()
        except ProtocolError as e:
            log.info("closing a connection that broke the protocol: %s", e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            keep_alive.cancel()
            self.close(lost=True)

    async def _handle_read(self, data: bytes) -> None:
        """Handles the frames a read completes, waiting where a command must (its frames die with it)."""
        items = self._feed(data)
        at = 0
        while at < len(items) and not self._closed:
            at, waiting = self._frames(items, at)
            if waiting is not None:
                await waiting

    async def _read(self) -> bytes:
        """The next bytes from the client; waits first while unfinished frames hold too much in total."""
        buffers = self.broker.buffers
        while buffers.must_wait(self.scanner.buffered) and not self._closed:
            await buffers.wait(self.broker.config.frame_timeout_s / 4)
        return await self.reader.read(READ_SIZE)

    def _feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """The frames ``data`` completes; the unfinished frame's bytes are counted and its age kept."""
        before = self.scanner.buffered
        try:
            items = self.scanner.feed_runs(data)
        finally:
            after = self.scanner.buffered
            self.broker.buffers.update(before, after)
            self._grown = self._grown or after > _KEPT_CAPACITY
            if after == 0 and self._grown:  # a large frame is done: its buffer's memory goes with it
                self.scanner = FrameScanner(self.broker.config.max_frame_size)
                self._grown = False
            if after == 0:
                self._partial_since = None
            elif before == 0 or items:
                self._partial_since = self._loop.time()
        return items

    def _frames(self, items: list[tuple[Any, ...]], at: int) -> tuple[int, Awaitable[None] | None]:
        """Handles the frames of ``items`` from ``at`` on, in order: SEND, ACK and FLOW decoded in Rust.

        A read's consecutive SENDs from one producer come as one run (``feed_runs``) and are
        published as one group, and its ACKs and FLOWs dispatch their topics once after it: no
        Python runs per SEND. Other frames (and SEND, ACK or FLOW frames the scanner does not vouch
        for) go through the full decoder and :meth:`_handle`. Stops after a command that must wait,
        returning where to go on and what to wait for (``len(items)``, None: all handled).
        """
        waiting: Awaitable[None] | None = None
        try:
            while at < len(items):
                item = items[at]
                at += 1
                kind = item[0]
                if kind == _T.SEND and self.connected:
                    self._sends.append(item[1:])  # (producer_id, [sequence_id], [row]): one run
                    continue
                if self._sends:
                    self._publish_sends()
                if kind == 0:
                    if self._oversized(item[1]):
                        continue
                    frame = decode_frame(item[1])
                    waiting = self._handle(frame.command, frame.payload)
                    if waiting is not None:
                        break
                elif not self.connected:
                    raise ProtocolError(f"first command is {kind}, not CONNECT")
                elif kind == _T.ACK:
                    self._hot(kind, consumer_commands.ack_entries, self, item[1], item[3], item[2])
                else:  # FLOW
                    self._hot(kind, consumer_commands.give_permits, self, item[1], item[2])
            if self._sends:
                self._publish_sends()
        finally:
            self._sends.clear()
            dirty, self._to_dispatch = self._to_dispatch, set()
            for topic in dirty:
                topic.dispatch()
        return at, waiting

    def _oversized(self, body: bytes) -> bool:
        """Refuses a command over ``max_command_bytes`` (True), read only as far as its request id."""
        (size,) = _U32.unpack_from(body, 0)
        limit = self.broker.config.max_command_bytes
        if size <= limit:
            return False
        try:
            cmd = api.BaseCommand.FromString(body[4 : 4 + size])  # one C parse: no walk of its fields
        except DecodeError as e:
            raise ProtocolError(f"a command of {size} bytes does not parse: {e}") from None
        self._refuse(
            cmd, api.NotAllowedError, f"a command of {size} bytes is over this broker's limit of {limit}"
        )
        return True

    def _hot(self, kind: int, handler: Callable[..., Topic | None], *args: Any) -> None:
        """Runs the ACK or FLOW handler for a command the scanner decoded (its topic dispatches after).

        What it refuses is logged and ignored, as Pulsar ignores it: these commands have no request
        id to answer, and the connection and its other consumers go on.
        """
        try:
            topic = handler(*args)
            if topic is not None:
                self._to_dispatch.add(topic)
        except CursorkitError as e:
            self.broker.warnings.warn("ignored", "ignoring a client's %s: %s", command_name(kind), e)
        except Exception as e:  # noqa: BLE001 - a bug of ours: logged, and the connection serves on
            log.exception("a client's %s failed", command_name(kind))
            self.broker.warnings.warn(
                "ignored", "ignoring a client's %s: internal error: %r", command_name(kind), e
            )

    def _publish_sends(self) -> None:
        sends, self._sends = self._sends, []
        for producer_id, sequence_ids, rows in sends:
            producer_commands.publish(self, producer_id, sequence_ids, rows)

    def producer_closed(self, producer_id: int) -> None:
        """The broker closed ``producer_id`` (CLOSE_PRODUCER sent): SENDs still on their way are ignored."""
        self.closed_producers[producer_id] = None
        if len(self.closed_producers) > _CLOSED_PRODUCERS_KEPT:
            del self.closed_producers[next(iter(self.closed_producers))]

    def receipts(self, producer_id: int, sequence_ids: list[int], result: list[Position] | Exception) -> None:
        """The receipts of a group of SENDs once their entries are durable (the topic calls in send order).

        After a failed append the producer gets one error and no further receipts: the client
        closes it, reconnects and sends again from its first unreceipted message.
        """
        if producer_id in self.failed_producers:
            return
        if isinstance(result, Exception):
            self.failed_producers.add(producer_id)
            message = str(result)
            self.reply(commands.send_error(producer_id, sequence_ids[0], api.PersistenceError, message))
            return
        self.send(send_receipts(producer_id, sequence_ids, result))

    async def _keep_alive(self) -> None:
        """Pings a silent client and closes a dead one; closes one stuck before CONNECT or mid-frame."""
        config = self.broker.config
        interval = config.keep_alive_s
        tick = min(interval, config.frame_timeout_s / 4)
        loop = asyncio.get_running_loop()
        pinged = loop.time()
        while not self._closed:
            await asyncio.sleep(tick)
            now = loop.time()
            silent = now - self._last_seen
            if silent >= 2 * interval:
                log.info("closing a connection silent for %.0f s", silent)
                self.close(lost=True)
                return
            if not self.connected and now - self._opened >= config.frame_timeout_s:
                self.broker.warnings.warn(
                    "timeout", "closing a connection without CONNECT after %.0f s", now - self._opened
                )
                self.close(lost=True)
                return
            if self._partial_since is not None and now - self._partial_since >= config.frame_timeout_s:
                self.broker.warnings.warn(
                    "timeout",
                    "closing a connection holding %d bytes of a frame unfinished after %.0f s",
                    self.scanner.buffered,
                    now - self._partial_since,
                )
                self.close(lost=True)
                return
            if silent >= interval and now - pinged >= interval:
                pinged = now
                self.reply(commands.ping())

    def close(self, *, lost: bool = False) -> None:
        """Detaches the producers and consumers and closes the socket.

        ``lost``: the client went away (or broke the protocol) with its consumers still open.
        """
        if self._closed:
            return
        self._flush_out()  # what was queued (an error's answer) goes before the close
        self._closed = True
        for sub, consumer, topic in self.consumers.values():
            sub.remove_consumer(consumer, lost=lost)
            topic.drop_if_unused(sub)
            topic.dispatch()
        self.consumers.clear()
        producer_commands.detach_all(self)
        self.broker.buffers.update(self.scanner.buffered, 0)
        self.scanner = FrameScanner(self.broker.config.max_frame_size)  # what it held goes now
        self._partial_since = None
        with contextlib.suppress(Exception):
            self.writer.close()

    # -- commands ------------------------------------------------------------------------------------

    def _handle(self, cmd: api.BaseCommand, payload: Payload | None) -> Awaitable[None] | None:
        """Runs one command's handler; returns what to wait for when it finishes later (a topic load)."""
        kind = cmd.type
        if not self.connected:
            if kind != _T.CONNECT:
                raise ProtocolError(f"first command is {kind}, not CONNECT")
            self._connect(cmd.connect)
            return None
        handler = HANDLERS.get(kind)
        if handler is None:
            self._refuse(
                cmd, api.NotAllowedError, f"command {command_name(kind)} is not served by this broker"
            )
            return None
        try:
            later = handler(self, cmd, payload)
        except Exception as e:  # noqa: BLE001 - each kind of failure is answered in _failed
            self._failed_command(cmd, e)
            return None
        return None if later is None else self._finish(cmd, later)

    async def _finish(self, cmd: api.BaseCommand, later: Awaitable[None]) -> None:
        """Waits for a command that finishes later, answering its failure as :meth:`_handle` would."""
        try:
            await later
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - each kind of failure is answered in _failed
            if not self._closed:
                self._failed_command(cmd, e)

    def _failed_command(self, cmd: api.BaseCommand, e: Exception) -> None:
        """Answers a command that raised ``e`` (a bug of ours is logged; a framing error closes)."""
        if not isinstance(e, CursorkitError):
            log.exception("command %s failed", command_name(cmd.type), exc_info=e)
        self._refuse(cmd, *failure(e))

    def _refuse(self, cmd: api.BaseCommand, error: int, message: str) -> None:
        """Pulsar's answer to a refused command; one without a request id is ignored (and logged)."""
        answer = refusal(cmd, error, message)
        if answer is None:
            self.broker.warnings.warn(
                "ignored", "ignoring a client's %s: %s", command_name(cmd.type), message
            )
        else:
            self.reply(answer)

    def _connect(self, c: api.CommandConnect) -> None:
        self.connected = True
        self.client_version = c.client_version
        version = min(commands.PROTOCOL_VERSION, c.protocol_version) if c.HasField("protocol_version") else 0
        size = self.broker.config.max_message_size
        self.reply(commands.connected(SERVER_VERSION, protocol_version=version, max_message_size=size))

    def topic(self, text: str) -> Topic | Awaitable[Topic]:
        """The topic a command names: at once when open, else loaded off the loop.

        New topics count against ``topic_loads_per_s``: past it ServiceNotReady, and the client
        retries after its back-off.
        """
        name = topic_name(text)
        topic = self.broker.open_topic(name)
        if topic is not None:
            return topic
        self.take_load(name.full)
        return self.broker.load_topic(name)

    def take_load(self, what: str) -> None:
        """Counts opening a topic or making a subscription against the connection's and broker's rates.

        Past either: ServiceNotReady, and the client retries after its back-off.
        """
        for bucket, whose in (
            (self._topic_loads, "this connection"),
            (self.broker.topic_loads, "this broker"),
        ):
            if not bucket.take():
                self.broker.warnings.warn(
                    "loads", "refusing %s: %s opens topics faster than %g/s", what, whose, bucket.rate
                )
                raise ProtocolError(
                    f"too many topics or subscriptions opened by {whose} (at most {bucket.rate:g}/s): retry",
                    server_error=api.ServiceNotReady,
                )

    def release_topic(self, topic: Topic) -> None:
        """The broker gave ``topic`` up: its producers and consumers here are closed.

        As when Pulsar unloads a topic: the client looks it up again and finds its new owner.
        """
        producer_commands.release(self, topic)
        for cid, (_sub, _consumer, t) in list(self.consumers.items()):
            if t is topic:
                del self.consumers[cid]
                self.reply(commands.close_consumer(cid, 0))

    def detach(self, subscription: Subscription) -> None:
        """Forgets this connection's consumers of ``subscription`` after a seek (they subscribe again)."""
        for cid, (s, c, _topic) in list(self.consumers.items()):
            if s is subscription:
                del self.consumers[cid]
                s.remove_consumer(c, seeking=True)
