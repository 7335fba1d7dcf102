"""A topic's figures, read once on the event loop: what ``/stats`` and ``/metrics`` both show.

One pass over the topic, its subscriptions and their consumers (O(subscriptions + consumers), and
O(ledgers) for the byte estimates): never a walk over messages. Both endpoints format these same
figures, so a scrape and a stats call taken together agree. Where Pulsar tracks something
cursorkit does not (acks per second, expiries, rate limits), the JSON and the metrics carry
Pulsar's zero instead, and nothing here stands for it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cursorkit import Position
from cursorkit.broker.server.dispatch import KeySharedModel, SharedModel
from cursorkit.broker.server.dispatch.shared import MAX_UNACKED_PER_CONSUMER
from cursorkit.proto import pulsar_api_pb2 as api
from cursorkit.shared.dispatcher import MAX_UNACKED_PER_SUBSCRIPTION

if TYPE_CHECKING:
    from cursorkit.broker.server.consumer import Consumer
    from cursorkit.broker.server.meters import Peer
    from cursorkit.broker.server.subscription import Subscription
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "ConsumerFigures",
    "PublisherFigures",
    "SubscriptionFigures",
    "TopicFigures",
    "bytes_after",
    "entries_between",
    "topic_figures",
]

INDIVIDUAL_ACK_TYPES = frozenset({api.CommandSubscribe.Shared, api.CommandSubscribe.Key_Shared})
"""Pulsar's individual-ack subscription types: only they report unacked and delayed messages."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerFigures:
    """One consumer (Pulsar's ``ConsumerStats``)."""

    name: str
    consumer_id: int
    peer: Peer
    msg_rate_out: float
    msg_throughput_out: float
    msg_out: int
    bytes_out: int
    msg_rate_redeliver: float
    redelivered: int
    available_permits: int
    unacked_messages: int
    avg_messages_per_entry: int
    blocked_on_unacked: bool
    last_consumed_ms: int
    key_hash_ranges: tuple[tuple[int, int], ...] | None = None
    """Key_Shared: the inclusive hash ranges it owns."""
    read_position_when_joining: str | None = None
    draining_hashes_count: int = 0
    draining_hashes_cleared_total: int = 0
    draining_hashes_unacked_messages: int = 0
    draining_hashes: tuple[tuple[int, int, int], ...] | None = None
    """Key_Shared draining mode: ``(hash, unacked messages, blocked attempts)`` per draining hash."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionFigures:
    """One subscription (Pulsar's ``SubscriptionStats``) and cursorkit's own figures of it."""

    name: str
    type_name: str
    durable: bool
    msg_backlog: int
    """Entries after mark-delete not acknowledged (Pulsar counts entries, not messages)."""
    msg_delayed: int
    backlog_bytes: int
    """Estimated bytes after mark-delete (proportional within a ledger)."""
    unacked_messages: int
    blocked_on_unacked: bool
    msg_in_replay: int
    msg_rate_out: float
    msg_throughput_out: float
    msg_out: int
    bytes_out: int
    msg_rate_redeliver: float
    redelivered: int
    last_consumed_ms: int
    active_consumer_name: str | None
    key_shared_mode: str | None
    allow_out_of_order: bool
    consumers_after_mark_delete: Mapping[str, str]
    draining_hashes_count: int
    draining_hashes_cleared_total: int
    draining_hashes_unacked_messages: int
    ack_ranges: int
    """``nonContiguousDeletedMessagesRanges``."""
    ack_ranges_bytes: int
    """``nonContiguousDeletedMessagesRangesSerializedSize``: the MessageRange form, within the limit."""
    delayed_index_bytes: int
    consumers: tuple[ConsumerFigures, ...]
    mark_delete: Position
    read_position: Position
    ack_state_bytes: int
    """cursorkit: an upper estimate of the compact ack state's bytes (O(1))."""
    partial_batches: int
    delayed_buckets: int | None
    """Bucket tracker: sealed buckets + the mutable one (None: the in-memory tracker)."""
    delayed_loaded: int | None
    delayed_snapshot_bytes: int | None
    delayed_damaged_buckets: int | None
    blocked_hashes: Mapping[str, int]
    """Key_Shared: hashes held back at the last dispatch, counted by reason."""
    read_blocked: str | None
    """Key_Shared: why the last dispatch read nothing (None: it read)."""
    durable_redelivery_positions: int | None
    """With durable redelivery counts: positions whose count is kept (None: off)."""
    durable_redelivery_bytes: int | None
    redeliveries_not_counted: int | None

    @property
    def backlog_no_delayed(self) -> int:
        """``msgBacklogNoDelayed``, as Pulsar works it out."""
        return self.msg_backlog - self.msg_delayed

    @property
    def individual_ack(self) -> bool:
        """Whether the type acks individually (Shared, Key_Shared)."""
        return self.type_name in ("Shared", "Key_Shared")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherFigures:
    """One producer (Pulsar's ``PublisherStats``)."""

    producer_id: int
    name: str
    access_mode: str
    peer: Peer
    msg_rate_in: float
    msg_throughput_in: float
    msg_in: int

    @property
    def average_msg_size(self) -> float:
        """Bytes per message over the rate window, as Pulsar divides its rates."""
        return self.msg_throughput_in / self.msg_rate_in if self.msg_rate_in else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicFigures:
    """One topic or partition (Pulsar's ``TopicStats``)."""

    name: str
    """The full name (``persistent://tenant/namespace/local``)."""
    namespace: str
    """``tenant/namespace``."""
    msg_rate_in: float
    msg_throughput_in: float
    msg_in: int
    bytes_in: int
    entries_added: int
    last_publish_ms: int
    ledgers: tuple[tuple[int, int, int], ...]
    """``(ledger id, entries, bytes)``, oldest first; the last is the one appends go to."""
    backlog_size: int
    """Estimated bytes after the slowest subscription's mark-delete."""
    publishers: tuple[PublisherFigures, ...]
    waiting_publishers: int
    topic_epoch: int | None
    subscriptions: tuple[SubscriptionFigures, ...]
    earliest_publish_ms: Mapping[str, int] = field(default_factory=dict)
    """Per subscription, the publish time of the first entry after mark-delete (only when asked)."""

    @property
    def storage_size(self) -> int:
        """Bytes of every ledger held."""
        return sum(b for _, _, b in self.ledgers)

    @property
    def entries(self) -> int:
        """Entries held."""
        return sum(n for _, n, _ in self.ledgers)

    @property
    def msg_rate_out(self) -> float:
        """Sum of the subscriptions' (Pulsar's topic figure)."""
        return sum(s.msg_rate_out for s in self.subscriptions)

    @property
    def msg_throughput_out(self) -> float:
        """Sum of the subscriptions'."""
        return sum(s.msg_throughput_out for s in self.subscriptions)

    @property
    def msg_out(self) -> int:
        """Sum of the subscriptions' (those still open)."""
        return sum(s.msg_out for s in self.subscriptions)

    @property
    def bytes_out(self) -> int:
        """Sum of the subscriptions' (those still open)."""
        return sum(s.bytes_out for s in self.subscriptions)

    @property
    def average_msg_size(self) -> float:
        """Bytes per message published over the rate window (0 when nothing came)."""
        return self.msg_throughput_in / self.msg_rate_in if self.msg_rate_in else 0.0

    @property
    def msg_backlog(self) -> int:
        """Sum of the subscriptions' backlogs (``pulsar_msg_backlog``)."""
        return sum(s.msg_backlog for s in self.subscriptions)

    @property
    def consumers_count(self) -> int:
        """Consumers over every subscription."""
        return sum(len(s.consumers) for s in self.subscriptions)


def bytes_after(position: Position, entries: Mapping[int, int], sizes: Mapping[int, int]) -> int:
    """Estimated bytes of the entries after ``position``: whole later ledgers, a share of its own."""
    total = 0.0
    for ledger, n in entries.items():
        if ledger > position.ledger_id:
            total += sizes.get(ledger, 0)
        elif ledger == position.ledger_id and n:
            total += sizes.get(ledger, 0) * max(0, n - position.entry_id - 1) / n
    return int(total)


def entries_between(low: Position, high: Position, entries: Mapping[int, int]) -> int:
    """Entry positions ``p`` with ``low < p <= high`` (Pulsar's open-closed count over the ledgers)."""
    if high <= low:
        return 0
    if high.ledger_id == low.ledger_id:
        return high.entry_id - low.entry_id
    count = max(0, entries.get(low.ledger_id, 0) - low.entry_id - 1)
    count += sum(n for ledger, n in entries.items() if low.ledger_id < ledger < high.ledger_id)
    return count + high.entry_id + 1


def _by_name(consumers: Sequence[Consumer], stats: Sequence[Any]) -> list[Any]:
    """The library's per-consumer stats lined up with the model's consumers (both in join order)."""
    if [c.name for c in consumers] == [s.name for s in stats]:
        return list(stats)
    named = {s.name: s for s in reversed(stats)}
    return [named.get(c.name) for c in consumers]


def _consumer(
    c: Consumer,
    now: float,
    *,
    unacked: int = 0,
    blocked: bool = False,
    ks: Any = None,
) -> ConsumerFigures:
    rate, throughput = c.sent.rates(now)
    sent = c.sent
    return ConsumerFigures(
        name=c.name,
        consumer_id=c.consumer_id,
        peer=c.peer,
        msg_rate_out=rate,
        msg_throughput_out=throughput,
        msg_out=sent.messages,
        bytes_out=sent.bytes,
        msg_rate_redeliver=c.redelivered.rates(now)[0],
        redelivered=c.redelivered.messages,
        available_permits=c.permits,
        unacked_messages=unacked,
        avg_messages_per_entry=round(sent.messages / sent.entries) if sent.entries else 0,
        blocked_on_unacked=blocked,
        last_consumed_ms=sent.last_ms,
        key_hash_ranges=tuple(ks.key_hash_ranges) if ks is not None else None,
        read_position_when_joining=ks.last_sent_position_when_joining if ks is not None else None,
        draining_hashes_count=ks.draining_hashes_count if ks is not None else 0,
        draining_hashes_cleared_total=ks.draining_hashes_cleared_total if ks is not None else 0,
        draining_hashes_unacked_messages=ks.draining_hashes_unacked_messages if ks is not None else 0,
        draining_hashes=tuple(ks.draining_hashes) if ks is not None else None,
    )


def _subscription(
    sub: Subscription, now: float, entries: Mapping[int, int], sizes: Mapping[int, int]
) -> SubscriptionFigures:
    cursor = sub.cursor
    model = sub.model
    consumers = list(sub.consumers)
    individual = sub.sub_type in INDIVIDUAL_ACK_TYPES
    tracker = sub.delayed.metric_figures()
    figures: list[ConsumerFigures]
    unacked, blocked, replay = 0, False, 0
    ks_stats: Any = None
    if isinstance(model, KeySharedModel):
        ks = model.dispatcher
        ks_stats = ks.stats()
        per = _by_name(consumers, ks_stats.consumers)
        cap = ks.max_unacked_per_consumer
        figures = [
            _consumer(
                c,
                now,
                unacked=s.unacked_messages if s else 0,
                blocked=bool(s and cap and s.unacked_messages >= cap),
                ks=s,
            )
            for c, s in zip(consumers, per, strict=True)
        ]
        unacked = sum(f.unacked_messages for f in figures)
        blocked = bool(ks.max_unacked_per_subscription and unacked >= ks.max_unacked_per_subscription)
        replay = ks_stats.replay_size
    elif isinstance(model, SharedModel) and individual:
        stats = model.dispatcher.stats()
        per = _by_name(consumers, stats.consumers)
        figures = [
            _consumer(
                c,
                now,
                unacked=s.unacked_messages if s else 0,
                blocked=bool(s and s.unacked_messages >= MAX_UNACKED_PER_CONSUMER),
            )
            for c, s in zip(consumers, per, strict=True)
        ]
        unacked = stats.unacked_messages
        blocked = unacked >= MAX_UNACKED_PER_SUBSCRIPTION
        replay = stats.replay_size
    else:
        figures = [_consumer(c, now) for c in consumers]
    md = cursor.mark_delete_position
    rate, throughput = sub.sent.rates(now)
    durable = sub.durable
    single = sub.type_name in ("Exclusive", "Failover")
    return SubscriptionFigures(
        name=sub.name,
        type_name=sub.type_name,
        durable=sub.is_durable,
        msg_backlog=cursor.backlog(),
        msg_delayed=tracker.delayed_messages if individual else 0,
        backlog_bytes=bytes_after(md, entries, sizes),
        unacked_messages=unacked,
        blocked_on_unacked=blocked,
        msg_in_replay=replay,
        msg_rate_out=rate,
        msg_throughput_out=throughput,
        msg_out=sub.sent.messages,
        bytes_out=sub.sent.bytes,
        msg_rate_redeliver=sub.redelivered.rates(now)[0],
        redelivered=sub.redelivered.messages,
        last_consumed_ms=sub.sent.last_ms,
        active_consumer_name=consumers[0].name if single and consumers else None,
        key_shared_mode=(
            ("STICKY" if model.sticky else "AUTO_SPLIT") if isinstance(model, KeySharedModel) else None
        ),
        allow_out_of_order=isinstance(model, KeySharedModel) and model.out_of_order,
        consumers_after_mark_delete=dict(ks_stats.consumers_after_mark_delete_position) if ks_stats else {},
        draining_hashes_count=ks_stats.draining_hashes_count if ks_stats else 0,
        draining_hashes_cleared_total=ks_stats.draining_hashes_cleared_total if ks_stats else 0,
        draining_hashes_unacked_messages=ks_stats.draining_hashes_unacked_messages if ks_stats else 0,
        ack_ranges=cursor.non_contiguous_deleted_ranges,
        ack_ranges_bytes=cursor.individually_deleted.message_range_wire_size(
            cursor.limits.max_unacked_ranges_to_persist
        ),
        delayed_index_bytes=tracker.buffer_memory_usage,
        consumers=tuple(figures),
        mark_delete=md,
        read_position=sub.read_position,
        ack_state_bytes=cursor.compact_size_estimate(),
        partial_batches=cursor.batch_count,
        delayed_buckets=tracker.bucket_total if tracker.op_stats is not None else None,
        delayed_loaded=tracker.loaded_indexes if tracker.op_stats is not None else None,
        delayed_snapshot_bytes=tracker.snapshot_size_bytes if tracker.op_stats is not None else None,
        delayed_damaged_buckets=tracker.damaged_buckets if tracker.op_stats is not None else None,
        blocked_hashes=dict(Counter(b.reason for b in ks_stats.blocked.values())) if ks_stats else {},
        read_blocked=ks_stats.read_blocked if ks_stats else None,
        durable_redelivery_positions=len(durable.counts) if durable is not None else None,
        durable_redelivery_bytes=durable.counts.memory_usage() if durable is not None else None,
        redeliveries_not_counted=durable.not_counted if durable is not None else None,
    )


def topic_figures(topic: Topic, now: float | None = None) -> TopicFigures:
    """Everything ``/stats`` and ``/metrics`` show of ``topic``, read now (on the event loop)."""
    now = time.monotonic() if now is None else now
    entries = topic.log.ledger_sizes()
    sizes = topic.log.ledger_bytes()
    subs = tuple(_subscription(s, now, entries, sizes) for s in list(topic.subscriptions.values()))
    rate, throughput = topic.received.rates(now)
    slowest = min((s.mark_delete for s in subs), default=None)
    publishers = sorted(topic.publishers.values(), key=lambda p: p.name)
    return TopicFigures(
        name=topic.name.full,
        namespace=f"{topic.name.tenant}/{topic.name.namespace}",
        msg_rate_in=rate,
        msg_throughput_in=throughput,
        msg_in=topic.received.messages,
        bytes_in=topic.received.bytes,
        entries_added=topic.received.entries,
        last_publish_ms=topic.received.last_ms,
        ledgers=tuple((lid, n, sizes.get(lid, 0)) for lid, n in entries.items()),
        backlog_size=bytes_after(slowest, entries, sizes) if slowest is not None else 0,
        publishers=tuple(
            PublisherFigures(
                producer_id=p.producer_id,
                name=p.name,
                access_mode=p.access_mode,
                peer=p.peer,
                msg_rate_in=(r := p.meter.rates(now))[0],
                msg_throughput_in=r[1],
                msg_in=p.meter.messages,
            )
            for p in publishers
        ),
        waiting_publishers=topic.access.waiting_count,
        topic_epoch=topic.access.epoch,
        subscriptions=subs,
    )
