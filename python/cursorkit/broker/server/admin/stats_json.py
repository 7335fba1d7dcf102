"""Pulsar's stats JSON from a topic's figures: ``TopicStats``, partitioned stats and internal stats.

Field names, order and defaults follow Pulsar 4's Jackson output: a figure cursorkit does not have
is Pulsar's zero (``0``, ``0.0``, ``false``, ``-1`` where Pulsar says "unknown"), and a field Pulsar
leaves null is left out, as its object mapper leaves nulls out. ``isDurable``/``isReplicated`` come
twice (also as ``durable``/``replicated``), as Pulsar's getters make them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cursorkit import Position
from cursorkit.broker.server.admin.figures import (
    ConsumerFigures,
    PublisherFigures,
    SubscriptionFigures,
    TopicFigures,
    entries_between,
)
from cursorkit.broker.server.meters import iso_time

if TYPE_CHECKING:
    from cursorkit import RangeSet
    from cursorkit.broker.server.topic import Topic

__all__ = [
    "MAX_RANGES_SHOWN",
    "internal_stats",
    "partitioned_stats",
    "range_string",
    "topic_stats",
]

MAX_RANGES_SHOWN = 10_000
"""Ranges written in ``individuallyDeletedMessages`` (Pulsar's ``managedLedgerMaxUnackedRangesToPersist``
default); past it the string ends with ``,...]``: a cursor with millions of ranges costs a bounded answer."""

Json = dict[str, Any]


def range_string(acked: RangeSet, limit: int = MAX_RANGES_SHOWN) -> str:
    """Pulsar's string of a cursor's acked ranges, ``[(3:5..3:7],(3:9..3:10]]``, at most ``limit`` ranges."""
    if len(acked) <= limit:
        return str(acked)
    rows = acked.ranges_array(limit).tolist()
    return "[" + ",".join(f"({a}:{b}..{c}:{d}]" for a, b, c, d in rows) + ",...]"


def _publisher(p: PublisherFigures) -> Json:
    return {
        "accessMode": p.access_mode,
        "msgRateIn": p.msg_rate_in,
        "msgThroughputIn": p.msg_throughput_in,
        "averageMsgSize": p.average_msg_size,
        "chunkedMessageRate": 0.0,
        "producerId": p.producer_id,
        "supportsPartialProducer": False,
        "producerName": p.name,
        "address": p.peer.address,
        "connectedSince": p.peer.connected_since,
        "clientVersion": p.peer.client_version,
        "metadata": dict(p.peer.metadata),
    }


def _consumer(c: ConsumerFigures) -> Json:
    out: Json = {
        "msgRateOut": c.msg_rate_out,
        "msgThroughputOut": c.msg_throughput_out,
        "bytesOutCounter": c.bytes_out,
        "msgOutCounter": c.msg_out,
        "msgRateRedeliver": c.msg_rate_redeliver,
        "messageAckRate": 0.0,
        "chunkedMessageRate": 0.0,
        "consumerName": c.name,
        "availablePermits": c.available_permits,
        "unackedMessages": c.unacked_messages,
        "avgMessagesPerEntry": c.avg_messages_per_entry,
        "blockedConsumerOnUnackedMsgs": c.blocked_on_unacked,
    }
    if c.read_position_when_joining is not None:
        out["readPositionWhenJoining"] = c.read_position_when_joining
    out["drainingHashesCount"] = c.draining_hashes_count
    out["drainingHashesClearedTotal"] = c.draining_hashes_cleared_total
    out["drainingHashesUnackedMessages"] = c.draining_hashes_unacked_messages
    if c.draining_hashes is not None:
        out["drainingHashes"] = [
            {"hash": h, "unackedMessages": n, "blockedAttempts": b} for h, n, b in c.draining_hashes
        ]
    out["address"] = c.peer.address
    out["connectedSince"] = c.peer.connected_since
    out["clientVersion"] = c.peer.client_version
    out["lastAckedTimestamp"] = 0
    out["lastConsumedTimestamp"] = c.last_consumed_ms
    out["lastConsumedFlowTimestamp"] = 0
    if c.key_hash_ranges is not None:
        out["keyHashRangeArrays"] = [[s, e] for s, e in c.key_hash_ranges]
        out["keyHashRanges"] = [f"[{s}, {e}]" for s, e in c.key_hash_ranges]
    out["metadata"] = dict(c.peer.metadata)
    out["lastAckedTime"] = iso_time(0)
    out["lastConsumedTime"] = iso_time(c.last_consumed_ms)
    return out


def _subscription(s: SubscriptionFigures, *, backlog_size: bool, earliest: int | None) -> Json:
    out: Json = {
        "msgRateOut": s.msg_rate_out,
        "msgThroughputOut": s.msg_throughput_out,
        "bytesOutCounter": s.bytes_out,
        "msgOutCounter": s.msg_out,
        "msgRateRedeliver": s.msg_rate_redeliver,
        "messageAckRate": 0.0,
        "chunkedMessageRate": 0.0,
        "msgBacklog": s.msg_backlog,
        "backlogSize": s.backlog_bytes if backlog_size else -1,
        "earliestMsgPublishTimeInBacklog": earliest if earliest is not None else 0,
        "msgBacklogNoDelayed": s.backlog_no_delayed,
        "blockedSubscriptionOnUnackedMsgs": s.blocked_on_unacked,
        "msgDelayed": s.msg_delayed,
        "msgInReplay": s.msg_in_replay,
        "unackedMessages": s.unacked_messages,
        "type": s.type_name,
    }
    if s.active_consumer_name is not None:
        out["activeConsumerName"] = s.active_consumer_name
    out.update(
        {
            "msgRateExpired": 0.0,
            "totalMsgExpired": 0,
            "lastExpireTimestamp": 0,
            "lastConsumedFlowTimestamp": 0,
            "lastConsumedTimestamp": s.last_consumed_ms,
            "lastAckedTimestamp": 0,
            "lastMarkDeleteAdvancedTimestamp": 0,
            "consumers": [_consumer(c) for c in s.consumers],
            "isDurable": s.durable,
            "isReplicated": False,
            "allowOutOfOrderDelivery": s.allow_out_of_order,
        }
    )
    if s.key_shared_mode is not None:
        out["keySharedMode"] = s.key_shared_mode
    out.update(
        {
            "consumersAfterMarkDeletePosition": dict(s.consumers_after_mark_delete),
            "drainingHashesCount": s.draining_hashes_count,
            "drainingHashesClearedTotal": s.draining_hashes_cleared_total,
            "drainingHashesUnackedMessages": s.draining_hashes_unacked_messages,
            "nonContiguousDeletedMessagesRanges": s.ack_ranges,
            "nonContiguousDeletedMessagesRangesSerializedSize": s.ack_ranges_bytes,
            "delayedMessageIndexSizeInBytes": s.delayed_index_bytes,
            "subscriptionProperties": {},
            "filterProcessedMsgCount": 0,
            "filterAcceptedMsgCount": 0,
            "filterRejectedMsgCount": 0,
            "filterRescheduledMsgCount": 0,
            "dispatchThrottledMsgEventsBySubscriptionLimit": 0,
            "dispatchThrottledBytesEventsBySubscriptionLimit": 0,
            "dispatchThrottledMsgEventsByTopicLimit": 0,
            "dispatchThrottledBytesEventsByTopicLimit": 0,
            "dispatchThrottledMsgEventsByBrokerLimit": 0,
            "dispatchThrottledBytesEventsByBrokerLimit": 0,
            "durable": s.durable,
            "replicated": False,
        }
    )
    return out


def topic_stats(
    t: TopicFigures, *, owner: str | None = None, backlog_size: bool = False, earliest: bool = False
) -> Json:
    """Pulsar's ``TopicStats`` of one topic (``?subscriptionBacklogSize``, ``?getEarliestTimeInBacklog``)."""
    times = t.earliest_publish_ms if earliest else {}
    firsts = [ms for ms in times.values() if ms > 0]
    out: Json = {
        "msgRateIn": t.msg_rate_in,
        "msgThroughputIn": t.msg_throughput_in,
        "msgRateOut": t.msg_rate_out,
        "msgThroughputOut": t.msg_throughput_out,
        "bytesInCounter": t.bytes_in,
        "msgInCounter": t.msg_in,
        "systemTopicBytesInCounter": 0,
        "bytesOutCounter": t.bytes_out,
        "msgOutCounter": t.msg_out,
        "bytesOutInternalCounter": 0,
        "averageMsgSize": t.average_msg_size,
        "msgChunkPublished": False,
        "storageSize": t.storage_size,
        "backlogSize": t.backlog_size,
        "backlogQuotaLimitSize": -1,
        "backlogQuotaLimitTime": -1,
        "oldestBacklogMessageAgeSeconds": -1,
        "publishRateLimitedTimes": 0,
        "earliestMsgPublishTimeInBacklogs": min(firsts, default=0),
        "offloadedStorageSize": 0,
        "lastOffloadLedgerId": 0,
        "lastOffloadSuccessTimeStamp": 0,
        "lastOffloadFailureTimeStamp": 0,
        "ongoingTxnCount": 0,
        "abortedTxnCount": 0,
        "committedTxnCount": 0,
        "publishers": [_publisher(p) for p in t.publishers],
        "waitingPublishers": t.waiting_publishers,
        "subscriptions": {
            s.name: _subscription(
                s, backlog_size=backlog_size, earliest=times.get(s.name) if earliest else None
            )
            for s in t.subscriptions
        },
        "replication": {},
        "deduplicationStatus": "Disabled",
    }
    if t.topic_epoch is not None:
        out["topicEpoch"] = t.topic_epoch
    out["nonContiguousDeletedMessagesRanges"] = sum(s.ack_ranges for s in t.subscriptions)
    out["nonContiguousDeletedMessagesRangesSerializedSize"] = sum(s.ack_ranges_bytes for s in t.subscriptions)
    out["delayedMessageIndexSizeInBytes"] = sum(s.delayed_index_bytes for s in t.subscriptions)
    out["compaction"] = {
        "lastCompactionRemovedEventCount": 0,
        "lastCompactionSucceedTimestamp": 0,
        "lastCompactionFailedTimestamp": 0,
        "lastCompactionDurationTimeInMills": 0,
    }
    if owner is not None:
        out["ownerBroker"] = owner
    out["lastPublishTimeStamp"] = t.last_publish_ms
    return out


