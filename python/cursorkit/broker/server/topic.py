"""A topic on disk: its message log, its subscriptions, and the group commit of what producers send.

SENDs that arrive while an append is being fsynced wait for the next one, which takes them all:
one write and one fsync for many receipts, each receipt only after its entry is durable. Once a
subscription's mark-delete has passed whole ledgers that every subscription has consumed, those
ledgers are deleted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path

from cursorkit import Position
from cursorkit.ackstate.non_durable import LATEST, NonDurableCursor
from cursorkit.broker.log import MessageLog
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.cursor_stores import CursorStores, FileCursorStores
from cursorkit.broker.server.meters import Meter, Publisher
from cursorkit.broker.server.names import TopicName
from cursorkit.broker.server.paths import ensure_directory, subscription_component, topic_directory
from cursorkit.broker.server.producer_access import ProducerAccess
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.broker.server.subscription import Subscription
from cursorkit.errors import CursorkitError, PersistFailed, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["ProducerKey", "Row", "Stored", "StoredMany", "Topic"]

Stored = Callable[[Position | Exception], None]
"""Told where a published entry was stored, once it is durable, or why it was not."""
StoredMany = Callable[[list[Position] | Exception], None]
"""Told where published entries were stored, once durable, or why they were not."""
Row = tuple[bytes, int, int]
"""One entry to append: its stored bytes, publish time (ms) and message count."""
ProducerKey = tuple[Hashable, int]
"""A producer: what holds it (its connection, which a topic need not know) and its id there."""

log = logging.getLogger("cursorkit.broker")

_SEEK_RETURN_S = 60.0
"""How long a reader's subscription waits for its consumers to come back after a seek."""


def _clock() -> int:
    return time.time_ns() // 1_000_000


