"""``KeySharedDispatcher``: Key_Shared dispatch with Pulsar's three ordering modes, as one actor.

Entries read from the cursor come in (``add_entries``); deliveries come out of ``dispatch()`` as
``(consumer, positions)``. Every decision for a subscription happens in one place, under one lock,
so the join-during-send races of Pulsar's dispatchers (research §4) cannot happen: the PIP-379
"send-time recheck" is the gate itself, taken in the same step as the send.

Modes:
* ``draining`` (PIP-379, Pulsar 4.x's default, with 4.x's ``drainingHashes*`` stats): when a join or
  leave moves a hash, the previous owner keeps it while it has unacked messages of that hash (a
  per-hash reference count); others wait.
* ``last-sent`` (PIP-282, Pulsar 3.3's default, with 3.3's ``lastSentPosition`` stats): a consumer
  that joins while messages are outstanding may only receive positions up to the subscription's
  last sent position at its join, until mark-delete passes it.
* ``out-of-order`` (``allowOutOfOrderDelivery``): the selector and permits only.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from cursorkit._core import CursorState, DispatchCore, Position
from cursorkit.ackstate import Cursor, DispatchPausePolicy
from cursorkit.errors import InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector, ExclusiveRangeSelector

Mode = Literal["draining", "last-sent", "out-of-order"]
MODES: tuple[Mode, ...] = ("draining", "last-sent", "out-of-order")

LOOK_AHEAD_PER_CONSUMER = 2000
"""``keySharedLookAheadMsgInReplayThresholdPerConsumer``."""
LOOK_AHEAD_PER_SUBSCRIPTION = 20000
"""``keySharedLookAheadMsgInReplayThresholdPerSubscription``."""
MAX_UNACKED_PER_CONSUMER = 50_000
"""``maxUnackedMessagesPerConsumer``: the look-ahead fallback when both look-ahead limits are 0."""
MAX_UNACKED_PER_SUBSCRIPTION = 200_000
"""``maxUnackedMessagesPerSubscription``: likewise (0 = no limit)."""
UNLIMITED = 2**63 - 1
"""``look_ahead_limit`` when no limit applies (every limit of the rule is 0)."""


class Selector(Protocol):
    """What the dispatcher needs of a selector (all three in ``cursorkit.keyshared`` qualify)."""

    def add_consumer(self, consumer: Any) -> Any:
        """Adds a consumer; returns the impact (``.removed``: consumer → ranges moved away)."""
        ...

    def remove_consumer(self, consumer: Any) -> Any:
        """Removes a consumer; returns the impact."""
        ...

    def select(self, slot: int) -> Any:
        """The consumer owning ``slot``, or None."""
        ...

    def select_many(self, slots: Any) -> Any:
        """Owner indices of many slots (-1: none), to be read through ``consumers_by_index``."""
        ...

    @property
    def consumers_by_index(self) -> tuple[Any, ...]:
        """Consumer of each index, with a final None for index -1."""
        ...


class DelayedTracker(Protocol):
    """The tracker hook: held messages are never dispatched before their time."""

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """True: the tracker holds it (do not dispatch now)."""
        ...

    def get_scheduled_messages(self, max_messages: int) -> Any:
        """Due messages as (ledger, entry) rows."""
        ...


class Entry(NamedTuple):
    """An entry read from the cursor: its position, its sticky-key slot, and an optional deliver-at."""

    position: Position
    slot: int
    deliver_at: int | None = None


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why a hash could not be dispatched at the last attempt (beyond Pulsar's stats)."""

    reason: Literal["no-consumer", "no-permits", "draining", "recently-joined", "replay-order", "look-ahead"]
    consumer: str | None = None
    """The target consumer's name."""
    owner: str | None = None
    """For ``draining``: the consumer the hash is draining on."""
    position: Position | None = None
    """The first position held back."""