# -- partitioned stats: Pulsar's aggregation (TopicStatsImpl.add and friends) ------------------------

_TOPIC_SUMS = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "bytesInCounter",
    "msgInCounter",
    "bytesOutCounter",
    "msgOutCounter",
    "waitingPublishers",
    "storageSize",
    "backlogSize",
    "publishRateLimitedTimes",
    "offloadedStorageSize",
    "nonContiguousDeletedMessagesRanges",
    "nonContiguousDeletedMessagesRangesSerializedSize",
    "delayedMessageIndexSizeInBytes",
)
_SUBSCRIPTION_SUMS = (
    "msgRateOut",
    "msgThroughputOut",
    "bytesOutCounter",
    "msgOutCounter",
    "msgRateRedeliver",
    "messageAckRate",
    "chunkedMessageRate",
    "msgBacklog",
    "backlogSize",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "msgInReplay",
    "unackedMessages",
    "msgRateExpired",
    "totalMsgExpired",
    "drainingHashesCount",
    "drainingHashesClearedTotal",
    "drainingHashesUnackedMessages",
    "nonContiguousDeletedMessagesRanges",
    "nonContiguousDeletedMessagesRangesSerializedSize",
    "delayedMessageIndexSizeInBytes",
    "filterProcessedMsgCount",
    "filterAcceptedMsgCount",
    "filterRejectedMsgCount",
    "filterRescheduledMsgCount",
)
_CONSUMER_SUMS = (
    "msgRateOut",
    "messageAckRate",
    "msgThroughputOut",
    "bytesOutCounter",
    "msgOutCounter",
    "msgRateRedeliver",
    "availablePermits",
    "unackedMessages",
    "drainingHashesClearedTotal",
)
_CONSUMER_LAST = (
    "blockedConsumerOnUnackedMsgs",
    "readPositionWhenJoining",
    "drainingHashesCount",
    "drainingHashesUnackedMessages",
    "drainingHashes",
    "keyHashRanges",
    "keyHashRangeArrays",
)


