"""The broker: an asyncio server on Pulsar's binary protocol, its topics, and the periodic flush.

Topics are created on first use (Pulsar's auto topic creation), non-partitioned unless the broker
was told a topic has partitions (``partitioned``, kept in ``<data>/partitioned.json`` so a restart
knows it). Nothing here authenticates: bind 127.0.0.1 unless the network is trusted.

Brokers given the same ``metadata`` (a ZooKeeper root) and ``data`` split the topics: a LOOKUP
claims an unowned topic for the broker asked (:mod:`.ownership`) or redirects to its owner, which
opens it once the previous owner has let its log go. A broker serves PRODUCER and SUBSCRIBE only on
topics it owns (ServiceNotReady otherwise, and the client looks the topic up again), and gives a
topic up, closing it and its clients' producers and consumers, as soon as its claim is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import encode_command
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.connection import READ_SIZE, Connection
from cursorkit.broker.server.data_lock import DataLock
from cursorkit.broker.server.limits import Admission, Buffers, Descriptors, TokenBucket, Warnings
from cursorkit.broker.server.names import TopicName, topic_name
from cursorkit.broker.server.namespace_topics import NamespaceTopics
from cursorkit.broker.server.partitioned_table import PartitionedTable
from cursorkit.broker.server.services import Lookup
from cursorkit.errors import Fenced, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

if TYPE_CHECKING:
    from cursorkit.broker.server.cursor_stores import CursorStores
    from cursorkit.broker.server.ownership import Ownership
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = ["LOG_WAIT_S", "Broker", "run"]

log = logging.getLogger("cursorkit.broker")

LOG_WAIT_S = 10.0
"""How long a new owner waits for the previous one to let a topic's log go before the lookup fails
(ServiceNotReady: the client looks it up again). A killed owner's lock goes with its process."""


_NOT_READY = api.ServiceNotReady
_DESCRIPTORS_FOR_TOPICS = 0.8
"""Past this share of the descriptor limit, idle topics are closed before anything new is opened."""
_DESCRIPTORS_FOR_CONNECTIONS = 0.95
"""Past this share, new connections are refused (NotAllowedError) until some close."""
_CLOSED_AT_ONCE = 8
"""Idle topics closed at once when descriptors run short."""
_NO_REQUEST = (1 << 64) - 1
"""Pulsar's request id −1 (an ERROR that answers no request), as the uint64 the wire carries."""


def _new_topic(
    name: TopicName, root: Path, config: BrokerConfig, stores: CursorStores | None = None
) -> Topic:
    """Opens a topic, off the loop: the first one imports what topics need (numpy, trackers, stores).

    Not imported before listening, so a broker accepts connections without paying for them first.
    """
    from cursorkit.broker.server.topic import Topic

    return Topic(name, root, config, stores)


def _preload() -> None:
    """Imports what the first topic needs (the broker runs it off the loop once it listens)."""
    import cursorkit.broker.server.topic  # noqa: F401


def _preloaded(done: asyncio.Future[None]) -> None:
    """Logs a preload that failed (the first topic's load raises the same error to its client)."""
    if not done.cancelled() and done.exception() is not None:
        log.error("importing the topic modules failed: %r", done.exception())


def _clients_of(topic: Topic) -> int:
    """Producers (joined or waiting) and consumers on the topic: what an unforced delete refuses."""
    consumers = sum(len(s.consumers) for s in topic.subscriptions.values())
    return topic.producers + topic.access.waiting_count + consumers


def _discard_all(jobs: list[tuple[Topic | None, Path]]) -> None:
    """Closes each topic (when open) and deletes its directory, its log and subscriptions (off the loop).

    Every one is tried; the first failure is raised after.
    """
    failure: Exception | None = None
    for topic, directory in jobs:
        try:
            if topic is not None:
                topic.close()
            if directory.exists():
                shutil.rmtree(directory)
        except Exception as e:  # noqa: BLE001 - the others are deleted all the same
            failure = failure or e
    if failure is not None:
        raise failure


