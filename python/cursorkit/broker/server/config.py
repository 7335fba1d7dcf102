"""What a broker is told: where its data lives, where it listens, and its limits and flush policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cursorkit.errors import InvalidArgument

__all__ = ["MAX_MESSAGE_SIZE", "BrokerConfig"]

MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's default ``maxMessageSize`` (5 MiB), announced in CONNECTED."""
_FRAME_ROOM = 10 * 1024
"""What a frame may hold beyond the message: the command and the metadata (Pulsar adds 10 KiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker's settings; every one has an embedded default.

    Acknowledgements are durable within ``flush_interval_ms`` (the cursor store is flushed that
    often while acks arrive, and on every close): a broker killed in between redelivers at most the
    acks of that last interval. A receipted message is always durable (its append is fsynced before
    the SEND_RECEIPT, many sends sharing one fsync). Every fsync is made off the event loop: the
    appends on a worker thread per group commit, the cursor flushes on the flush thread.
    """

    data: Path
    host: str = "127.0.0.1"
    port: int = 6650
    http_port: int = -1
    """The admin HTTP port (Pulsar's admin REST v2 paths and ``/metrics``, on ``host``): 0 for a
    free port, -1 (the default) for none."""
    max_message_size: int = MAX_MESSAGE_SIZE
    segment_bytes: int = 64 * 1024 * 1024
    """A ledger (one segment file) rolls over past this size."""
    sync: bool = True
    """fsync appends and cursor flushes (False only for tests that do not need durability)."""
    flush_interval_ms: int = 100
    keep_alive_s: float = 30.0
    """A PING goes out after this long without a frame; a connection silent for twice as long is closed."""
    read_batch: int = 100
    """Entries read from the log per dispatch round."""
    tick_time_ms: int = 1
    """The delayed-delivery tracker's tick."""
    delayed_tracker: str = "bucket"
    """``bucket``: PIP-195's bucket tracker, sealed buckets snapshotted beside the cursor (a restart
    recovers them); ``memory``: Pulsar's in-memory tracker (a restart re-reads the backlog)."""
    bucket_min_index_count: int = 50_000
    """Pulsar's ``delayedDeliveryMinIndexCountPerBucket``: delayed messages sealed per bucket."""
    max_unacked_per_key: int = 0
    """Beyond Pulsar: a Key_Shared key with this many messages unacknowledged gets no more until
    acks or nacks bring it below (0: no cap, as Pulsar)."""
    durable_redelivery_counts: bool = False
    """Beyond Pulsar: redelivery counts survive restarts, hand-overs and reconnects (a journal beside
    the cursor), and a consumer lost while holding messages counts as a redelivery of them; off:
    memory only, as Pulsar."""
    key_ordered_nacks: bool = False
    """Beyond Pulsar: on Key_Shared subscriptions (not ``allowOutOfOrderDelivery`` ones), a nack
    keeps its key's order: the key's later messages in flight are sent again after the nacked
    one, acks overtaking an earlier unacknowledged message of their key wait for it; off: a nacked
    message comes back after later ones of its key, as Pulsar."""
    stuck_consumer_timeout_ms: int = 0
    """Beyond Pulsar: a Key_Shared consumer without progress (ack, nack, flow) for this long while
    holding messages or out of permits is isolated: its keys' entries are dropped from memory and
    read again from the log when it recovers or leaves (0: off; in Pulsar one hung consumer can
    fill the replay queue until reads stop for everyone)."""
    advertised: str = field(default="")
    """The ``pulsar://host:port`` lookups answer with (default: ``host``:``port``)."""
    metadata: str = ""
    """``zk://host:port[,host:port...]/root``: brokers sharing this ZooKeeper root (and ``data``)
    split the topics between them, each owning a topic through an ephemeral znode; "" for one node."""
    session_timeout_s: float = 4.0
    """The ZooKeeper session timeout: a broker that dies loses its topics this long after."""
    max_connections: int = 4096
    """Connections served at once (Pulsar's ``brokerMaxConnections``; 0: no limit). One past it gets
    ``NotAllowedError`` and is closed, as in Pulsar."""
    max_connections_per_address: int = 1024
    """Connections from one peer address at once (Pulsar's ``brokerMaxConnectionsPerIp``; 0: no limit)."""
    max_buffered_bytes: int = 256 * 1024 * 1024
    """Bytes of unfinished frames held over all connections: past it, a connection holding more than
    one read of an unfinished frame waits to read until others finish theirs."""
    frame_timeout_s: float = 30.0
    """A connection that has not sent CONNECT, or has held an unfinished frame, for this long is closed."""
    max_open_topics: int = 1000
    """Topics open at once (each holds a few file descriptors): a topic without producers and
    consumers is closed to make room; when none is, a new topic is refused with ``ServiceNotReady``."""
    topic_idle_s: float = 60.0
    """A topic without producers and consumers for this long is closed (reopened on demand)."""
    topic_loads_per_s: float = 20.0
    """New topics (or new subscriptions of open topics) one connection may have opened per second
    (twice as many at once): past it, the client gets ``ServiceNotReady`` and retries after its
    back-off (a client subscribing to 100 partitions at once gets 40 at once, the rest within ~3 s)."""
    max_topic_loads_per_s: float = 50.0
    """New topics or subscriptions opened per second over all connections (twice as many at once),
    past which they get ``ServiceNotReady`` too: one costs ~2 ms of CPU, and the event loop must keep
    at least 80% of a core for the clients already served."""
    max_subscriptions_per_topic: int = 1000
    """Subscriptions one topic may have (Pulsar's ``maxSubscriptionsPerTopic``, there 0: no limit); past
    it a new one is refused with ``NotAllowedError``. Each holds three file descriptors."""
    max_consumers_per_subscription: int = 5000
    """Consumers one subscription may have (Pulsar's ``maxConsumersPerSubscription``, there 0: no
    limit); one more gets ``ConsumerBusy``."""
    max_producers_per_topic: int = 5000
    """Producers one topic may have (Pulsar's ``maxProducersPerTopic``, there 0: no limit); one more
    gets ``ProducerBusy`` ("Topic reached max producers limit")."""
    max_command_bytes: int = 256 * 1024
    """The largest command (the frame without its message) decoded in Python: a larger one is refused
    with ``NotAllowedError`` (ignored when it has no request id). Pulsar's clients send at most 1,000
    message ids per ACK or REDELIVER (~20 KiB); what costs is a list of properties or ranges, walked
    per element on the event loop (300,000 properties: 0.37 s). SEND payloads and the ACKs, FLOWs
    and SENDs decoded in Rust are not counted."""
    max_concurrent_topic_loads: int = 1
    """Topics opened (their logs recovered, their cursors read) at once, off the event loop."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port must be in 0..65535, got {self.port}")
        if self.delayed_tracker not in ("bucket", "memory"):
            raise InvalidArgument(f"delayed_tracker must be bucket or memory, got {self.delayed_tracker!r}")
        for name in (
            "max_message_size",
            "segment_bytes",
            "flush_interval_ms",
            "read_batch",
            "bucket_min_index_count",
            "max_buffered_bytes",
            "max_open_topics",
            "max_concurrent_topic_loads",
            "max_command_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgument(f"{name} must be a positive int, got {value!r}")
        for name in (
            "max_unacked_per_key",
            "stuck_consumer_timeout_ms",
            "max_connections",
            "max_connections_per_address",
            "max_subscriptions_per_topic",
            "max_consumers_per_subscription",
            "max_producers_per_topic",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
        if self.metadata and not self.metadata.startswith("zk://"):
            raise InvalidArgument(f"metadata must be a zk:// location, got {self.metadata!r}")
        if self.session_timeout_s <= 0:
            raise InvalidArgument(f"session_timeout_s must be positive, got {self.session_timeout_s}")
        for name in (
            "keep_alive_s",
            "frame_timeout_s",
            "topic_idle_s",
            "topic_loads_per_s",
            "max_topic_loads_per_s",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidArgument(f"{name} must be a positive number, got {value!r}")

    @property
    def max_frame_size(self) -> int:
        """The largest frame read from a client."""
        return self.max_message_size + _FRAME_ROOM