class AckResult(NamedTuple):
    """What an ack did. Like Pulsar, every well-formed ack is accepted and reaches the cursor.

    Truthy when it unblocked a draining hash (what ``ack`` used to return). A named tuple: made
    once per ack call on the hot path.
    """

    acked: int = 0
    """Positions that were pending on the acking consumer."""
    from_other_consumer: int = 0
    """Positions pending on another consumer: removed there (its draining reference released)."""
    not_pending: int = 0
    """Positions pending on no consumer (never sent, or waiting in replay): acked on the cursor."""
    duplicates: int = 0
    """Positions the cursor had acknowledged already: nothing changed."""
    unblocked: int = 0
    """Draining hashes the ack unblocked."""

    def __bool__(self) -> bool:  # noqa: D105
        return self.unblocked > 0


_ACKED = AckResult(acked=1)
_ACKED_UNBLOCKING = AckResult(acked=1, unblocked=1)


@dataclass(slots=True, eq=False)
class _Consumer:
    """A registered consumer: its object, name and id in the Rust core (which holds its state)."""

    consumer: Any
    name: str
    cid: int


_RESULTS: dict[tuple[int, int, int, int, int], AckResult] = {
    (1, 0, 0, 0, 0): _ACKED,
    (1, 0, 0, 0, 1): _ACKED_UNBLOCKING,
}
"""Outcomes made once and shared (results are immutable): acks return them without building a
result; it keeps the first ``_RESULTS_KEPT`` distinct outcomes seen."""

_RESULTS_KEPT = 4096
_new_tuple = tuple.__new__

_ALL_SLOTS = np.arange(65536, dtype=np.int64)
"""Every slot: the owner table is one ``select_many`` of these after each membership change."""


def _result(outcome: tuple[int, int, int, int, int]) -> AckResult:
    found = _RESULTS.get(outcome)
    if found is None:
        found = _new_tuple(AckResult, outcome)  # the core returns exactly the five fields
        if len(_RESULTS) < _RESULTS_KEPT:
            _RESULTS[outcome] = found
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerStats:
    """One consumer's figures, named after Pulsar 4's consumer stats."""

    name: str
    available_permits: int
    unacked_messages: int
    msg_out_counter: int
    draining_hashes_count: int
    draining_hashes_cleared_total: int
    draining_hashes_unacked_messages: int
    draining_hashes: list[tuple[int, int, int]]
    """``(hash, unacked messages, blocked attempts)`` per hash draining on this consumer."""
    last_sent_position_when_joining: str | None
    key_hash_ranges: list[tuple[int, int]]
    """Pulsar's ``keyHashRangeArrays``: the merged inclusive slot ranges this consumer owns."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionStats:
    """The subscription's Key_Shared figures plus why each blocked hash is blocked."""

    mode: Mode
    consumers: list[ConsumerStats]
    replay_size: int
    look_ahead_limit: int
    last_sent_position: str | None
    individually_sent_positions: str
    consumers_after_mark_delete_position: dict[str, str]
    blocked_on_ack_state_persistent: bool
    blocked: dict[int, Blocked]
    """Per hash held back at the last dispatch: why, and on whom."""
    read_blocked: str | None
    """Why the last ``should_read()`` said no: ``paused``, ``look-ahead`` or ``no-permits`` (None: yes)."""
    unblocked_events: int
    replay_dropped_acked: int = 0
    """Positions dropped on their way to or from the replay queue because the cursor had acknowledged
    them (Pulsar drops them when adding to replay at or below mark-delete, and when a replay read
    returns them); such a position is never sent again, whichever way it came back."""
    draining_hashes_count: int = 0
    """Sum over the consumers, as Pulsar's subscription stats add them up (likewise the next two)."""
    draining_hashes_cleared_total: int = 0
    draining_hashes_unacked_messages: int = 0


