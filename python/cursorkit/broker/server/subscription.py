"""A subscription: its cursor (and store, when durable), its consumers, and its dispatch model.

The dispatch itself is the model's (``dispatch/``: one class each for Exclusive and Failover,
Shared, Key_Shared); the subscription reads the topic's log after the cursor's mark-delete
(skipping what was acknowledged individually) for it, sends the frames it decides, and keeps what
outlives a model: the cursor and its store, the delayed tracker, durable redelivery counts. A
message with a deliver-at time waits in the delayed tracker (Shared and Key_Shared only, as in
Pulsar). Redelivery counts rise with every nack or redelivery request; the model's dispatcher is
their one owner (in memory, as in Pulsar; with ``durable_redelivery_counts`` its raises are also
journaled to the cursor store, see ``redeliveries.py``). A reader's subscription is
non-durable: its ``NonDurableCursor`` lives in memory only, with no store or directory, and the
topic drops it when its last consumer leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from itertools import repeat
from pathlib import Path

from cursorkit import Cursor, CursorStore, Position
from cursorkit.ackstate.non_durable import NonDurableCursor
from cursorkit.broker.log import MessageLog, Read
from cursorkit.broker.protocol.hot_frames import message_frames
from cursorkit.broker.server.batch_sizes import BatchSizes
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.cursor_stores import CursorStores, FileCursorStores
from cursorkit.broker.server.delayed_trackers import DelayedTracker, open_tracker
from cursorkit.broker.server.dispatch import DispatchModel, model_for
from cursorkit.broker.server.dispatch.model import SUB_TYPES
from cursorkit.broker.server.dispatch.shared import MAX_UNACKED_PER_CONSUMER
from cursorkit.broker.server.meters import Meter
from cursorkit.broker.server.redeliveries import DurableCounts
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.delayed import BucketDelayedDeliveryTracker, InMemoryDelayedDeliveryTracker
from cursorkit.errors import CursorkitError, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["MAX_UNACKED_PER_CONSUMER", "Subscription"]

log = logging.getLogger("cursorkit.broker")

_READ_BYTES = 4 * 1024 * 1024
"""The most a read of the log returns (at least one entry)."""
_ENTRIES_KEPT = 2_000
"""Read entries kept for sending before the cache is dropped (they are read again then)."""


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
        config: BrokerConfig,
        stores: CursorStores | None = None,
        topic: str = "",
        reader: NonDurableCursor | None = None,
        partition: int = -1,
    ) -> None:
        """A durable subscription opened (or made) in ``directory``; with ``reader``, a non-durable one."""
        self.name = name
        self.directory = directory
        self.log = log
        self.partition = partition
        """The topic's partition index (-1: not a partition), named in every message id sent."""
        self._clock = clock
        self._schedule = schedule
        self._stores = stores if stores is not None else FileCursorStores()
        self.store: CursorStore | None = None
        """The durable store of the cursor; None for a non-durable (reader's) subscription."""
        self.cursor: Cursor
        self.delayed: DelayedTracker
        self.durable: DurableCounts | None = None
        """The redelivery counts kept across restarts (``durable_redelivery_counts``), or None."""
        if reader is not None:
            self.cursor = reader
            self.cursor.set_ledger_sizes(log.ledger_sizes())
            self.delayed = InMemoryDelayedDeliveryTracker(tick_time_ms=config.tick_time_ms, clock=clock)
        else:
            if self._stores.exists(directory, name):
                self.store = self._stores.open(directory, name)
                self.cursor = self.store.recover(ledger_sizes=log.ledger_sizes())
            else:
                start = Position(log.first_position.ledger_id, -1) if initial_earliest else log.last_position
                self.store = self._stores.create(directory, name)
                self.cursor = Cursor(start, name=name)
                self.cursor.set_ledger_sizes(log.ledger_sizes())
                self.store.flush(self.cursor, full=True)
            self.delayed = open_tracker(config, directory, self.store, self.cursor, topic=topic, clock=clock)
            if config.durable_redelivery_counts:
                self.durable = DurableCounts(self.store, self.cursor)
        self._writing_ahead = False
        """Raised redelivery counts are being written: dispatch waits for them."""
        self.emptied_at: float | None = None
        """When a non-durable subscription lost its last consumer to a seek (it waits for them)."""
        self._trimmed = self.cursor.mark_delete_position
        self._config = config
        self._first_type = sub_type
        self.model: DispatchModel | None = None
        """The dispatch of the subscription's type, made with its first consumer."""
        self._read_at = self._after(self.cursor.mark_delete_position)
        self.read_batch = config.read_batch
        """Entries read from the log per read (the :class:`~.dispatch.Feed` attribute)."""
        self._entries: dict[Position, tuple[bytes, int]] = {}
        """Bytes and message counts of the last reads not sent yet (sent from here, not read again)."""
        self._per_entry = 1.0
        """Messages per entry, on average over the recent reads."""
        self.batch_sizes = BatchSizes(self.cursor)
        """The sizes of the batches sent, for the batch-index ACKs naming them."""
        self._seeks = 0
        """Seeks so far: a batch-index ACK that waited for a read is dropped if one came meanwhile."""
        self._flushed = self.cursor.mutations
        self.damage = ""
        """The damage that last stopped a dispatch (logged once by the topic), or ""."""
        self.sent = Meter()
        """What was sent to its consumers, redeliveries too (for the stats)."""
        self.redelivered = Meter()
        """What its consumers gave back to be sent again."""

    # -- consumers ---------------------------------------------------------------------------------

    @property
    def consumers(self) -> list[Consumer]:
        """The consumers, in the model's order (Failover: the active one first)."""
        return self.model.consumers if self.model is not None else []

    @property
    def sub_type(self) -> int:
        """The subscription's type: its model's, or the type it was made with."""
        return self.model.sub_type if self.model is not None else self._first_type

    @property
    def type_name(self) -> str:
        """Pulsar's name of the subscription type."""
        return SUB_TYPES.get(self.sub_type, "Exclusive")

    @property
    def read_position(self) -> Position:
        """The next entry to read from the log (Pulsar's cursor read position)."""
        return self._read_at

    @property
    def is_durable(self) -> bool:
        """Whether the cursor is kept in a store (a reader's subscription is not)."""
        return self.store is not None

    def add_consumer(self, consumer: Consumer, request: SubscribeRequest) -> None:
        """Adds a consumer; a refusal leaves the subscription as it was.

        Refused: another type while consumers are connected, a second Exclusive consumer, another
        Key_Shared mode, sticky ranges another consumer holds. With no consumer connected, a
        consumer of another type (or a Key_Shared one) starts a new model.
        """
        model = self.model
        if model is not None and model.consumers:
            if request.sub_type != model.sub_type:
                raise ProtocolError(
                    f"subscription {self.name!r} is {model.type_name}, not {SUB_TYPES.get(request.sub_type)}",
                    server_error=api.ConsumerBusy,
                )
            model.add_consumer(consumer, request)
        elif model is not None and model.kept_when_empty and model.fits(request):
            model.add_consumer(consumer, request)
        else:
            fresh = model_for(
                request,
                name=self.name,
                cursor=self.cursor,
                delayed=self.delayed,
                config=self._config,
                log=self.log,
                clock_s=lambda: self._clock() / 1000.0,
            )
            fresh.add_consumer(consumer, request)
            if model is not None and model.kept_when_empty:
                # What the old model queued or got back is read again, for the new one.
                self._read_at = self._after(self.cursor.mark_delete_position)
                self._entries.clear()
            if model is not None and model.sub_type != fresh.sub_type:
                self.delayed.clear()  # re-read: what the new type delays is added again
            if self.durable is not None:
                fresh.dispatcher.journal_redelivery_counts()
            self.model = fresh
        self.emptied_at = None

    def remove_consumer(self, consumer: Consumer, *, lost: bool = False, seeking: bool = False) -> None:
        """Drops a consumer; what it held unacked goes to the others.

        Redelivery counts are unchanged, as in Pulsar, unless they are durable and the consumer's
        connection was ``lost`` (it crashed holding them): then each message it held counts one more.
        A non-durable subscription left by its last consumer is dropped by the topic, unless the
        consumers left because of a seek (``seeking``): they come back to the sought position.
        """
        model = self.model
        if model is None or consumer not in model.consumers:
            return
        returned = model.remove_consumer(consumer)
        consumer.connected = False
        rewind = model.take_rewind()  # the last consumer left: read again after mark-delete
        if rewind is not None:
            self._read_at = self._after(rewind)
        if not model.consumers and seeking:
            self.emptied_at = self._clock() / 1000.0
        if lost and self.durable is not None:
            model.dispatcher.raise_redelivery_counts(returned)
        self._record_raises(model)

    # -- flow, acks, redelivery ----------------------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """The consumer asks for ``permits`` more messages."""
        consumer.permits += permits
        if self.model is not None:
            self.model.flow(consumer, permits)

    def ack_batch_indexes(self, ack: api.CommandAck) -> list[Position] | Awaitable[list[Position]]:
        """Applies an ACK's batch-index parts (``ack_set``: the unacked bits); the whole entries it names.

        A batch's size comes from memory (the batches sent, the cursor's partial batches). When one
        named with an ``ack_set`` is unknown there (acked after a restart, before it was sent
        again), its count is read off the event loop: then an awaitable applies the whole ACK once
        it is read, as it would have applied at once (see :meth:`_ack_after_read`).
        """
        if ack.ack_type != api.CommandAck.Cumulative:
            unknown = [
                position
                for mid in ack.message_id
                if len(mid.ack_set)
                and self.batch_sizes.size_of(position := Position(mid.ledgerId, mid.entryId)) is None
            ]
            if unknown:
                return self._ack_after_read(ack, unknown, self._seeks)
        return self._apply_ack(ack, {})

    def _apply_ack(self, ack: api.CommandAck, read: dict[Position, int]) -> list[Position]:
        """Applies the batch-index parts (sizes from memory, else ``read``); the whole entries named."""
        cumulative = ack.ack_type == api.CommandAck.Cumulative
        whole: list[Position] = []
        for mid in ack.message_id:
            position = Position(mid.ledgerId, mid.entryId)
            if not cumulative and len(mid.ack_set):
                size = self.batch_sizes.size_of(position) or read.get(position, 1)
                if self._ack_batch_indexes(position, mid.ack_set, size):
                    continue
            whole.append(position)
        return whole

    async def _ack_after_read(
        self, ack: api.CommandAck, unknown: list[Position], seeks: int
    ) -> list[Position]:
        """Reads the unknown batches' counts on a worker thread, then applies the ACK.

        The result is the one of an ACK applied when it came: an entry acked whole (or passed by
        mark-delete) meanwhile stays acked, as the cursor ignores batch indexes of acked entries;
        after a seek meanwhile, which forgets every earlier ack, nothing is applied.
        """
        read = await asyncio.to_thread(self._message_counts, unknown)
        if self._seeks != seeks:
            return []
        self.batch_sizes.remember(list(read), list(read.values()))
        return self._apply_ack(ack, read)

    def ack_positions(self, consumer: Consumer, positions: list[Position], *, cumulative: bool) -> None:
        """Acks whole entries: individually, or cumulatively up to each (Exclusive and Failover only)."""
        model = self.model
        if model is None:
            return
        if cumulative:
            model.ack_cumulative(positions)
        elif positions:
            model.ack(consumer, positions)

    def _ack_batch_indexes(self, position: Position, ack_set: Sequence[int], size: int) -> bool:
        """Acks the batch indexes an ``ack_set`` leaves unset; False when it leaves none (the whole entry).

        The words are read only as far as the entry's real batch ``size`` (the log's count, not the
        client's), and the cursor ANDs them in word by word: a huge ``ack_set`` costs no more than
        the batch's own words. Bits past the batch are ignored; missing words leave nothing unacked.
        """
        words = list(ack_set[: -(-size // 64)])
        if size % 64 and len(words) == -(-size // 64):
            words[-1] &= (1 << (size % 64)) - 1
        if not any(words):
            return False
        self.cursor.ack_batch_set(position, words, size)
        return True

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        """Sends unacked messages again (all the consumer's when ``positions`` is None), counting each.

        Only messages the consumer holds go back (and count), as in Pulsar.
        """
        model = self.model
        if model is None:
            return
        n = model.redeliver(consumer, None if positions is None else list(positions))
        consumer.redelivered.add(n, n, 0)
        self.redelivered.add(n, n, 0)
        self._record_raises(model)

    def _record_raises(self, model: DispatchModel) -> None:
        """Durable counts: the raises the dispatcher journaled go to the store (written ahead)."""
        if self.durable is not None:
            self.durable.record(model.dispatcher.take_raised_counts())

    def seek(self, position: Position) -> None:
        """Delivers ``position`` next, forgetting acks after it (the caller reconnects the consumers)."""
        self.cursor.reset(position)
        if self.durable is not None:
            self.durable.reset()
        if self.model is not None:
            self.model.reset()
        self._entries.clear()
        self._read_at = position
        self.delayed.clear()
        self._seeks += 1

    def mark_delete_moved(self) -> None:
        """Mark-delete was moved forward outside the dispatch (an admin skip, clear-backlog, expiry).

        Reading resumes after it: the entries it passed are not read only to be dropped. What the
        model queued or consumers hold below it is dropped by the dispatchers as acknowledged.
        """
        after = self._after(self.cursor.mark_delete_position)
        if after > self._read_at:
            self._read_at = after
            self._entries.clear()

    # -- dispatch ------------------------------------------------------------------------------------

    @staticmethod
    def _after(position: Position) -> Position:
        return Position(position.ledger_id, position.entry_id + 1)

    def _message_counts(self, positions: list[Position]) -> dict[Position, int]:
        """The message count of each entry, read from the log (a worker thread's call: a disk read).

        A trimmed or unknown entry counts as one. One named twice is read once.
        """
        counts: dict[Position, int] = {}
        for position in dict.fromkeys(positions):
            try:
                counts[position] = self.log.read(position).num_messages
            except Exception:  # noqa: BLE001 - a trimmed or unknown entry: count it as one
                counts[position] = 1
        return counts

    def send(self, consumer: Consumer, positions: Sequence[Position], counts: Sequence[int]) -> None:
        """Sends a dispatch round's entries to one consumer: their frames built in one call.

        The entries come from the last reads (read again if they were dropped), as columns: no
        Python call per entry here but the C-level map, transpose and sum.
        """
        cached = list(map(self._entries.pop, positions, repeat(None)))
        if None in cached:  # redeliveries, or entries the cache dropped: read again, a run per pread
            again = self.log.read_positions([p for c, p in zip(cached, positions, strict=True) if c is None])
            refill = zip(again.datas, again.counts, strict=True)
            cached = [c if c is not None else next(refill) for c in cached]
        datas, sizes = zip(*cached, strict=True)
        ack_sets: list[list[int] | None] | None = None
        if self.cursor.batch_count:  # some batch is partly acked: its frame names what is left
            ack_sets = list(map(self._ack_set, positions))
        sent = sum(sizes)
        consumer.permits -= sent
        size = sum(map(len, datas))
        consumer.sent.add(sent, len(sizes), size)
        self.sent.add(sent, len(sizes), size)
        if max(sizes) > 1:  # batches: their sizes bound the batch-index ACKs that will name them
            self.batch_sizes.remember(positions, sizes)
        consumer.send(
            message_frames(
                consumer.consumer_id,
                positions if isinstance(positions, list) else list(positions),
                counts if isinstance(counts, list) else list(counts),
                list(datas),
                ack_sets,
                self.partition,
            )
        )

    def _ack_set(self, position: Position) -> list[int] | None:
        """The ``ack_set`` words of a partly acked batch (bits set: not yet acked), else None."""
        batch = self.cursor.batch(position)
        if batch is None:
            return None
        words = batch[1]
        return [int.from_bytes(words[i : i + 8], "little", signed=True) for i in range(0, len(words), 8)]

    def _read_before_damage(self, n: int) -> Read:
        """The entries of a read that come before its damaged one, one by one; raises at the damage."""
        out = Read([], [], [], [])
        at = self._read_at
        for _ in range(n):
            try:
                got = self.log.read_columns(at, 1, _READ_BYTES)
            except CursorkitError:
                if not out:
                    raise
                break
            if not got:
                break
            out.extend(got)
            at = self._after(got.positions[0])
        return out

    def read(self, messages_wanted: int) -> Read:
        """Reads entries after the read position for ``messages_wanted`` messages (at least one entry).

        A dispatcher's permits count messages: the count of entries is scaled by the average batch
        of the recent reads. The read is kept (bytes and counts by position) until sent.
        """
        n = max(1, min(self.read_batch, int(messages_wanted / self._per_entry)))
        try:
            got = self.log.read_columns(self._read_at, n, _READ_BYTES)
        except CursorkitError:
            got = self._read_before_damage(n)
        if got:
            if self.durable is not None and self.model is not None:
                self.durable.seed(self.model.dispatcher, got.positions)
            self._read_at = self._after(got.positions[-1])
            if len(self._entries) > _ENTRIES_KEPT:
                self._entries.clear()
            self._entries.update(zip(got.positions, zip(got.datas, got.counts, strict=True), strict=True))
            batch = sum(got.counts) / len(got)
            self._per_entry = 0.8 * self._per_entry + 0.2 * batch
        return got

    def dispatch(self) -> None:
        """Sends what can be sent now: due delayed messages and redeliveries first, then new entries.

        Raised durable redelivery counts are written first, off the event loop: the dispatch waits
        for them (a count a client saw never goes back after a crash) and runs again once they are.
        """
        if self.model is None or not self.model.consumers or self._writing_ahead:
            return
        if self.durable is not None and self.durable.dirty:
            self._write_ahead()
            return
        assert self.model is not None
        more = self.model.dispatch(self)
        self._arm_delayed(soon=more)

    def _arm_delayed(self, *, soon: bool = False) -> None:
        """Wakes the topic's dispatch when the next delayed message is due (at once when ``soon``)."""
        if soon:
            self._schedule(0.0)  # the dispatch it wakes arms the delayed timer again
            return
        nxt = self.delayed.next_delivery_time()
        if nxt is not None:
            self._schedule(max(0.0, (nxt - self._clock()) / 1000.0))

    # -- durability ----------------------------------------------------------------------------------

    def _write_ahead(self) -> None:
        """Writes the raised counts on a worker thread; the subscription dispatches again after."""
        durable = self.durable
        assert durable is not None
        self._writing_ahead = True

        def written(done: asyncio.Future[None]) -> None:
            self._writing_ahead = False
            failed = None if done.cancelled() else done.exception()
            if failed is not None:  # a store closed meanwhile (the topic going): nothing to send to
                log.warning("subscription %r: redelivery counts not written: %s", self.name, failed)
            self._schedule(0.0)

        asyncio.get_running_loop().run_in_executor(None, durable.write_ahead).add_done_callback(written)

    def write_cursor(self) -> None:
        """The disk half of a flush, made off the event loop: raised counts, then the acks since the last.

        Safe beside the loop: the cursor and the counts are locked types, the store has its lock,
        and a store closed meanwhile (the subscription deleted) is skipped.
        """
        store = self.store
        if store is None or store.closed:  # a reader's cursor is never written
            return
        if self.durable is not None and self.durable.dirty:  # raised with no consumer to send to
            self.durable.write_ahead()
        mutations = self.cursor.mutations  # acks landing during the write are flushed next time
        if mutations != self._flushed:
            store.flush(self.cursor)
            self._flushed = mutations
            if self.durable is not None:
                self.durable.prune()

    def flush(self) -> None:
        """Makes the acks durable if any arrived since the last flush, on the calling thread.

        The broker's periodic flush calls :meth:`write_cursor` off the loop, then
        :meth:`after_flush` on it; closing calls both here.
        """
        self.write_cursor()
        self.after_flush()

    def after_flush(self) -> None:
        """The event-loop half of a flush (the bucket tracker is the loop's).

        The remembered batch sizes of acked entries go. A bucket tracker's index is trimmed below
        mark-delete, and what damaged snapshots lost is read again from the log.
        """
        self.batch_sizes.prune()
        if isinstance(self.delayed, BucketDelayedDeliveryTracker):
            md = self.cursor.mark_delete_position
            if md != self._trimmed:
                self.delayed.trim(md)
                self._trimmed = md
            for first_ledger, _last in self.delayed.take_replay_ranges():
                self._read_at = min(self._read_at, max(self._after(md), Position(first_ledger, 0)))

    def close(self) -> None:
        """Flushes and closes the store."""
        try:
            if self.store is not None and not self.store.closed:
                self.flush()
        finally:
            if self.store is not None:
                self.store.close()
            self.delayed.close()

    def delete(self) -> None:
        """Unsubscribe: the store and its directory go (a reader's subscription has neither)."""
        self.delayed.close()
        if self.store is not None:
            self.store.close()
            self._stores.delete(self.directory, self.name)
