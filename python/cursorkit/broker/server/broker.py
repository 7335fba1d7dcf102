"""The broker: an asyncio server on Pulsar's binary protocol, its topics, and the periodic flush.

Topics are created on first use (Pulsar's auto topic creation), non-partitioned unless the broker
was told a topic has partitions (``partitioned``, kept in ``<data>/partitioned/`` so a restart
knows it). Nothing here authenticates: bind 127.0.0.1 unless the network is trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.connection import Connection
from cursorkit.broker.server.names import TopicName, topic_name
from cursorkit.broker.server.subscription import Subscription
from cursorkit.broker.server.topic import Topic
from cursorkit.errors import InvalidArgument
from cursorkit.fsio import atomic_write

__all__ = ["Broker", "run"]

log = logging.getLogger("cursorkit.broker")


class Broker:
    """A single-node broker over ``config.data``; :meth:`start` listens, :meth:`stop` closes everything."""

    def __init__(self, config: BrokerConfig, partitioned: Mapping[str, int] | None = None) -> None:
        self.config = config
        self.root = Path(config.data)
        self.root.mkdir(parents=True, exist_ok=True)
        self.topics: dict[TopicName, Topic] = {}
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._names = itertools.count(1)
        self._partitioned = self._load_partitioned()
        for text, n in (partitioned or {}).items():
            self.set_partitions(topic_name(text), n)

    # -- topics --------------------------------------------------------------------------------------

    def _partitioned_file(self) -> Path:
        return self.root / "partitioned.json"

    def _load_partitioned(self) -> dict[str, int]:
        path = self._partitioned_file()
        if not path.exists():
            return {}
        data = json.loads(path.read_text())
        return {str(k): int(v) for k, v in data.items()}

    def set_partitions(self, name: TopicName, partitions: int) -> None:
        """Declares ``name`` a partitioned topic of ``partitions`` partitions (durable)."""
        given: object = partitions
        if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= 10_000:
            raise InvalidArgument(f"partitions must be an int in 1..10000, got {partitions!r}")
        if name.partition is not None:
            raise InvalidArgument(f"{name.full} is a partition, not a topic")
        self._partitioned[name.full] = partitions
        atomic_write(self._partitioned_file(), json.dumps(self._partitioned, sort_keys=True).encode())

    def partitions_of(self, name: TopicName) -> int:
        """The topic's partition count (0: not partitioned), as PARTITIONED_METADATA answers."""
        return self._partitioned.get(name.full, 0) if name.partition is None else 0

    def topic(self, name: TopicName) -> Topic:
        """The topic (opened, or created on first use)."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = Topic(name, self.root, self.config)
        return topic

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
        """Listens; returns once connections are accepted."""
        self._server = await asyncio.start_server(
            self._accept, self.config.host, self.config.port, limit=1 << 20
        )
        self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        log.info("cursorkit broker on %s, data in %s", self.service_url, self.root)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        self.connections.add(conn)
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)

    async def _flush_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            for topic in list(self.topics.values()):
                topic.dispatch()  # consumers whose connections drained since get their turn
                try:
                    topic.flush()
                except Exception:  # noqa: BLE001 - a failed flush is retried next time; acks stay in memory
                    log.exception("flushing %s failed", topic.name.full)

    async def stop(self) -> None:
        """Stops listening, closes the connections, flushes and closes every topic."""
        if self._server is not None:
            self._server.close()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        for conn in list(self.connections):
            conn.close()
        for topic in self.topics.values():
            topic.close()
        self.topics.clear()


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