class KeySharedDispatcher:
    """Dispatches a Key_Shared subscription's entries to consumers, keeping per-key order.

    ``cursor`` receives the acks; ``policy`` (PIP-299) is consulted before new entries are read;
    ``delayed`` holds messages with a deliver-at until they are due. Consumers are hashable objects
    with a ``.name``; ``slot_kind`` is how a sticky-key hash maps to the selector's slots
    (``"consistent"`` for consistent hashing, ``"range"`` otherwise).

    The per-entry loop, pending acks, the replay queue and the ordering gates live in Rust
    (``cursorkit._core.DispatchCore``): each read, dispatch and ack batch is one call. The column
    forms (``add_read_columns``, ``dispatch_columns``, ``ack_columns``) never make a ``Position``
    per message; the ``Position`` forms are the same calls with a conversion around them.
    """

    def __init__(
        self,
        *,
        selector: Selector,
        cursor: Cursor,
        mode: Mode = "draining",
        policy: DispatchPausePolicy | None = None,
        delayed: DelayedTracker | None = None,
        slot_kind: Literal["consistent", "range"] | None = None,
        look_ahead_per_consumer: int = LOOK_AHEAD_PER_CONSUMER,
        look_ahead_per_subscription: int = LOOK_AHEAD_PER_SUBSCRIPTION,
        max_unacked_per_consumer: int = MAX_UNACKED_PER_CONSUMER,
        max_unacked_per_subscription: int = MAX_UNACKED_PER_SUBSCRIPTION,
    ) -> None:
        if mode not in MODES:
            raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not isinstance(cursor, CursorState):
            raise InvalidInputType(f"cursor must be a cursorkit.Cursor, got {type(cursor).__name__}")
        _count(look_ahead_per_consumer, "look_ahead_per_consumer")
        _count(look_ahead_per_subscription, "look_ahead_per_subscription")
        _count(max_unacked_per_consumer, "max_unacked_per_consumer")
        _count(max_unacked_per_subscription, "max_unacked_per_subscription")
        self.selector = selector
        self.cursor = cursor
        self.mode: Mode = mode
        self.policy = policy
        self.delayed = delayed
        if slot_kind is None:
            slot_kind = "consistent" if type(selector).__name__ == "ConsistentHashingSelector" else "range"
        self.slot_kind = slot_kind
        self.look_ahead_per_consumer = look_ahead_per_consumer
        self.look_ahead_per_subscription = look_ahead_per_subscription
        self.max_unacked_per_consumer = max_unacked_per_consumer
        self.max_unacked_per_subscription = max_unacked_per_subscription
        self._core = DispatchCore(mode)
        self._exact_impacts = _exact_impacts(selector)
        """Whether membership changes may update the owner table from the impact alone."""
        self._lock = threading.RLock()
        self._consumers: dict[Any, _Consumer] = {}
        self._by_cid: dict[int, _Consumer] = {}
        self._next_cid = 1
        self._delayed_slots: dict[tuple[int, int], int] = {}
        """Positions the delayed tracker holds → their slot, until they come back due."""
        self._read_blocked: str | None = None

    # --- consumers --------------------------------------------------------------------------------

    def add_consumer(self, consumer: Hashable, permits: int = 0) -> None:
        """Registers a consumer (it must have a ``.name``); hashes it takes over may start draining."""
        name = getattr(consumer, "name", None)
        if not isinstance(name, str):
            raise InvalidInputType(f"a consumer needs a str .name, got {type(consumer).__name__}")
        n = _count(permits, "permits")
        with self._lock:
            if consumer in self._consumers:
                raise InvalidArgument(f"consumer {name!r} is already registered")
            impact = self.selector.add_consumer(consumer)
            state = _Consumer(consumer, name, self._next_cid)
            self._next_cid += 1
            self._core.add_consumer(state.cid, n, self.cursor)
            self._consumers[consumer] = state
            self._by_cid[state.cid] = state
            self._membership_changed(impact, state.cid)

    def remove_consumer(self, consumer: Hashable) -> list[Position]:
        """Removes a consumer; its unacked messages go to the replay queue (returned, in order).

        As in Pulsar, their redelivery counts are not raised, and when the last consumer leaves the
        counts are cleared. Messages the cursor acknowledged meanwhile are dropped, never resent.
        """
        with self._lock:
            state = self._state(consumer)
            impact = self.selector.remove_consumer(consumer)
            returned = self._core.remove_consumer(state.cid, self.cursor)
            del self._consumers[consumer]
            del self._by_cid[state.cid]
            self._membership_changed(impact, state.cid)
            return returned

    def add_permits(self, consumer: Hashable, n: int) -> None:
        """A consumer's flow request: ``n`` more messages may be sent to it."""
        k = n if type(n) is int and n >= 0 else _count(n, "permits")
        with self._lock:
            self._core.add_permits(self._state(consumer).cid, k)

    def _state(self, consumer: Hashable) -> _Consumer:
        try:
            return self._consumers[consumer]
        except (KeyError, TypeError):
            raise UnknownConsumer(
                f"consumer {getattr(consumer, 'name', consumer)!r} is not registered"
            ) from None

    def _membership_changed(self, impact: Any, cid: int) -> None:
        """Hands the selector's new owner table to the core, then the ranges that moved (PIP-379)."""
        consumers = self._consumers
        added = getattr(impact, "added", None) if self._exact_impacts else None
        if added is not None:  # only what moved: the selector's impact is exact, slot by slot
            self._core.assign([(consumers[c].cid, r) for c, r in added.items() if c in consumers])
        else:
            by_index = self.selector.consumers_by_index
            cid_of = np.fromiter(
                (consumers[c].cid if c is not None and c in consumers else -1 for c in by_index),
                dtype=np.int64,
                count=len(by_index),
            )
            self._core.set_owners(cid_of[self._owner_indices()])
        if self.mode == "draining" and impact is not None:
            exact = self._exact_impacts  # our selectors' ranges are int pairs already
            removed = [
                (consumers[owner].cid, ranges if exact else [(int(a), int(b)) for a, b in ranges])
                for owner, ranges in getattr(impact, "removed", {}).items()
                if owner in consumers and ranges
            ]
            self._core.register_moved(removed, cid)

    def _owner_indices(self) -> npt.NDArray[np.int64]:
        """The selector's owner index of every slot (-1: nobody), slots the selector rejects too."""
        try:
            return np.asarray(self.selector.select_many(_ALL_SLOTS), dtype=np.int64)
        except InvalidArgument:  # a hash space smaller than 65536 slots: the rest belong to nobody
            top = int(getattr(self.selector, "key_hash_range", (0, 65535))[1])
            out = np.full(len(_ALL_SLOTS), -1, dtype=np.int64)
            inside = _ALL_SLOTS[: min(top, 65535) + 1]
            out[: len(inside)] = self.selector.select_many(inside)
            return out

    # --- entries in ---------------------------------------------------------------------------------

    def slot_of(self, key: bytes | str) -> int:
        """The selector slot of a sticky key."""
        return slot_of_hash(sticky_key_hash(key), self.slot_kind)

    def add_entries(
        self, entries: Iterable[Entry | tuple[Position, bytes | str]], *, replay: bool = False
    ) -> None:
        """Entries read from the cursor, in read order (``replay``: re-read from the replay queue)."""
        batch: list[Entry] = []
        for item in entries:
            obj: object = item
            if isinstance(obj, Entry):
                batch.append(obj)
            elif isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], Position):
                batch.append(Entry(obj[0], self.slot_of(obj[1])))
            else:
                raise InvalidInputType(f"an entry is an Entry or a (Position, key) tuple, got {obj!r}")
        if not batch:
            return
        _check_positions([e.position for e in batch])
        ls, es = _columns([e.position for e in batch])
        slots = np.fromiter((e.slot for e in batch), np.int64, len(batch))
        if replay:
            with self._lock:
                self._core.add_replay(ls, es, slots, self.cursor)
            return
        ats = [e.deliver_at for e in batch]
        self._add(ls, es, slots, ats if any(a is not None for a in ats) else None)

    def add_read(self, positions: Sequence[Position], slots: Any, deliver_at: Any = None) -> None:
        """Entries of one read as columns: the bulk form of ``add_entries``.

        ``positions`` in read order, their selector ``slots`` (an int array), and optionally their
        ``deliver_at`` times.
        """
        pos = list(positions)
        if not all(type(p) is Position for p in pos):
            raise InvalidInputType("positions must be cursorkit.Position objects")
        ls, es = _columns(pos)
        self.add_read_columns(ls, es, slots, deliver_at)

    def add_read_columns(self, ledgers: Any, entries: Any, slots: Any, deliver_at: Any = None) -> None:
        """One read as int64 columns of ledger ids, entry ids and slots (and deliver-at times).

        Without ``deliver_at`` the columns go to the Rust core as given (it reads numpy, Arrow or
        int sequences and checks them); with it they become arrays here for the delayed tracker.
        """
        if deliver_at is None:
            with self._lock:
                self._core.add_read(ledgers, entries, slots, self.cursor)
            return
        col = _int64_column(slots, "slots")
        ls = _int64_column(ledgers, "ledger_ids")
        es = _int64_column(entries, "entry_ids")
        ats: list[int | None] = [int(a) for a in _int64_column(deliver_at, "deliver_at")]
        if len(col) != len(ls) or len(es) != len(ls) or len(ats) != len(ls):
            raise InvalidArgument(
                f"positions, slots and deliver_at differ in length: {len(ls)}, {col.size}, {len(ats)}"
            )
        if len(ls):
            self._add(ls, es, col, ats)

    def _add(
        self,
        ls: npt.NDArray[np.int64],
        es: npt.NDArray[np.int64],
        slots: npt.NDArray[np.int64],
        ats: list[int | None] | None,
    ) -> None:
        """A new read: messages the delayed tracker takes wait there; the rest go to the core."""
        with self._lock:
            delayed = self.delayed
            if ats is not None and delayed is not None and self._consumers:
                _check_slots(slots)
                keep = np.ones(len(ls), dtype=bool)
                for i, (ledger, entry, slot, at) in enumerate(
                    zip(ls.tolist(), es.tolist(), slots.tolist(), ats, strict=True)
                ):
                    if at is not None and delayed.add_message(ledger, entry, at):
                        self._delayed_slots[(ledger, entry)] = slot
                        keep[i] = False
                if not keep.all():
                    ls, es, slots = ls[keep], es[keep], slots[keep]
            self._core.add_read(ls, es, slots, self.cursor)

    # --- acks ---------------------------------------------------------------------------------------

    def ack(self, consumer: Hashable, position: Position) -> AckResult:
        """An individual ack from ``consumer``, accepted as Pulsar accepts it (see ``AckResult``)."""
        with self._lock:
            cid = self._state(consumer).cid
            given: object = position
            if type(given) is not Position:
                _check_positions([given])
            outcome = self._core.ack_one(cid, position.ledger_id, position.entry_id, self.cursor)
            if self.policy is not None:
                self.policy.after_ack(self.cursor, "Key_Shared")
            return _result(outcome)

    def ack_many(self, consumer: Hashable, positions: Sequence[Position]) -> AckResult:
        """Individual acks of many positions from one consumer, accepted as Pulsar accepts them."""
        _check_positions(positions)
        ls, es = _columns(positions)
        return self.ack_columns(consumer, ls, es)

    def ack_columns(self, consumer: Hashable, ledgers: Any, entries: Any) -> AckResult:
        """``ack_many`` with the positions as ledger and entry columns: one call into Rust."""
        with self._lock:
            outcome = self._core.ack(self._state(consumer).cid, ledgers, entries, self.cursor)
            if self.policy is not None:
                self.policy.after_ack(self.cursor, "Key_Shared")
            return _result(outcome)

    def nack(self, consumer: Hashable, positions: Sequence[Position]) -> int:
        """Negative acks: the messages leave the consumer and are redelivered (order may change).

        As in Pulsar, a position not pending on ``consumer`` is skipped and each one redelivered has
        its redelivery count raised; one the cursor acknowledged meanwhile is dropped instead.
        Returns how many left the consumer.
        """
        with self._lock:
            cid = self._state(consumer).cid
            _check_positions(positions)
            ls, es = _columns(positions)
            return self._core.nack(cid, ls, es, self.cursor)

    def redeliver(self, consumer: Hashable) -> list[Position]:
        """Pulsar's redeliver-unacknowledged: all of the consumer's unacked messages, as ``nack``."""
        with self._lock:
            return self._core.redeliver(self._state(consumer).cid, self.cursor)

    # --- reads and dispatch ---------------------------------------------------------------------------

    @property
    def look_ahead_limit(self) -> int:
        """Replay-queue size beyond which new entries are not read (Pulsar 4's rule).

        ``per_consumer × consumers`` capped by ``per_subscription``, or ``per_subscription`` alone.
        A limit of 0 means "no limit of this kind": Pulsar then falls back to
        ``min(max_unacked_per_subscription, consumers × max_unacked_per_consumer)``, each 0 = none,
        and to ``UNLIMITED`` when every one is 0.
        """
        per_c, per_s = self.look_ahead_per_consumer, self.look_ahead_per_subscription
        n = len(self._consumers)
        if per_c > 0:
            limit = per_c * n
            limit = min(limit, per_s) if per_s > 0 else limit
        else:
            limit = per_s
        if limit > 0:
            return limit
        caps = [c for c in (self.max_unacked_per_subscription, n * self.max_unacked_per_consumer) if c > 0]
        return min(caps) if caps else UNLIMITED

    def max_entries_to_read(self) -> int:
        """How many new entries the broker should read now; 0 when ``should_read()`` says no.

        Pulsar's read size for Key_Shared: ``max(look-ahead limit - replay size, 1)``, and never more
        than the permits consumers have available, so one read cannot overshoot the limit.
        """
        with self._lock:
            if not self.should_read():
                return 0
            room = max(self.look_ahead_limit - self._core.replay_len(), 1)
            return min(room, self._core.permits_total())

    def should_read(self) -> bool:
        """Whether the broker should read new entries now (PIP-299, look-ahead, permits).

        When not, ``stats().read_blocked`` says why: ``paused`` (ack state not persistable),
        ``look-ahead`` (the replay queue is at its limit) or ``no-permits``.
        """
        with self._lock:
            if self.policy is not None and self.policy.should_pause(self.cursor, "Key_Shared"):
                self._read_blocked = "paused"
            elif self._core.replay_len() >= self.look_ahead_limit:
                self._read_blocked = "look-ahead"
            elif self._core.permits_total() == 0:
                self._read_blocked = "no-permits"
            else:
                self._read_blocked = None
            return self._read_blocked is None

    def dispatch_columns(self) -> list[tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """``dispatch()`` as ``(consumer, ledger ids, entry ids)`` int64 columns: no object per message."""
        with self._lock:
            self._take_due()
            by_cid = self._by_cid
            return [(by_cid[cid].consumer, ls, es) for cid, ls, es in self._core.dispatch(self.cursor)]

    def dispatch(self) -> list[tuple[Any, list[Position]]]:
        """Sends what can be sent: due delayed messages and the replay queue first, then new entries."""
        return [(c, _positions(ls, es)) for c, ls, es in self.dispatch_columns()]

    def dispatch_with_counts(self) -> list[tuple[Any, list[Position], npt.NDArray[np.int32]]]:
        """``dispatch()`` with each position's redelivery count, as an int32 array per consumer.

        Pulsar sends the count with the message; consumers use it for ``maxRedeliverCount``.
        """
        with self._lock:
            return [
                (c, _positions(ls, es), self._core.redelivery_counts(ls, es))
                for c, ls, es in self.dispatch_columns()
            ]

    def _take_due(self) -> None:
        """Due delayed messages join the replay queue (they are older than anything read since)."""
        if self.delayed is None:
            return
        due = self.delayed.get_scheduled_messages(2**31).tolist()
        if not due:
            return
        rows = [(ledger, entry, self._delayed_slots.pop((ledger, entry), None)) for ledger, entry in due]
        known = [r for r in rows if r[2] is not None]
        if known:
            ls, es, slots = (np.fromiter((r[i] for r in known), np.int64, len(known)) for i in range(3))
            self._core.add_replay(ls, es, slots, self.cursor)

    def take_rewind(self) -> Position | None:
        """The position to read again after (mark-delete) when the last consumer left, or None.

        Everything read and not acknowledged was released then; the broker re-reads from the
        position after this one. Reading clears it.
        """
        with self._lock:
            return self._core.take_rewind()

    def redelivery_count(self, position: Position) -> int:
        """How many times ``position`` was nacked or redelivered (Pulsar's redelivery count).

        A leaving consumer's messages are not counted; a count goes with the ack of its position and
        when the last consumer leaves, as Pulsar's redelivery tracker.
        """
        _check_positions([position])
        with self._lock:
            return self._core.redelivery_count(position.ledger_id, position.entry_id)

    # --- state ----------------------------------------------------------------------------------------

    @property
    def consumers(self) -> list[Any]:
        """Registered consumers, in join order."""
        with self._lock:
            return [s.consumer for s in self._consumers.values()]

    def unacked(self, consumer: Hashable) -> list[Position]:
        """Positions sent to ``consumer`` and not acked yet, in order."""
        with self._lock:
            return self._core.unacked(self._state(consumer).cid)

    @property
    def replay_queue(self) -> list[Position]:
        """Positions waiting for redelivery, in order."""
        with self._lock:
            return self._core.replay_positions()

    def pending_memory_usage(self) -> int:
        """Heap bytes of every consumer's pending acks (about 12 per unacked message)."""
        with self._lock:
            return self._core.pending_memory_usage()

    def stats(self) -> SubscriptionStats:
        """Pulsar 4's Key_Shared stats plus the reason each blocked hash is blocked."""
        with self._lock:
            core = self._core
            ranges_of = getattr(self.selector, "consumer_key_hash_ranges", None)
            ranges: dict[Any, list[tuple[int, int]]] = ranges_of() if callable(ranges_of) else {}
            cleared = core.draining_cleared()
            per: dict[int, list[tuple[int, int, int]]] = {}
            for h, owner, refs, blocked in core.draining_hashes().tolist():
                per.setdefault(owner, []).append((h, refs, blocked))
            consumers = []
            for s in self._consumers.values():
                permits, unacked, delivered, joined = core.consumer_figures(s.cid)
                mine = per.get(s.cid, [])
                consumers.append(
                    ConsumerStats(
                        name=s.name,
                        available_permits=permits,
                        unacked_messages=unacked,
                        msg_out_counter=delivered,
                        draining_hashes_count=len(mine),
                        draining_hashes_cleared_total=cleared.get(s.cid, 0),
                        draining_hashes_unacked_messages=sum(r for _, r, _ in mine),
                        draining_hashes=sorted(mine),
                        last_sent_position_when_joining=str(joined) if joined is not None else None,
                        key_hash_ranges=list(ranges.get(s.consumer, [])),
                    )
                )
            name = {cid: s.name for cid, s in self._by_cid.items()}
            last_sent = core.last_sent_position()
            return SubscriptionStats(
                mode=self.mode,
                consumers=consumers,
                replay_size=core.replay_len(),
                look_ahead_limit=self.look_ahead_limit,
                last_sent_position=str(last_sent) if last_sent is not None else None,
                individually_sent_positions=core.individually_sent(),
                consumers_after_mark_delete_position={
                    name[c]: str(j) for c, j in core.recently_joined() if c in name
                },
                blocked_on_ack_state_persistent=(
                    self.policy.blocked_on_ack_state_persistent if self.policy is not None else False
                ),
                blocked={
                    slot: Blocked(
                        reason,  # type: ignore[arg-type]
                        consumer=name.get(c) if c is not None else None,
                        owner=name.get(o) if o is not None else None,
                        position=pos,
                    )
                    for slot, reason, c, o, pos in core.blocked()
                },
                read_blocked=self._read_blocked,
                unblocked_events=core.unblocked_events(),
                replay_dropped_acked=core.replay_dropped_acked(),
                draining_hashes_count=sum(c.draining_hashes_count for c in consumers),
                draining_hashes_cleared_total=sum(c.draining_hashes_cleared_total for c in consumers),
                draining_hashes_unacked_messages=sum(c.draining_hashes_unacked_messages for c in consumers),
            )


def _exact_impacts(selector: object) -> bool:
    """Whether the selector's impacts describe every slot that changed owner.

    cursorkit's own selectors do, over the whole 65536-slot space (a slot beyond a smaller space
    would wrap or be refused, which an impact does not describe).
    """
    if isinstance(selector, ConsistentHashingSelector):
        return True
    if isinstance(selector, AutoSplitSelector | ExclusiveRangeSelector):
        return selector.range_size == 65536
    return False


def _int64_column(values: Any, what: str) -> npt.NDArray[np.int64]:
    """A one-dimensional int64 array of ``values`` (no copy when it is one); typed errors otherwise.

    Only integers are taken: floats, bools and strings are refused, never truncated.
    """
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidInputType(f"{what} must be integers ({e})") from None
    if arr.ndim != 1:
        raise InvalidInputType(f"{what} must be one-dimensional, got {arr.ndim} dimensions")
    kind = arr.dtype.kind
    if kind == "O" and all(type(v) is int for v in arr.tolist()):  # ints beyond int64
        raise InvalidArgument(f"{what}: a value is outside int64")
    if arr.size and kind not in "iu":
        raise InvalidInputType(f"{what} must be integers, got {arr.dtype}")
    if kind == "u" and arr.size and int(arr.max()) > 2**63 - 1:
        raise InvalidArgument(f"{what}: a value is outside int64")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _columns(positions: Sequence[Position]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Ledger and entry columns of checked positions."""
    n = len(positions)
    ls = np.fromiter((p.ledger_id for p in positions), dtype=np.int64, count=n)
    es = np.fromiter((p.entry_id for p in positions), dtype=np.int64, count=n)
    return ls, es


def _positions(ls: npt.NDArray[np.int64], es: npt.NDArray[np.int64]) -> list[Position]:
    """Positions of two columns (the loop runs in C)."""
    return list(map(Position, ls.tolist(), es.tolist()))


def _check_slots(slots: npt.NDArray[np.int64]) -> None:
    if len(slots) and (int(slots.min()) < 1 or int(slots.max()) > 65535):
        raise InvalidArgument("slots must be in 1..=65535 (sticky-key hash slots)")


def _check_positions(positions: Sequence[object]) -> None:
    """Malformed acks stay typed errors: every item must be a ``Position``."""
    for p in positions:
        if not isinstance(p, Position):
            raise InvalidInputType(f"positions must be Position objects, got {type(p).__name__}")


def _count(n: object, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInputType(f"{what} must be an int, got {type(n).__name__}")
    if n < 0:
        raise InvalidArgument(f"{what} must be >= 0, got {n}")
    return n