def _run_flushes(jobs: list[Callable[[], None]]) -> list[Exception | None]:
    """Runs each topic's flush (off the loop); what each raised, or None."""
    failures: list[Exception | None] = []
    for job in jobs:
        try:
            job()
            failures.append(None)
        except Exception as e:  # noqa: BLE001 - reported per topic on the loop
            failures.append(e)
    return failures


class Broker:
    """A broker over ``config.data``; :meth:`start` listens, :meth:`stop` closes everything."""

    def __init__(self, config: BrokerConfig, partitioned: Mapping[str, int] | None = None) -> None:
        self.config = config
        self.root = Path(config.data)
        self.root.mkdir(parents=True, exist_ok=True)
        self.topics: dict[TopicName, Topic] = {}
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._names = itertools.count(1)
        self.partitioned = PartitionedTable(self.root, sync=config.sync)
        """The partitioned topics (``partitioned.json``)."""
        self._ownership: Ownership | None = None
        self._serving = asyncio.Event()
        """Set once the broker has joined its metadata store (at once without one): connections
        accepted before wait for it, so no topic is opened here without its claim."""
        self._opening: dict[TopicName, asyncio.Task[Topic]] = {}
        self._closing: dict[TopicName, asyncio.Task[None]] = {}
        """Topics being closed off the loop (idle, or to make room): reopened only once closed."""
        self._idle_since: dict[TopicName, float] = {}
        self._loads = asyncio.Semaphore(config.max_concurrent_topic_loads)
        self.admission = Admission(config.max_connections, config.max_connections_per_address)
        self.buffers = Buffers(config.max_buffered_bytes, READ_SIZE)
        self.warnings = Warnings()
        self.descriptors = Descriptors()
        self.topic_loads = TokenBucket(config.max_topic_loads_per_s, 2 * config.max_topic_loads_per_s)
        """New topics over all connections (each connection has a bucket of its own as well)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.namespace_topics = NamespaceTopics(self.root / "topics", shared=bool(config.metadata))
        """The topics known per namespace, for GET_TOPICS_OF_NAMESPACE (completed from disk at start)."""
        for text, n in self.partitioned.copy().items():
            self.namespace_topics.add_partitioned(topic_name(text), n)
        self._declared = dict(partitioned or {})
        """Partitioned topics to declare at start, once the data directory is this broker's."""
        self._data_lock: DataLock | None = None
        self._stopping = False

    # -- topics --------------------------------------------------------------------------------------

    def set_partitions(self, name: TopicName, partitions: int) -> None:
        """Declares ``name`` a partitioned topic of ``partitions`` partitions (durable; at start)."""
        self.partitioned.declare(name, partitions)
        self.namespace_topics.add_partitioned(name, partitions)

    def partitions_of(self, name: TopicName) -> int:
        """The topic's partition count (0: not partitioned), as PARTITIONED_METADATA answers."""
        return self.partitioned.count(name)

    async def update_partitions(self, name: TopicName, partitions: int | None) -> None:
        """Declares ``name`` partitioned (or, with None, no longer): the file is written off the loop.

        Changes are made one at a time; one whose write fails changes nothing. The next
        PARTITIONED_METADATA answers the new count (a client's periodic one finds new partitions).
        """
        # Shielded: a caller that goes away leaves the change whole (written, then seen).
        await asyncio.shield(asyncio.ensure_future(self._change_partitions(name, partitions)))

    async def _change_partitions(self, name: TopicName, partitions: int | None) -> None:
        await self.partitioned.change(name, partitions)
        if partitions is not None:
            self.namespace_topics.add_partitioned(name, partitions)

    async def delete_topics(self, names: list[TopicName], *, force: bool) -> bool:
        """Deletes the topics, their logs and subscriptions (off the loop); False when refused.

        Unforced, a topic with producers or consumers refuses it, and none is deleted. Forced,
        their clients' producers and consumers are closed first, as an unload closes them (each
        client looks its topic up again, and finds it new). A topic opened meanwhile waits for the
        deletion; one not open is deleted from disk.
        """
        while True:  # topics being opened or closed: settled first, then checked and taken at once
            pending = [t for n in names for t in (self._opening.get(n), self._closing.get(n)) if t]
            if not pending:
                break
            await asyncio.gather(*(asyncio.shield(t) for t in pending), return_exceptions=True)
        opened = {n: t for n, t in ((n, self.topics.get(n)) for n in names) if t is not None}
        if not force and any(_clients_of(t) for t in opened.values()):
            return False
        jobs: list[tuple[Topic | None, Path]] = []
        for name in names:
            topic = opened.get(name)
            if topic is not None:
                del self.topics[name]
                self._idle_since.pop(name, None)
                topic.stop_timers()
                for conn in list(self.connections):
                    conn.release_topic(topic)
            self.namespace_topics.discard(name)
            jobs.append((topic, self.root / "topics" / name.directory))
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(_discard_all, jobs))
        for name in names:  # a load of any of them waits for the deletion
            self._closing[name] = task
        task.add_done_callback(functools.partial(self._deleted, names))
        await asyncio.shield(task)
        return True

    def open_topic(self, name: TopicName) -> Topic | None:
        """The topic when it is open here (None: it must be loaded first).

        ServiceNotReady when another broker may own it (the client looks it up again).
        """
        topic = self.topics.get(name)
        if topic is None and self._ownership is not None:
            raise ProtocolError(
                f"{name.full} is not served by this broker: look it up", server_error=_NOT_READY
            )
        if topic is not None:
            self._idle_since.pop(name, None)
        return topic

    async def load_topic(self, name: TopicName) -> Topic:
        """Opens the topic (created on first use) off the event loop.

        At most ``max_concurrent_topic_loads`` load at once; ServiceNotReady when ``max_open_topics``
        are open and none of them is idle.
        """
        closing = self._closing.get(name)
        if closing is not None:
            await asyncio.shield(closing)
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        task = self._opening.get(name)
        if task is None:
            self.make_room()
            task = self._opening[name] = asyncio.get_running_loop().create_task(self._load(name))
            task.add_done_callback(lambda _: self._opening.pop(name, None))
        return await asyncio.shield(task)

    async def _load(self, name: TopicName) -> Topic:
        async with self._loads:
            topic = await asyncio.to_thread(_new_topic, name, self.root, self.config)
        self.topics[name] = topic
        self.namespace_topics.add(name)
        return topic

    def _deleted(self, names: list[TopicName], done: asyncio.Task[None]) -> None:
        for name in names:
            if self._closing.get(name) is done:
                del self._closing[name]

    def _in_use(self, topic: Topic) -> bool:
        """Whether a producer or consumer is on the topic, or an append is pending."""
        return topic.busy or any(s.consumers for s in topic.subscriptions.values())

    def make_room(self) -> None:
        """Closes idle topics before something new is opened, when topics or descriptors run short.

        Short: ``max_open_topics`` open, or past 80% of the descriptor limit. ServiceNotReady when no
        topic is idle.
        """
        limit = self.config.max_open_topics
        full = len(self.topics) + len(self._opening) >= limit
        short = self.descriptors.short(_DESCRIPTORS_FOR_TOPICS)
        if not (full or short):
            return
        idle = [name for name, t in self.topics.items() if not self._in_use(t)]
        if not idle:
            why = f"its maximum of {limit} topics open" if full else "too many file descriptors open"
            self.warnings.warn("topics", "refusing a new topic or subscription: %s, all in use", why)
            raise ProtocolError(f"this broker has {why}, all in use: retry later", server_error=_NOT_READY)
        far = float("inf")
        idle.sort(key=lambda n: self._idle_since.get(n, far))
        for name in idle[: 1 if full and not short else _CLOSED_AT_ONCE]:
            self._close_idle(name)

    def _close_idle(self, name: TopicName) -> None:
        """Closes a topic nobody uses, off the loop; it is reopened on demand."""
        topic = self.topics.pop(name)
        self._idle_since.pop(name, None)
        topic.stop_timers()
        ownership = self._ownership

        def close() -> None:
            try:
                topic.close()
            finally:
                if ownership is not None:
                    ownership.release(name)

        task = self._closing[name] = asyncio.get_running_loop().create_task(asyncio.to_thread(close))

        def closed(done: asyncio.Task[None]) -> None:
            self._closing.pop(name, None)
            if not done.cancelled() and done.exception() is not None:
                log.error("closing the idle topic %s failed: %s", name.full, done.exception())

        task.add_done_callback(closed)

    def _close_idle_topics(self, now: float) -> None:
        """Closes the topics idle for ``topic_idle_s``: their descriptors go until they are used again."""
        for name, topic in list(self.topics.items()):
            if self._in_use(topic):
                self._idle_since.pop(name, None)
            elif now - self._idle_since.setdefault(name, now) >= self.config.topic_idle_s:
                self._close_idle(name)

    # -- ownership (brokers sharing a metadata store) --------------------------------------------------

    def lookup(self, name: TopicName) -> Lookup | Awaitable[Lookup]:
        """Where the client finds the topic: here (claimed and opened first when unowned), or its owner."""
        if self._ownership is None or name in self.topics:
            return Lookup(self.service_url)
        return self._lookup(name)

    async def _lookup(self, name: TopicName) -> Lookup:
        assert self._ownership is not None
        owner = await asyncio.to_thread(self._ownership.claim, name)
        if owner != self.service_url:
            return Lookup(owner, redirect=True)
        if name in self.topics:  # another lookup opened it while this one claimed
            return Lookup(self.service_url)
        task = self._opening.get(name)
        if task is None:
            task = self._opening[name] = asyncio.get_running_loop().create_task(self._open_owned(name))
            task.add_done_callback(lambda _: self._opening.pop(name, None))
        await asyncio.shield(task)
        return Lookup(self.service_url)

    async def _open_owned(self, name: TopicName) -> Topic:
        """Opens a topic this broker claimed once its log is free (its previous owner closed or died)."""
        assert self._ownership is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOG_WAIT_S
        stores = self._ownership.cursor_stores(name)
        while True:
            try:
                async with self._loads:
                    topic = await asyncio.to_thread(_new_topic, name, self.root, self.config, stores)
                break
            except BlockingIOError as e:
                if loop.time() >= deadline:
                    raise ProtocolError(
                        f"Failed to acquire ownership of {name.full}: its previous owner still has "
                        f"its log open after {LOG_WAIT_S:.0f} s",
                        server_error=_NOT_READY,
                    ) from e
                await asyncio.sleep(0.05)
        self.topics[name] = topic
        self.namespace_topics.add(name)
        self._ownership.watch(name)
        return topic

    def _claim_lost(self, name: TopicName | None) -> None:
        """From kazoo's thread: the claim on ``name`` (None: on every topic) is gone."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped: so has everything else
                self._loop.call_soon_threadsafe(self._give_up, name)

    def _give_up(self, name: TopicName | None) -> None:
        for lost in list(self.topics) if name is None else [name]:
            topic = self.topics.pop(lost, None)
            if topic is None:
                continue
            log.warning("%s: this broker no longer owns it; closing it", lost.full)
            for conn in list(self.connections):
                conn.release_topic(topic)
            topic.close()

    def producer_name(self) -> str:
        """A broker-assigned producer name, unique in this broker's life."""
        return f"cursorkit-{os.getpid()}-{next(self._names)}"

    def reconnect_consumers(self, subscription: Subscription) -> None:
        """Detaches every consumer of ``subscription`` from its connection (after a seek)."""
        for conn in self.connections:
            conn.detach(subscription)

    @property
    def service_url(self) -> str:
        """The ``pulsar://`` URL lookups answer with."""
        if self.config.advertised:
            return self.config.advertised
        port = self.port
        return f"pulsar://{self.config.host}:{port}"

    @property
    def port(self) -> int:
        """The port listened on (the one the OS chose when the config said 0)."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self.config.port

    # -- lifetime ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Takes the data directory, listens (and joins the metadata store, if any).

        Returns once connections are accepted. :class:`~.data_lock.DataInUse`, before anything is
        written or listened on, when another broker holds the directory (brokers with ``metadata``
        share it). A start that fails stops what it started. What can wait comes after listening,
        in the background: the listing of the topics on disk (topic lists wait for it) and the
        import of the topics' modules (the first topic's load waits for it).
        """
        self._data_lock = await asyncio.to_thread(self._take_data)
        try:
            # The stream reader takes at most twice its limit from the socket before it stops reading:
            # with one read's worth, a connection holds ~128 KiB beyond its unfinished frame.
            self._server = await asyncio.start_server(
                self._accept, self.config.host, self.config.port, limit=READ_SIZE
            )
            self._loop = asyncio.get_running_loop()
            self.namespace_topics.start_loading()  # the topics on disk: topic lists wait for them
            if self.config.metadata:
                from cursorkit.broker.server.ownership import Ownership

                c = self.config
                self._ownership = await asyncio.to_thread(
                    Ownership, c.metadata, self.service_url, c.session_timeout_s, self._claim_lost
                )
            self._serving.set()
            # Listening: the first topic's modules load off the loop meanwhile (a load waits for them).
            # After Ownership's import (with --metadata), so that one thread at a time imports.
            self._loop.run_in_executor(None, _preload).add_done_callback(_preloaded)
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
            await asyncio.to_thread(self._data_lock.name_holder, self.service_url)
        except BaseException:
            await self.stop()
            raise
        log.info("cursorkit broker on %s, data in %s", self.service_url, self.root)

    def _take_data(self) -> DataLock:
        """Locks the data directory, then declares the partitioned topics the broker was given."""
        lock = DataLock(self.root, shared=bool(self.config.metadata))
        try:
            for text, n in self._declared.items():
                self.set_partitions(topic_name(text), n)
        except BaseException:
            lock.release()
            raise
        return lock

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        refused = self.admission.admit(address)
        if refused is None and self.descriptors.short(_DESCRIPTORS_FOR_CONNECTIONS):
            self.admission.release(address)
            refused = (
                f"Reached the maximum number of connections (file descriptors: {self.descriptors.limit})"
            )
        if refused is not None:  # as Pulsar: an ERROR without a request, then the connection closes
            self.warnings.warn("connections", "refusing a connection from %s: %s", address, refused)
            with contextlib.suppress(Exception):
                writer.write(encode_command(commands.error(_NO_REQUEST, api.NotAllowedError, refused)))
                writer.close()
            return
        conn = Connection(self, reader, writer)
        self.connections.add(conn)
        try:
            if not self._serving.is_set():  # accepted while joining the metadata store: wait for it
                await self._serving.wait()
            await conn.serve()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            # Stopping: its client was let go. Ending quietly spares the stream server's
            # done-callback, which reports a cancelled connection task as an error (Python 3.11).
        finally:
            self.connections.discard(conn)
            self.admission.release(address)

    async def _flush_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            self._close_idle_topics(loop.time())
            topics = list(self.topics.values())
            jobs = []
            for topic in topics:
                topic.dispatch()  # consumers whose connections drained since get their turn
                jobs.append(topic.flush_jobs())
            # The cursors' writes and fsyncs, and the ledgers' deletions, on one worker thread.
            failures = await asyncio.to_thread(_run_flushes, jobs)
            for topic, failure in zip(topics, failures, strict=True):
                if isinstance(failure, Fenced):  # another broker opened its cursor: its topic now
                    log.warning("%s: fenced (%s)", topic.name.full, failure)
                    self._give_up(topic.name)
                elif failure is not None:  # retried next time; acks stay in memory
                    log.error("flushing %s failed", topic.name.full, exc_info=failure)
                elif self.topics.get(topic.name) is topic:
                    topic.after_flush()

    async def stop(self) -> None:
        """Stops listening, closes the connections, flushes and closes every topic, lets the data go."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        self.namespace_topics.stop_loading()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        for conn in list(self.connections):
            conn.close()
        for task in list(self._opening.values()):
            task.cancel()
        for closing in list(self._closing.values()):
            with contextlib.suppress(Exception):
                await closing
        for topic in self.topics.values():
            topic.close()
        if self._ownership is not None:  # the logs are closed: the next owners need not wait
            for name in self.topics:
                self._ownership.release(name)
            self._ownership.close()
            self._ownership = None
        self.topics.clear()
        if self._data_lock is not None:
            self._data_lock.release()
            self._data_lock = None


async def run(
    config: BrokerConfig, partitioned: Mapping[str, int] | None = None, *, ready: asyncio.Event | None = None
) -> None:
    """Runs a broker until cancelled."""
    broker = Broker(config, partitioned)
    await broker.start()
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()