class Topic:
    """One persistent topic (or one partition of a partitioned topic)."""

    def __init__(
        self, name: TopicName, root: Path, config: BrokerConfig, stores: CursorStores | None = None
    ) -> None:
        """Opens the log (``BlockingIOError`` while another broker has it open), then the subscriptions."""
        self.name = name
        self.directory = topic_directory(root / "topics", name.segments, sync=config.sync)
        self.config = config
        self.log = MessageLog.open(
            self.directory / "log", segment_bytes=config.segment_bytes, sync=config.sync
        )
        self.subscriptions: dict[str, Subscription] = {}
        self._pending: list[tuple[list[Row], StoredMany]] = []
        self._committing = False
        self._creating: dict[str, asyncio.Task[Subscription]] = {}
        self._removing: dict[str, asyncio.Future[None]] = {}
        """Subscriptions whose files are being deleted: one of that name is made only after."""
        """Subscriptions being made off the loop, by name."""
        self._timer: asyncio.TimerHandle | None = None
        self.producer_names: Counter[str] = Counter()
        """The producers on the topic, by name (a reconnecting one may briefly hold its name twice)."""
        self.producers = 0
        """How many producers are on the topic."""
        self.access: ProducerAccess[ProducerKey] = ProducerAccess()
        """Who may produce here (access modes, the exclusive holder, its waiters, the epoch)."""
        self.clock: Callable[[], int] = _clock
        self.received = Meter()
        """What was stored since the topic was opened (counted once durable)."""
        self.publishers: dict[ProducerKey, Publisher] = {}
        """The producers on the topic, by key, with what each sent (for the stats)."""
        self.stores = stores if stores is not None else FileCursorStores()
        try:
            for sub_name in self.stores.names(self.directory / "subscriptions"):
                self.subscriptions[sub_name] = self._open_subscription(sub_name, 0, earliest=False)
        except BaseException:
            self.close()
            raise

    def _open_subscription(self, name: str, sub_type: int, *, earliest: bool) -> Subscription:
        directory = ensure_directory(
            self.directory / "subscriptions", subscription_component(name), name, sync=self.config.sync
        )
        return Subscription(
            name,
            directory,
            self.log,
            sub_type=sub_type,
            initial_earliest=earliest,
            clock=self.clock,
            schedule=self._schedule_dispatch,
            config=self.config,
            stores=self.stores,
            topic=self.name.full,
            partition=self.partition,
        )

    @property
    def partition(self) -> int:
        """The topic's partition index; -1 when it is not a partition of a partitioned topic."""
        index = self.name.partition
        return -1 if index is None else index

    def add_reader(self, request: SubscribeRequest) -> Subscription:
        """A non-durable subscription (a reader's), made in memory at the start the request names.

        Nothing is written: it is not reopened after a restart, and the topic drops it when its
        last consumer leaves. A rollback duration starts it at the first message published within
        that many seconds of now.
        """
        log = self.log
        start = request.start
        inclusive = False
        if request.rollback_ms:
            found = log.find_by_time(self.clock() - request.rollback_ms)
            start, inclusive = (LATEST, False) if found > log.last_position else (found, True)
        cursor = NonDurableCursor.starting_at(
            start,
            first=log.first_position,
            last=log.last_position,
            inclusive=inclusive,
            initial=request.initial,
            name=request.name,
        )
        sub = Subscription(
            request.name,
            self.directory / "subscriptions",
            log,
            sub_type=request.sub_type,
            initial_earliest=False,
            clock=self.clock,
            schedule=self._schedule_dispatch,
            config=self.config,
            stores=self.stores,
            topic=self.name.full,
            reader=cursor,
            partition=self.partition,
        )
        self.subscriptions[request.name] = sub
        return sub

    def drop_if_unused(self, sub: Subscription) -> None:
        """Drops a non-durable subscription its last consumer left (unless they left for a seek)."""
        unused = not sub.is_durable and not sub.consumers and sub.emptied_at is None
        if unused and self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
            sub.delete()

    def _drop_abandoned_readers(self) -> None:
        """Drops non-durable subscriptions whose consumers left for a seek and did not come back."""
        now = self.clock() / 1000.0
        for sub in list(self.subscriptions.values()):
            if sub.emptied_at is not None and not sub.consumers and now - sub.emptied_at > _SEEK_RETURN_S:
                sub.emptied_at = None
                self.drop_if_unused(sub)

    def subscription(self, name: str, sub_type: int, *, earliest: bool) -> Subscription:
        """The subscription ``name``, made now at the initial position when new.

        Blocking (its store is created and flushed): the broker makes new ones off the loop with
        :meth:`add_subscription`.
        """
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = self._open_subscription(name, sub_type, earliest=earliest)
        return sub

    async def add_subscription(self, name: str, sub_type: int, *, earliest: bool) -> Subscription:
        """The subscription ``name``, made off the loop at the initial position when new.

        Refused with NotAllowedError past ``max_subscriptions_per_topic`` (Pulsar's
        ``maxSubscriptionsPerTopic``; each subscription holds a few file descriptors).
        """
        sub = self.subscriptions.get(name)
        if sub is not None:
            return sub
        task = self._creating.get(name)
        if task is None:
            limit = self.config.max_subscriptions_per_topic
            if limit and len(self.subscriptions) + len(self._creating) >= limit:
                raise ProtocolError(
                    f"{self.name.full} reached its maximum of {limit} subscriptions",
                    server_error=api.NotAllowedError,
                )
            task = self._creating[name] = asyncio.get_running_loop().create_task(
                self._create_subscription(name, sub_type, earliest=earliest)
            )
            task.add_done_callback(lambda _: self._creating.pop(name, None))
        return await asyncio.shield(task)

    async def _create_subscription(self, name: str, sub_type: int, *, earliest: bool) -> Subscription:
        removing = self._removing.get(name)
        if removing is not None:  # its files are being deleted: a new one is made after, not among them
            await asyncio.shield(removing)
        sub = await asyncio.to_thread(self._open_subscription, name, sub_type, earliest=earliest)
        sub.cursor.set_ledger_sizes(self.log.ledger_sizes())  # appends that landed meanwhile
        self.subscriptions[name] = sub
        return sub

    async def remove_subscription(self, name: str) -> None:
        """Deletes a subscription with no consumers, its files off the loop (UNSUBSCRIBE, refusals)."""
        sub = self.subscriptions.pop(name, None)
        if sub is None:
            return
        deleting = asyncio.ensure_future(asyncio.to_thread(sub.delete))
        self._removing[name] = deleting
        deleting.add_done_callback(
            lambda done: self._removing.pop(name, None) if self._removing.get(name) is done else None
        )
        await asyncio.shield(deleting)

    # -- publishing ----------------------------------------------------------------------------------

    def publish(self, stored: bytes, publish_time: int, num_messages: int, done: Stored) -> None:
        """Queues one entry for the next group commit (see :meth:`publish_many`)."""

        def one(result: list[Position] | Exception) -> None:
            done(result if isinstance(result, Exception) else result[0])

        self.publish_many([(stored, publish_time, num_messages)], one)

    def publish_many(self, rows: list[Row], done: StoredMany) -> None:
        """Queues entries for the next group commit, in order.

        ``done`` gets their positions once they are durable (or the error that kept them from
        being stored); the topic calls its ``done``s in the order the entries were queued.
        """
        self._pending.append((rows, done))
        if not self._committing:
            self._committing = True
            asyncio.get_running_loop().create_task(self._commit())

    async def _commit(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(0)  # let the SENDs already read from sockets join this commit
                batch, self._pending = self._pending, []
                rows = batch[0][0] if len(batch) == 1 else [row for group, _ in batch for row in group]
                try:
                    # Written and fsynced on a worker thread: the loop serves everyone meanwhile,
                    # and every SEND that arrives during the sync joins the next group. Dispatch
                    # reads the log beside it (an append holds only its own lock while it syncs).
                    positions = await asyncio.to_thread(self.log.append, rows)
                except Exception as e:  # noqa: BLE001 - each send gets the failure
                    for _, done in batch:
                        done(e)
                    continue
                self.received.add_rows(rows)
                at = 0
                for group, done in batch:
                    done(positions[at : at + len(group)])
                    at += len(group)
                self._grew()
                self.dispatch()
        finally:
            self._committing = False

    def check_producer_room(self, leaving: int = 0) -> None:
        """ProducerBusy when one more producer would pass ``max_producers_per_topic``.

        Producers waiting for exclusive access count (each holds a request open); ``leaving``:
        producers and waiters the newcomer fences.
        """
        limit = self.config.max_producers_per_topic
        if limit and self.producers + self.access.waiting_count - leaving >= limit:
            raise ProtocolError(
                f"Topic reached max producers limit ({limit}): {self.name.full}",
                server_error=api.ProducerBusy,
            )

    def add_producer(self, name: str) -> None:
        """A producer named ``name`` joins (admitted by :meth:`check_producer_room` and ``access``)."""
        self.producer_names[name] += 1
        self.producers += 1

    def remove_producer(self, name: str) -> None:
        """A producer named ``name`` left."""
        self.producers -= 1
        left = self.producer_names[name] - 1
        if left > 0:
            self.producer_names[name] = left
        else:
            self.producer_names.pop(name, None)

    @property
    def busy(self) -> bool:
        """Whether producers are on the topic, appends are on their way or subscriptions being made."""
        return bool(self.producer_names) or self._committing or bool(self._pending) or bool(self._creating)

    def stop_timers(self) -> None:
        """Cancels the delayed-delivery timer (on the loop, before a close off it)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- dispatch and durability -----------------------------------------------------------------------

    def _grew(self) -> None:
        """Tells every cursor the ledgers' sizes: they change only when an append lands."""
        sizes = self.log.ledger_sizes()
        for sub in self.subscriptions.values():
            sub.cursor.set_ledger_sizes(sizes)

    def dispatch(self) -> None:
        """Lets every subscription send what it can.

        A subscription that meets damage in the log (an entry failing its checksum) stops before
        it and tries again at the next dispatch; the damage is logged once, and the topic's other
        subscriptions, its appends and its receipts go on.
        """
        for sub in self.subscriptions.values():
            try:
                sub.dispatch()
            except CursorkitError as e:
                if sub.damage != str(e):
                    sub.damage = str(e)
                    log.error(
                        "%s, subscription %r cannot dispatch past damage: %s", self.name.full, sub.name, e
                    )

    def _schedule_dispatch(self, delay_s: float) -> None:
        """A dispatch of every subscription in ``delay_s``, unless one is already due sooner.

        One timer serves the topic's subscriptions: a later arming never pushes back an earlier
        one (the dispatch it runs lets each subscription arm again for its own next time).
        """
        loop = asyncio.get_running_loop()
        at = loop.time() + delay_s
        timer = self._timer
        if timer is not None and not timer.cancelled() and loop.time() < timer.when() <= at:
            return
        if timer is not None:
            timer.cancel()
        self._timer = loop.call_at(at, self.dispatch)

    def flush(self) -> None:
        """Flushes every subscription's cursor, then deletes the ledgers all durable ones have consumed.

        On the calling thread (closing); the broker's periodic flush is :meth:`flush_jobs` off the
        loop, then :meth:`after_flush` on it. Readers (non-durable subscriptions) hold nothing back:
        one behind a trimmed ledger reads on from the oldest entry left.
        """
        self.flush_jobs()()
        self.after_flush()

    def flush_jobs(self) -> Callable[[], None]:
        """On the loop: what a periodic flush writes, as a call to make off the loop.

        The call writes each durable cursor (and raised redelivery counts), then deletes the
        ledgers every one of them has consumed; it touches no table the loop changes.
        """
        self._drop_abandoned_readers()
        durable = [s for s in self.subscriptions.values() if s.is_durable]

        def write() -> None:
            for sub in durable:
                sub.write_cursor()
            if durable:
                oldest = min(
                    (s.cursor.mark_delete_position for s in durable), key=lambda p: (p.ledger_id, p.entry_id)
                )
                self.log.trim(Position(oldest.ledger_id, oldest.entry_id + 1))

        return write

    def after_flush(self) -> None:
        """On the loop, after the cursors were written: each subscription's bucket tracker follows."""
        for sub in self.subscriptions.values():
            sub.after_flush()

    def close(self) -> None:
        """Flushes and closes the subscriptions, then the log (releasing it for another broker).

        A flush refused here (``Fenced``: another broker took the cursor over; or its store did not
        answer) is logged: the acks since the last flush are redelivered by whoever opens it next.
        """
        if self._timer is not None:
            self._timer.cancel()
        try:
            for sub in self.subscriptions.values():
                try:
                    sub.close()
                except PersistFailed as e:
                    log.warning("%s: the last flush of %r failed: %s", self.name.full, sub.name, e)
        finally:
            self.log.close()
