"""A durable subscription: its cursor and its store, its consumers, and the dispatch of its type.

Exclusive and Failover send everything to one active consumer; Shared sends each entry to the next
consumer with permits, redeliveries first; Key_Shared hands the read to cursorkit's
``KeySharedDispatcher``. Entries are read from the topic's log after the cursor's mark-delete,
skipping what was acknowledged individually; a message with a deliver-at time waits in the delayed
tracker and comes back through the replay queue when due. Redelivery counts rise with every nack
or redelivery request (in memory, as in Pulsar).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import cast

from cursorkit import Cursor, Position
from cursorkit.broker.log import Entry, MessageLog
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import encode_command, encode_payload_command, read_stored
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.cursor_stores import CursorStores, FileCursorStores
from cursorkit.delayed import InMemoryDelayedDeliveryTracker
from cursorkit.errors import ProtocolError
from cursorkit.keyshared import ConsistentHashingSelector, ExclusiveRangeSelector, KeySharedDispatcher
from cursorkit.keyshared.dispatcher import Selector
from cursorkit.keyshared.hashing import hash_many, slots
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["MAX_UNACKED_PER_CONSUMER", "Subscription"]

MAX_UNACKED_PER_CONSUMER = 50_000
"""Pulsar's ``maxUnackedMessagesPerConsumer``: a consumer holding this many gets no more until it acks."""

_SUB_TYPES: dict[int, str] = {
    api.CommandSubscribe.Exclusive: "Exclusive",
    api.CommandSubscribe.Shared: "Shared",
    api.CommandSubscribe.Failover: "Failover",
    api.CommandSubscribe.Key_Shared: "Key_Shared",
}


def _metadata(entry: Entry) -> api.MessageMetadata:
    return read_stored(entry.data)[0]