def _sum_into(into: Json, part: Mapping[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        if key in part:
            into[key] = into.get(key, 0) + part[key]


def _merge_consumers(into: list[Json], parts: list[Json]) -> None:
    """Consumers added index by index, as Pulsar does (names and addresses do not carry over)."""
    for i, part in enumerate(parts):
        if i == len(into):
            into.append({k: 0 for k in _CONSUMER_SUMS} | {"metadata": {}})
        _sum_into(into[i], part, _CONSUMER_SUMS)
        for key in _CONSUMER_LAST:
            if key in part:
                into[i][key] = part[key]


def _merge_subscription(into: Json, part: Json) -> None:
    _sum_into(into, part, _SUBSCRIPTION_SUMS)
    into["type"] = part["type"]
    into["isDurable"] = into["durable"] = into.get("isDurable", False) or part["isDurable"]
    into["isReplicated"] = into["replicated"] = False
    into["allowOutOfOrderDelivery"] = (
        into.get("allowOutOfOrderDelivery", False) or part["allowOutOfOrderDelivery"]
    )
    if "keySharedMode" in part:
        into["keySharedMode"] = part["keySharedMode"]
    into.setdefault("consumersAfterMarkDeletePosition", {}).update(part["consumersAfterMarkDeletePosition"])
    into.setdefault("subscriptionProperties", {}).update(part["subscriptionProperties"])
    firsts = [
        t
        for t in (into.get("earliestMsgPublishTimeInBacklog", 0), part["earliestMsgPublishTimeInBacklog"])
        if t
    ]
    into["earliestMsgPublishTimeInBacklog"] = min(firsts, default=0)
    _merge_consumers(into.setdefault("consumers", []), part["consumers"])


def partitioned_stats(parts: Mapping[str, Json], *, per_partition: bool) -> Json:
    """Pulsar's ``PartitionedTopicStats``: the partitions' stats added up, ``metadata``, ``partitions``.

    Sums as Pulsar sums them; the average message size is the partitions' mean; publishers and each
    subscription's consumers are added index by index (so their names do not carry over, as in
    Pulsar); subscriptions are added by name.
    """
    out: Json = {k: 0 for k in _TOPIC_SUMS} | {"averageMsgSize": 0.0}
    publishers: list[Json] = []
    subscriptions: dict[str, Json] = {}
    firsts: list[int] = []
    for count, part in enumerate(parts.values(), start=1):
        _sum_into(out, part, _TOPIC_SUMS)
        out["averageMsgSize"] = (out["averageMsgSize"] * (count - 1) + part["averageMsgSize"]) / count
        for i, p in enumerate(part["publishers"]):
            if i == len(publishers):
                publishers.append(
                    {"msgRateIn": 0.0, "msgThroughputIn": 0.0, "averageMsgSize": 0.0, "count": 0}
                )
            agg = publishers[i]
            agg["count"] += 1
            agg["msgRateIn"] += p["msgRateIn"]
            agg["msgThroughputIn"] += p["msgThroughputIn"]
            agg["averageMsgSize"] = (agg["averageMsgSize"] * (agg["count"] - 1) + p["averageMsgSize"]) / agg[
                "count"
            ]
        for name, sub in part["subscriptions"].items():
            _merge_subscription(subscriptions.setdefault(name, {}), sub)
        if part["earliestMsgPublishTimeInBacklogs"]:
            firsts.append(part["earliestMsgPublishTimeInBacklogs"])
    full: Json = {
        "msgRateIn": out["msgRateIn"],
        "msgThroughputIn": out["msgThroughputIn"],
        "msgRateOut": out["msgRateOut"],
        "msgThroughputOut": out["msgThroughputOut"],
        "bytesInCounter": out["bytesInCounter"],
        "msgInCounter": out["msgInCounter"],
        "systemTopicBytesInCounter": 0,
        "bytesOutCounter": out["bytesOutCounter"],
        "msgOutCounter": out["msgOutCounter"],
        "bytesOutInternalCounter": 0,
        "averageMsgSize": out["averageMsgSize"],
        "msgChunkPublished": False,
        "storageSize": out["storageSize"],
        "backlogSize": out["backlogSize"],
        "backlogQuotaLimitSize": -1,
        "backlogQuotaLimitTime": -1,
        "oldestBacklogMessageAgeSeconds": -1,
        "publishRateLimitedTimes": out["publishRateLimitedTimes"],
        "earliestMsgPublishTimeInBacklogs": min(firsts, default=0),
        "offloadedStorageSize": out["offloadedStorageSize"],
        "lastOffloadLedgerId": 0,
        "lastOffloadSuccessTimeStamp": 0,
        "lastOffloadFailureTimeStamp": 0,
        "ongoingTxnCount": 0,
        "abortedTxnCount": 0,
        "committedTxnCount": 0,
        "publishers": [
            {
                "msgRateIn": p["msgRateIn"],
                "msgThroughputIn": p["msgThroughputIn"],
                "averageMsgSize": p["averageMsgSize"],
                "chunkedMessageRate": 0.0,
                "producerId": 0,
                "supportsPartialProducer": False,
            }
            for p in publishers
        ],
        "waitingPublishers": out["waitingPublishers"],
        "subscriptions": subscriptions,
        "replication": {},
        "nonContiguousDeletedMessagesRanges": out["nonContiguousDeletedMessagesRanges"],
        "nonContiguousDeletedMessagesRangesSerializedSize": out[
            "nonContiguousDeletedMessagesRangesSerializedSize"
        ],
        "delayedMessageIndexSizeInBytes": out["delayedMessageIndexSizeInBytes"],
        "compaction": {
            "lastCompactionRemovedEventCount": 0,
            "lastCompactionSucceedTimestamp": 0,
            "lastCompactionFailedTimestamp": 0,
            "lastCompactionDurationTimeInMills": 0,
        },
        "metadata": {"partitions": len(parts)},
        "partitions": dict(parts) if per_partition else {},
    }
    return full


# -- internal stats -----------------------------------------------------------------------------------


def _ledger(ledger_id: int, entries: int, size: int) -> Json:
    return {
        "ledgerId": ledger_id,
        "entries": entries,
        "size": size,
        "offloaded": False,
        "underReplicated": False,
    }


def internal_stats(topic: Topic, t: TopicFigures) -> Json:
    """Pulsar's ``PersistentTopicInternalStats`` of a topic: its ledgers and its cursors.

    A cursor's ``individuallyDeletedMessages`` is Pulsar's range string, cut at
    :data:`MAX_RANGES_SHOWN` ranges. Cursors live in the broker's own store, not a ledger:
    ``cursorLedger`` is -1, as Pulsar shows a cursor kept in its metadata store.
    """
    entries = {lid: n for lid, n, _ in t.ledgers}
    last = topic.log.last_position
    current_id, current_entries, current_size = t.ledgers[-1] if t.ledgers else (last.ledger_id, 0, 0)
    end = Position(last.ledger_id, last.entry_id + 1)
    cursors: Json = {}
    waiting = 0
    for s in t.subscriptions:
        sub = topic.subscriptions.get(s.name)
        if sub is None:
            continue
        caught_up = bool(s.consumers) and s.read_position >= end
        waiting += caught_up
        cursors[s.name] = {
            "markDeletePosition": str(s.mark_delete),
            "readPosition": str(s.read_position),
            "waitingReadOp": caught_up,
            "pendingReadOps": 0,
            "messagesConsumedCounter": t.entries_added - entries_between(s.mark_delete, last, entries),
            "cursorLedger": -1,
            "cursorLedgerLastEntry": -1,
            "individuallyDeletedMessages": range_string(sub.cursor.individually_deleted),
            "state": "Open",
            "active": bool(s.consumers),
            "numberOfEntriesSinceFirstNotAckedMessage": entries_between(
                s.mark_delete, s.read_position, entries
            ),
            "totalNonContiguousDeletedMessagesRange": s.ack_ranges,
            "subscriptionHavePendingRead": caught_up,
            "subscriptionHavePendingReplayRead": False,
            "properties": dict(getattr(sub.cursor, "properties", {}) or {}),
        }
    return {
        "entriesAddedCounter": t.entries_added,
        "numberOfEntries": t.entries,
        "totalSize": t.storage_size,
        "currentLedgerEntries": current_entries,
        "currentLedgerSize": current_size,
        "waitingCursorsCount": waiting,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": str(last),
        "state": "LedgerOpened",
        "ledgers": [_ledger(lid, n, b) for lid, n, b in t.ledgers] or [_ledger(current_id, 0, 0)],
        "cursors": cursors,
        "schemaLedgers": [],
        "compactedLedger": {
            "ledgerId": -1,
            "entries": -1,
            "size": -1,
            "offloaded": False,
            "underReplicated": False,
        },
    }
