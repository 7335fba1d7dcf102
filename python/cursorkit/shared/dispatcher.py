"""``SharedDispatcher``: a Shared subscription's dispatch, as Pulsar's multiple-consumer dispatcher.

Entries read from the log go in (``add_read``); deliveries come out of ``dispatch()`` as
``(consumer, positions, redelivery counts)``. Each consumer in turn gets up to
``round_robin_batch`` messages of its permits (Pulsar's ``dispatcherMaxRoundRobinBatchSize``),
consumers of the best (lowest) priority level first; what waits (nacked, redelivered, a leaver's,
due delayed messages) goes out first, in position order; an acknowledged message is never sent
again, whoever acknowledged it. The per-entry work and the state are Rust
(``cursorkit._core.SharedCore``); this class maps consumer objects to the core's ids and holds
the delayed-delivery hook.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, NamedTuple

import numpy as np

from cursorkit._core import Position, SharedCore
from cursorkit.ackstate import Cursor, RaisedCounts
from cursorkit.errors import InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.keyshared.hooks import DelayedTracker

__all__ = [
    "MAX_UNACKED_PER_CONSUMER",
    "MAX_UNACKED_PER_SUBSCRIPTION",
    "ROUND_ROBIN_BATCH",
    "SharedDispatcher",
]

ROUND_ROBIN_BATCH = 20
"""Pulsar's ``dispatcherMaxRoundRobinBatchSize``: messages a consumer gets per turn."""
MAX_UNACKED_PER_CONSUMER = 50_000
"""Pulsar's ``maxUnackedMessagesPerConsumer`` (0: no limit)."""
MAX_UNACKED_PER_SUBSCRIPTION = 200_000
"""Pulsar's ``maxUnackedMessagesPerSubscription`` (0: no limit)."""
_DUE_PER_DISPATCH = 10_000
"""Due delayed messages taken into the queue per dispatch."""


class SharedAckResult(NamedTuple):
    """What an ack did; every well-formed ack reaches the cursor, as in Pulsar."""

    released: int
    """Positions that were in flight (on whichever consumer)."""
    not_held: int
    """Positions in flight on no consumer (never sent, or waiting): acked on the cursor."""
    duplicates: int
    """Positions the cursor had acknowledged already."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedConsumerStats:
    """One consumer's figures, named after Pulsar's consumer stats."""

    name: str
    priority_level: int
    available_permits: int
    unacked_messages: int
    held_entries: int
    msg_out_counter: int
    paused: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedStats:
    """The subscription's dispatch figures."""

    consumers: list[SharedConsumerStats]
    replay_size: int
    """Entries waiting to be sent (replay and unsent reads)."""
    held_entries: int
    unacked_messages: int
    replay_dropped_acked: int
    """Positions dropped because the cursor had acknowledged them (never sent again)."""
    memory_usage: int


