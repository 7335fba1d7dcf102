"""Key_Shared: each key to one consumer (``KeySharedDispatcher``), AUTO_SPLIT or STICKY.

AUTO_SPLIT hashes keys onto a consistent-hashing ring; STICKY consumers bring their hash ranges.
Order per key follows PIP-379's draining hashes, or ``allow_out_of_order_delivery``. With a stuck
consumer timeout, a stuck consumer's spilled entries are read again from the log when it recovers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from cursorkit import Cursor, Position
from cursorkit.broker.log import MessageLog
from cursorkit.broker.protocol.hot_frames import entry_fields
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.consumer import Consumer
from cursorkit.broker.server.delayed_trackers import DelayedTracker
from cursorkit.broker.server.dispatch.model import DispatchModel, Feed
from cursorkit.broker.server.isolation import reread_spilled
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.errors import ConsumerAssignError, ProtocolError
from cursorkit.keyshared import (
    ConsistentHashingSelector,
    ExclusiveRangeSelector,
    KeySharedDispatcher,
    Selector,
    hash_many,
    slots,
)
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["KeySharedModel"]


class KeySharedModel(DispatchModel):
    """One Key_Shared subscription's dispatch; its mode is the first consumer's."""

    dispatcher: KeySharedDispatcher

    sub_type: int = api.CommandSubscribe.Key_Shared
    kept_when_empty = False

    def __init__(
        self,
        request: SubscribeRequest,
        *,
        name: str,
        cursor: Cursor,
        delayed: DelayedTracker,
        config: BrokerConfig,
        log: MessageLog,
        clock_s: Callable[[], float],
    ) -> None:
        self.name = name
        self.consumers: list[Consumer] = []
        self._log = log
        self._clock_s = clock_s
        self.sticky = request.sticky
        self.out_of_order = request.out_of_order
        selector = cast(Selector, ExclusiveRangeSelector() if request.sticky else ConsistentHashingSelector())
        self.dispatcher = KeySharedDispatcher(
            selector=selector,
            cursor=cursor,
            mode="out-of-order" if request.out_of_order else "draining",
            delayed=delayed,
            max_unacked_per_key=config.max_unacked_per_key,
            key_ordered_nacks=config.key_ordered_nacks and not request.out_of_order,
            stuck_after=config.stuck_consumer_timeout_ms / 1000.0 or None,
        )

    def fits(self, request: SubscribeRequest) -> bool:
        """Another Key_Shared mode (STICKY, out-of-order) needs another model."""
        same = (request.sticky, request.out_of_order) == (self.sticky, self.out_of_order)
        return request.sub_type == self.sub_type and same

    def add_consumer(self, consumer: Consumer, request: SubscribeRequest) -> None:
        """Adds a consumer of the same mode; ranges another consumer holds are refused."""
        if not self.fits(request):
            mode = "STICKY" if self.sticky else "AUTO_SPLIT"
            unordered = " with out-of-order delivery" if self.out_of_order else ""
            raise ProtocolError(
                f"subscription {self.name!r} is Key_Shared {mode}{unordered}: another mode is refused",
                server_error=api.ConsumerBusy,
            )
        try:
            self.dispatcher.add_consumer(
                consumer, permits=0, ranges=request.ranges if request.sticky else None
            )
        except ConsumerAssignError as e:  # ranges another consumer holds: Pulsar's answer, no trace
            raise ProtocolError(str(e), server_error=api.ConsumerAssignError) from None
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> list[Position]:
        """Drops a consumer; its hashes move, what it held goes to their new owners."""
        self.consumers.remove(consumer)
        return self.dispatcher.remove_consumer(consumer)

    def take_rewind(self) -> Position | None:
        """After the last consumer left: reading starts again after mark-delete."""
        return self.dispatcher.take_rewind()

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Adds permits to the consumer."""
        self.dispatcher.add_permits(consumer, permits)

    def ack(self, consumer: Consumer, positions: list[Position]) -> None:
        """Individual acks, releasing draining hashes and per-key caps."""
        self.dispatcher.ack_many(consumer, positions)

    def held_by(self, consumer: Consumer) -> list[Position]:
        """What the consumer holds unacked."""
        return self.dispatcher.unacked(consumer)

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> int:
        """A nack of ``positions`` (key order kept), or all the consumer holds; how many went back."""
        if positions is None:
            return len(self.dispatcher.redeliver(consumer))
        return self.dispatcher.nack(consumer, positions)

    def reset(self) -> None:
        """Nothing to keep: a seek disconnects every consumer, and the next one starts a new model."""

    def dispatch(self, feed: Feed) -> bool:
        """A read, then its dispatch, while the dispatcher asks for more; True when spilled entries wait.

        What a read could not send reaches the replay queue before the next read is sized, so the
        look-ahead limit holds.
        """
        ks = self.dispatcher
        more = False
        if ks.stuck_after is not None:
            ks.isolate_stuck(self._clock_s())
            more = reread_spilled(self._log, ks, feed.read_batch)
        while True:
            n = ks.max_entries_to_read()
            got = feed.read(n) if n else None
            if got:
                due, keys = entry_fields(got.datas)  # one call for the read
                if max(got.counts) > 1:
                    ks.set_batch_sizes(got.positions, got.counts)
                # No deliver-at time in the read: the tracker is not asked about each entry.
                ks.add_read(got.positions, slots(hash_many(keys), ks.slot_kind), due if any(due) else None)
            for consumer, positions, counts in ks.dispatch_with_counts():
                feed.send(consumer, positions, counts.tolist())
            if not got:
                return more