class Subscription:
    """One subscription of one topic; every method runs on the broker's event loop."""

    def __init__(
        self,
        name: str,
        directory: Path,
        log: MessageLog,
        *,
        sub_type: int,
        initial_earliest: bool,
        clock: Callable[[], int],
        schedule: Callable[[float], None],
        stores: CursorStores | None = None,
    ) -> None:
        self.name = name
        self.directory = directory
        self.log = log
        self.sub_type = sub_type
        self._clock = clock
        self._schedule = schedule
        self._stores = stores if stores is not None else FileCursorStores()
        if self._stores.exists(directory, name):
            self.store = self._stores.open(directory, name)
            self.cursor = self.store.recover(ledger_sizes=log.ledger_sizes())
        else:
            start = Position(log.first_position.ledger_id, -1) if initial_earliest else log.last_position
            self.store = self._stores.create(directory, name)
            self.cursor = Cursor(start, name=name)
            self.cursor.set_ledger_sizes(log.ledger_sizes())
            self.store.flush(self.cursor, full=True)
        self.delayed = InMemoryDelayedDeliveryTracker(tick_time_ms=1, clock=clock)
        self.consumers: list[Consumer] = []
        self.redeliveries: dict[Position, int] = {}
        self._replay: set[Position] = set()
        self._read_at = self._after(self.cursor.mark_delete_position)
        self._next = 0
        self._flushed = self.cursor.mutations
        self._key_shared: KeySharedDispatcher | None = None

    # -- consumers ---------------------------------------------------------------------------------

    @property
    def type_name(self) -> str:
        """Pulsar's name of the subscription type."""
        return _SUB_TYPES.get(self.sub_type, "Exclusive")

    def add_consumer(self, consumer: Consumer, sub_type: int, key_shared: api.KeySharedMeta | None) -> None:
        """Adds a consumer; another type than the subscription's, or a second Exclusive one, is refused."""
        if self.consumers and sub_type != self.sub_type:
            raise ProtocolError(
                f"subscription {self.name!r} is {self.type_name}, not {_SUB_TYPES.get(sub_type)}",
                server_error=api.ConsumerBusy,
            )
        if self.sub_type == api.CommandSubscribe.Exclusive and self.consumers:
            raise ProtocolError(
                f"exclusive subscription {self.name!r} already has a consumer", server_error=api.ConsumerBusy
            )
        self.sub_type = sub_type
        if sub_type == api.CommandSubscribe.Key_Shared:
            if self._key_shared is None:
                sticky = key_shared is not None and key_shared.keySharedMode == api.STICKY
                selector = cast(Selector, ExclusiveRangeSelector() if sticky else ConsistentHashingSelector())
                self._key_shared = KeySharedDispatcher(
                    selector=selector,
                    cursor=self.cursor,
                    mode="out-of-order"
                    if key_shared is not None and key_shared.allowOutOfOrderDelivery
                    else "draining",
                    delayed=self.delayed,
                )
            self._key_shared.add_consumer(consumer, permits=0)
        self.consumers.append(consumer)
        if self.sub_type == api.CommandSubscribe.Failover:
            self.consumers.sort(key=lambda c: (c.priority, c.name))

    def remove_consumer(self, consumer: Consumer) -> None:
        """Drops a consumer; what it held unacked goes to the others (redelivery counts unchanged)."""
        if consumer not in self.consumers:
            return
        active_before = self._active()
        self.consumers.remove(consumer)
        consumer.connected = False
        if self._key_shared is not None and self.sub_type == api.CommandSubscribe.Key_Shared:
            self._key_shared.remove_consumer(consumer)
        else:
            self._replay.update(consumer.release_all())
        consumer.release_all()
        if active_before is consumer and self.consumers:
            self._active_changed()

    def _active(self) -> Consumer | None:
        return self.consumers[0] if self.consumers else None

    def _active_changed(self) -> None:
        """A new active consumer (Failover): everything unacked is sent again from mark-delete, in order."""
        for c in self.consumers:
            self._replay.update(c.release_all())
            c.send(_active_change(c.consumer_id, c is self.consumers[0]))

    # -- flow, acks, redelivery ----------------------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """The consumer asks for ``permits`` more messages."""
        consumer.permits += permits
        if self._key_shared is not None and self.sub_type == api.CommandSubscribe.Key_Shared:
            self._key_shared.add_permits(consumer, permits)

    def ack(self, consumer: Consumer, ack: api.CommandAck) -> None:
        """Individual or cumulative acks, whole entries or batch indexes (``ack_set``: the unacked bits)."""
        for mid in ack.message_id:
            position = Position(mid.ledgerId, mid.entryId)
            if ack.ack_type == api.CommandAck.Cumulative:
                self._ack_cumulative(consumer, position)
                continue
            if len(mid.ack_set):
                size = consumer.pending.get(position) or self._message_count(position)
                unacked = [i for i in range(size) if (mid.ack_set[i // 64] >> (i % 64)) & 1] if size else []
                if unacked:
                    for i in range(size):
                        if i not in unacked:
                            self.cursor.ack_batch_index(position, i, size)
                    continue
            self._ack_entry(consumer, position)

    def _ack_entry(self, consumer: Consumer, position: Position) -> None:
        consumer.release(position)
        self.redeliveries.pop(position, None)
        if self._key_shared is not None and self.sub_type == api.CommandSubscribe.Key_Shared:
            self._key_shared.ack(consumer, position)
        else:
            self.cursor.ack(position)

    def _ack_cumulative(self, consumer: Consumer, position: Position) -> None:
        self.cursor.ack_cumulative(position)
        for p in [
            p
            for p in consumer.pending
            if (p.ledger_id, p.entry_id) <= (position.ledger_id, position.entry_id)
        ]:
            consumer.release(p)
            self.redeliveries.pop(p, None)

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        """Sends unacked messages again (all the consumer's when ``positions`` is None), counting each."""
        chosen = (
            list(consumer.pending) if positions is None else [p for p in positions if p in consumer.pending]
        )
        if self._key_shared is not None and self.sub_type == api.CommandSubscribe.Key_Shared:
            if chosen:
                self._key_shared.nack(consumer, chosen)
            return
        for p in chosen:
            consumer.permits += consumer.release(p)
            self.redeliveries[p] = self.redeliveries.get(p, 0) + 1
        self._replay.update(chosen)

    def seek(self, position: Position) -> None:
        """Delivers ``position`` next, forgetting acks after it (the caller reconnects the consumers)."""
        self.cursor.reset(position)
        self._replay.clear()
        self.redeliveries.clear()
        for c in self.consumers:
            c.release_all()
        self._read_at = position
        self.delayed.clear()

    # -- dispatch ------------------------------------------------------------------------------------

    @staticmethod
    def _after(position: Position) -> Position:
        return Position(position.ledger_id, position.entry_id + 1)

    def _message_count(self, position: Position) -> int:
        try:
            return self.log.read(position).num_messages
        except Exception:  # noqa: BLE001 - a trimmed or unknown entry: count it as one
            return 1

    @staticmethod
    def _delayed_until(meta: api.MessageMetadata) -> int:
        return meta.deliver_at_time if meta.HasField("deliver_at_time") else 0

    @staticmethod
    def _key_of(meta: api.MessageMetadata) -> bytes:
        if meta.HasField("ordering_key"):
            return meta.ordering_key
        return meta.partition_key.encode() if meta.HasField("partition_key") else b""

    def _send(self, consumer: Consumer, entry: Entry) -> None:
        count = self.redeliveries.get(entry.position, 0)
        ack_set = None
        batch = self.cursor.batch(entry.position)
        if batch is not None:
            words = batch[1]
            ack_set = [
                int.from_bytes(words[i : i + 8], "little", signed=True) for i in range(0, len(words), 8)
            ]
        consumer.hold(entry.position, entry.num_messages)
        consumer.permits -= entry.num_messages
        consumer.send(_message(consumer.consumer_id, entry, count, ack_set))

    @staticmethod
    def _can_take(consumer: Consumer) -> bool:
        """Permits left, fewer than ``MAX_UNACKED_PER_CONSUMER`` unacked, and a connection that keeps up."""
        return consumer.permits > 0 and consumer.unacked < MAX_UNACKED_PER_CONSUMER and consumer.writable()

    def _choose(self) -> Consumer | None:
        if self.sub_type in (api.CommandSubscribe.Exclusive, api.CommandSubscribe.Failover):
            active = self._active()
            return active if active is not None and self._can_take(active) else None
        ready = [c for c in self.consumers if self._can_take(c)]
        if not ready:
            return None
        self._next = (self._next + 1) % len(ready)
        return ready[self._next]

    def dispatch(self) -> None:
        """Sends what can be sent now: due delayed messages and redeliveries first, then new entries."""
        if not self.consumers:
            return
        if self.sub_type == api.CommandSubscribe.Key_Shared and self._key_shared is not None:
            self._dispatch_key_shared()
            return
        now = self._clock()
        due = self.delayed.get_scheduled_messages(10_000) if self.delayed.has_message_available() else None
        if due is not None:
            self._replay.update(Position(int(ledger), int(entry)) for ledger, entry in due)
        for position in sorted(self._replay, key=lambda p: (p.ledger_id, p.entry_id)):
            if self.cursor.is_acked(position):
                self._replay.discard(position)
                continue
            consumer = self._choose()
            if consumer is None:
                return
            self._replay.discard(position)
            self._send(consumer, self.log.read(position))
        while self._choose() is not None:
            entries = self.log.read_from(self._read_at, self._read_batch, 4 * 1024 * 1024)
            if not entries:
                break
            for entry in entries:
                self._read_at = self._after(entry.position)
                if self.cursor.is_acked(entry.position):
                    continue
                at = self._delayed_until(_metadata(entry))
                if at > now and self.delayed.add_message(
                    entry.position.ledger_id, entry.position.entry_id, at
                ):
                    continue
                consumer = self._choose()
                if consumer is None:  # permits ran out inside the batch: read it again next time
                    self._read_at = entry.position
                    break
                self._send(consumer, entry)
        self._arm_delayed()

    _read_batch = 100

    def _dispatch_key_shared(self) -> None:
        ks = self._key_shared
        assert ks is not None
        while ks.should_read():
            n = ks.max_entries_to_read()
            entries = (
                self.log.read_from(self._read_at, min(n, self._read_batch), 4 * 1024 * 1024) if n else []
            )
            if not entries:
                break
            self._read_at = self._after(entries[-1].position)
            metas = [_metadata(e) for e in entries]  # each entry's metadata parsed once
            ks.add_read(
                [e.position for e in entries],
                slots(hash_many([self._key_of(m) for m in metas]), ks.slot_kind),  # one call for the read
                [self._delayed_until(m) for m in metas],
            )
        for consumer, positions in ks.dispatch():
            for p in positions:
                entry = self.log.read(p)
                self.redeliveries[p] = ks.redelivery_count(p)
                self._send(consumer, entry)
        self._arm_delayed()

    def _arm_delayed(self) -> None:
        nxt = self.delayed.next_delivery_time()
        if nxt is not None:
            self._schedule(max(0.0, (nxt - self._clock()) / 1000.0))

    # -- durability ----------------------------------------------------------------------------------

    def flush(self) -> None:
        """Makes the acks durable if any arrived since the last flush."""
        if self.cursor.mutations != self._flushed:
            self.store.flush(self.cursor)
            self._flushed = self.cursor.mutations

    def close(self) -> None:
        """Flushes and closes the store."""
        try:
            if not self.store.closed:
                self.flush()
        finally:
            self.store.close()
            self.delayed.close()

    def delete(self) -> None:
        """Unsubscribe: the store and its directory go."""
        self.store.close()
        self.delayed.close()
        self._stores.delete(self.directory, self.name)


def _message(consumer_id: int, entry: Entry, redelivery_count: int, ack_set: list[int] | None) -> bytes:
    p = entry.position
    cmd = commands.message(
        consumer_id, p.ledger_id, p.entry_id, redelivery_count=redelivery_count, ack_set=ack_set
    )
    return encode_payload_command(cmd, entry.data)


def _active_change(consumer_id: int, active: bool) -> bytes:
    return encode_command(commands.active_consumer_change(consumer_id, active))