class SharedDispatcher:
    """Dispatches a Shared subscription's entries round-robin over the consumers' permits.

    ``cursor`` receives the acks; ``delayed`` holds messages with a deliver-at until they are due.
    Consumers are hashable objects with a ``.name``. Every call is safe from any thread.
    """

    def __init__(
        self,
        *,
        cursor: Cursor,
        delayed: DelayedTracker | None = None,
        round_robin_batch: int = ROUND_ROBIN_BATCH,
        max_unacked_per_consumer: int = MAX_UNACKED_PER_CONSUMER,
        max_unacked_per_subscription: int = MAX_UNACKED_PER_SUBSCRIPTION,
    ) -> None:
        if not isinstance(cursor, Cursor):
            raise InvalidInputType(f"cursor must be a cursorkit.Cursor, got {type(cursor).__name__}")
        self.cursor = cursor
        self.delayed = delayed
        self._core = SharedCore(round_robin_batch, max_unacked_per_consumer, max_unacked_per_subscription)
        self._lock = threading.RLock()
        """Membership (the id maps); the core locks itself for everything else."""
        self._ids: dict[Any, int] = {}
        self._by_id: dict[int, Any] = {}
        self._next_id = 1

    # --- consumers --------------------------------------------------------------------------------

    def _id(self, consumer: Hashable) -> int:
        try:
            return self._ids[consumer]
        except (KeyError, TypeError):
            raise UnknownConsumer(
                f"consumer {getattr(consumer, 'name', consumer)!r} is not registered"
            ) from None

    def add_consumer(self, consumer: Hashable, permits: int = 0, priority: int = 0) -> None:
        """Registers a consumer (it must have a ``.name``); a lower ``priority`` is served first."""
        name = getattr(consumer, "name", None)
        if not isinstance(name, str):
            raise InvalidInputType(f"a consumer needs a str .name, got {type(consumer).__name__}")
        with self._lock:
            if consumer in self._ids:
                raise InvalidArgument(f"consumer {name!r} is already registered")
            cid = self._next_id
            self._core.add_consumer(cid, priority, permits)
            self._next_id += 1
            self._ids[consumer] = cid
            self._by_id[cid] = consumer

    def remove_consumer(self, consumer: Hashable) -> list[Position]:
        """Unregisters a consumer; what it held goes back to the others with no redelivery raise."""
        with self._lock:
            cid = self._id(consumer)
            held = self._core.remove_consumer(cid, self.cursor)
            del self._ids[consumer]
            del self._by_id[cid]
            return held

    @property
    def consumers(self) -> list[Any]:
        """The registered consumers, in the order they joined."""
        with self._lock:
            return list(self._ids)

    def add_permits(self, consumer: Hashable, permits: int) -> None:
        """A FLOW: the consumer may receive ``permits`` more messages."""
        self._core.add_permits(self._id(consumer), permits)

    def set_paused(self, consumer: Hashable, paused: bool) -> None:
        """Stops (True) or resumes sending to a consumer, e.g. while its connection does not keep up."""
        self._core.set_paused(self._id(consumer), paused)

    # --- reads and dispatch -----------------------------------------------------------------------

    def entries_to_read(self, read_batch: int = 100) -> int:
        """How many new entries to read now: 0 while entries wait (replay first) or nobody can take."""
        return self._core.entries_to_read(read_batch)

    def add_read(
        self,
        positions: Sequence[Position],
        messages: Sequence[int] | None = None,
        deliver_at: Sequence[int] | None = None,
    ) -> None:
        """Adds entries read from the log with their message counts (default 1) and deliver-at times.

        A deliver-at time is epoch ms (0: none); an entry the delayed tracker takes waits there
        until due. A tracker with ``add_many`` (every cursorkit tracker) gets the read's delayed
        entries in one call; one with only ``add_message`` is asked entry by entry.
        """
        n = len(positions)
        counts: Any = np.ones(n, dtype=np.int64) if messages is None else messages
        if deliver_at is not None and self.delayed is not None and any(deliver_at):
            if len(deliver_at) != n:
                raise InvalidArgument(f"{len(deliver_at)} deliver-at times for {n} entries")
            held = self._held_back(positions, deliver_at)
            if len(held):
                keep = np.ones(n, dtype=bool)
                keep[held] = False
                positions = list(compress(positions, keep.tolist()))
                counts = list(compress(counts, keep.tolist()))
        self._core.add_read(positions, counts, self.cursor)

    def _held_back(self, positions: Sequence[Position], deliver_at: Sequence[int]) -> Any:
        """Indexes of the entries the delayed tracker takes (it keeps them until due)."""
        delayed = self.delayed
        assert delayed is not None
        ats = np.asarray(deliver_at, dtype=np.int64)
        (some,) = ats.nonzero()
        add_many = getattr(delayed, "add_many", None)
        if add_many is None:
            return [
                i
                for i in some.tolist()
                if delayed.add_message(positions[i].ledger_id, positions[i].entry_id, int(ats[i]))
            ]
        chosen = [positions[i] for i in some.tolist()]
        ls = np.fromiter((p.ledger_id for p in chosen), np.int64, len(chosen))
        es = np.fromiter((p.entry_id for p in chosen), np.int64, len(chosen))
        return some[np.asarray(add_many(ls, es, ats[some]), dtype=bool)]

    def dispatch(self) -> list[tuple[Any, list[Position], list[int]]]:
        """Sends what can be sent now: ``(consumer, positions, redelivery counts)`` per consumer."""
        delayed = self.delayed
        if delayed is not None:
            due = np.asarray(delayed.get_scheduled_messages(_DUE_PER_DISPATCH), dtype=np.int64).reshape(-1, 2)
            if len(due):
                self._core.add_read_columns(
                    due[:, 0], due[:, 1], np.ones(len(due), dtype=np.int64), self.cursor
                )
        by_id = self._by_id
        return [(by_id[cid], ps, counts) for cid, ps, counts in self._core.dispatch(self.cursor)]

    # --- acks and redelivery ----------------------------------------------------------------------

    def ack(self, positions: Sequence[Position]) -> SharedAckResult:
        """Acknowledges entries, whoever holds them (Pulsar takes an ack from any consumer)."""
        return SharedAckResult(*self._core.ack(positions, self.cursor))

    def ack_cumulative(self, position: Position) -> SharedAckResult:
        """Acknowledges everything up to ``position`` (Exclusive and Failover only, in Pulsar)."""
        return SharedAckResult(*self._core.ack_cumulative(position, self.cursor))

    def nack(self, consumer: Hashable, positions: Sequence[Position]) -> int:
        """Negative acks: what ``consumer`` holds of ``positions`` is sent again, counts raised."""
        return self._core.nack(self._id(consumer), positions, self.cursor)

    def redeliver_all(self, consumer: Hashable) -> int:
        """Everything ``consumer`` holds is sent again, counts raised (a redelivery without ids)."""
        return self._core.redeliver_all(self._id(consumer), self.cursor)

    def redelivery_count(self, position: Position) -> int:
        """How many times ``position`` was nacked or redelivered since it was last acked."""
        return self._core.redelivery_count(position)

    # --- durable redelivery counts (beyond Pulsar) -------------------------------------------------

    def journal_redelivery_counts(self, on: bool = True) -> None:
        """Journals every redelivery-count raise for a durable store; counts then outlive the last leaver."""
        self._core.set_counts_journal(on)

    def take_raised_counts(self) -> RaisedCounts:
        """The raises journaled since the last call (empty with the journal off)."""
        return RaisedCounts(*self._core.take_raised_counts())

    def seed_redelivery_counts(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Counts read back from a durable store: each position keeps the higher of its count and this."""
        self._core.seed_counts(ledger_ids, entry_ids, counts)

    def raise_redelivery_counts(self, positions: Sequence[Position]) -> None:
        """One more redelivery of each position (a consumer lost holding them); journaled."""
        self._core.raise_counts(positions)

    def held_by(self, consumer: Hashable) -> list[Position]:
        """The positions ``consumer`` holds unacknowledged, in order."""
        return self._core.held_by(self._id(consumer))

    def reset(self) -> None:
        """Forgets everything sent or waiting (a seek); consumers keep their permits."""
        self._core.reset()

    def stats(self) -> SharedStats:
        """The subscription's dispatch figures."""
        with self._lock:
            consumers = [
                SharedConsumerStats(
                    name=self._by_id[cid].name,
                    priority_level=priority,
                    available_permits=permits,
                    unacked_messages=unacked,
                    held_entries=held,
                    msg_out_counter=out,
                    paused=paused,
                )
                for cid, priority, permits, unacked, held, out, paused in self._core.figures()
            ]
        queued, held_total, unacked_total, dropped, _ = self._core.totals()
        return SharedStats(
            consumers=consumers,
            replay_size=queued,
            held_entries=held_total,
            unacked_messages=unacked_total,
            replay_dropped_acked=dropped,
            memory_usage=self._core.memory_usage(),
        )
