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

import bisect
import threading
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from cursorkit._core import DrainingHashes, Position, RangeSet
from cursorkit.ackstate import Cursor, DispatchPausePolicy
from cursorkit.errors import InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash

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
class _Read:
    """One read's entries as columns: positions, their slots, and deliver-at values (or None)."""

    positions: list[Position]
    slots: npt.NDArray[np.int64]
    deliver_at: list[int | None] | None


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
    consumer: Any
    name: str
    cid: int
    permits: int = 0
    pending: dict[Position, int] = field(default_factory=dict)
    """Unacked deliveries: position → slot."""
    joined_last_sent: Position | None = None
    delivered: int = 0


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
    """Positions dropped from the replay queue because the cursor had acknowledged them (Pulsar
    drops them when adding to replay at or below mark-delete, and when a replay read returns them)."""
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
        self._dropped_acked = 0
        self._redeliveries: dict[Position, int] = {}
        """Pulsar's redelivery count per unacked position (nack, redeliver, a consumer leaving)."""
        self._seen_mutations = -1
        """The cursor's mutation count after this dispatcher's own last change to it: when it moved
        since, something else acked (skip, TTL, seek, a shared cursor) and replays are re-checked."""
        self._rewind: Position | None = None
        """Set when the last consumer left: the broker must read again from after this position."""
        self._lock = threading.RLock()
        self._consumers: dict[Any, _Consumer] = {}
        self._by_cid: dict[int, _Consumer] = {}
        self._next_cid = 1
        self._draining = DrainingHashes()
        self._incoming: list[_Read] = []
        self._replay: dict[Position, int] = {}
        self._replay_order: list[Position] = []
        self._replay_slots: dict[int, int] = {}
        self._delayed_slots: dict[Position, int] = {}
        self._blocked: dict[int, Blocked] = {}
        self._unblocked = 0
        # PIP-282 state
        self._last_sent: Position | None = None
        self._sent = RangeSet()
        self._joined: dict[Any, Position] = {}
        self._highest_read: Position | None = None
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
            state = _Consumer(consumer, name, self._next_cid, permits=n)
            self._next_cid += 1
            self._consumers[consumer] = state
            self._by_cid[state.cid] = state
            self._register_draining(impact, skip=consumer)
            # Pulsar counts (mark-delete, read position], the next-to-read entry included: more than
            # one entry means something read after mark-delete may still be outstanding.
            read = self._highest_read
            if (
                self.mode == "last-sent"
                and len(self._consumers) > 1
                and read is not None
                and read > self.cursor.mark_delete_position
            ):
                lsp = self._lsp()
                state.joined_last_sent = lsp
                if lsp > self.cursor.mark_delete_position:
                    self._joined[consumer] = lsp

    def remove_consumer(self, consumer: Hashable) -> list[Position]:
        """Removes a consumer; its unacked messages go to the replay queue (returned, in order)."""
        with self._lock:
            state = self._state(consumer)
            impact = self.selector.remove_consumer(consumer)
            del self._consumers[consumer]
            del self._by_cid[state.cid]
            returned = sorted(state.pending)
            self._count_redeliveries(returned)
            if self._consumers:
                for pos in returned:
                    self._to_replay(pos, state.pending[pos])
            else:  # Pulsar: nobody left, so nothing is queued; the cursor rewinds and reads it all again
                self._drop_everything_read()
            state.pending.clear()
            self._draining.remove_consumer(state.cid, True)
            self._register_draining(impact, skip=consumer)
            self._joined.pop(consumer, None)
            if len(self._consumers) <= 1:
                self._joined.clear()
            if not self._consumers:
                self._last_sent = None
                self._sent.clear()
                self._draining.clear()
            return returned

    def add_permits(self, consumer: Hashable, n: int) -> None:
        """A consumer's flow request: ``n`` more messages may be sent to it."""
        k = _count(n, "permits")
        with self._lock:
            self._state(consumer).permits += k

    def _state(self, consumer: Hashable) -> _Consumer:
        try:
            return self._consumers[consumer]
        except (KeyError, TypeError):
            raise UnknownConsumer(
                f"consumer {getattr(consumer, 'name', consumer)!r} is not registered"
            ) from None

    def _register_draining(self, impact: Any, *, skip: Any) -> None:
        """PIP-379: hashes moved away from a consumer drain there while it has them unacked."""
        if self.mode != "draining" or impact is None:
            return
        for owner, ranges in getattr(impact, "removed", {}).items():
            state = self._consumers.get(owner)
            if owner is skip or state is None or not ranges:
                continue
            starts = [r[0] for r in ranges]
            moved: dict[int, int] = {}
            for h in state.pending.values():
                i = bisect.bisect_right(starts, h) - 1
                if i >= 0 and h <= ranges[i][1]:
                    moved[h] = moved.get(h, 0) + 1
            for h, n in moved.items():
                # A hash already draining here already counts every pending message of it (no new
                # one can have been sent meanwhile): counting again would leak a reference when a
                # hash moves away, back and away again (Pulsar #23421, #24736).
                if self._draining.owner(h) is None:
                    for _ in range(n):
                        self._draining.add_entry(state.cid, h)
        self._release_returned()

    def _release_returned(self) -> None:
        """Releases draining hashes a membership change gave back to the consumer they drain on.

        Pulsar 4.x (#24736) does it at once, firing the unblock if the hash held someone back,
        instead of waiting for the hash's next dispatch to that owner.
        """
        rows = self._draining.draining_hashes()
        if not len(rows):
            return
        hashes, owners, blocked = rows[:, 0], rows[:, 1], rows[:, 3]
        now = self.selector.select_many(hashes)
        by_index = self.selector.consumers_by_index
        for h, owner, held, idx in zip(
            hashes.tolist(), owners.tolist(), blocked.tolist(), now.tolist(), strict=True
        ):
            state = self._consumers.get(by_index[idx]) if idx >= 0 else None
            if state is not None and state.cid == owner:
                self._draining.should_block(owner, h)  # the owner's own hash: the entry goes (a clear)
                if held:
                    self._unblocked += 1

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
        with self._lock:
            if not self._consumers:  # read while nobody is connected: released, read again later
                if batch:
                    self._drop_everything_read()
                return
            if replay:
                for e in batch:
                    self._to_replay(e.position, e.slot)
                self._note_read([e.position for e in batch])
            elif batch:
                ats = [e.deliver_at for e in batch]
                self._incoming.append(
                    _Read(
                        [e.position for e in batch],
                        np.fromiter((e.slot for e in batch), np.int64, len(batch)),
                        ats if any(a is not None for a in ats) else None,
                    )
                )
                self._note_read(self._incoming[-1].positions)

    def add_read(self, positions: Sequence[Position], slots: Any, deliver_at: Any = None) -> None:
        """Entries of one read as columns: the bulk form of ``add_entries``.

        ``positions`` in read order, their selector ``slots`` (an int array), and optionally their
        ``deliver_at`` times.
        """
        pos = list(positions)
        if not all(type(p) is Position for p in pos):
            raise InvalidInputType("positions must be cursorkit.Position objects")
        col = np.ascontiguousarray(slots, dtype=np.int64)
        ats: list[int | None] | None = None
        if deliver_at is not None:
            ats = [int(a) for a in np.asarray(deliver_at, dtype=np.int64)]
        if col.ndim != 1 or len(col) != len(pos) or (ats is not None and len(ats) != len(pos)):
            raise InvalidArgument(
                f"positions, slots and deliver_at differ in length: {len(pos)}, {col.size}, "
                f"{'-' if ats is None else len(ats)}"
            )
        if len(pos):
            with self._lock:
                if not self._consumers:  # read while nobody is connected: released, read again later
                    self._drop_everything_read()
                    return
                self._incoming.append(_Read(pos, col, ats))
                self._note_read(pos)

    def _note_read(self, positions: list[Position]) -> None:
        if positions:
            top = max(positions)
            if self._highest_read is None or top > self._highest_read:
                self._highest_read = top

    def nack(self, consumer: Hashable, positions: Sequence[Position]) -> int:
        """Negative acks: the messages leave the consumer and are redelivered (order may change).

        As in Pulsar, a position not pending on ``consumer`` is skipped; returns how many were nacked.
        """
        with self._lock:
            state = self._state(consumer)
            _check_positions(positions)
            n = 0
            for pos in positions:
                slot = state.pending.pop(pos, None)
                if slot is None:
                    continue
                self._release(state, slot)
                self._to_replay(pos, slot)
                self._redeliveries[pos] = self._redeliveries.get(pos, 0) + 1
                n += 1
            return n

    def redeliver(self, consumer: Hashable) -> list[Position]:
        """Pulsar's redeliver-unacknowledged: all of the consumer's unacked messages go to replay."""
        with self._lock:
            held = sorted(self._state(consumer).pending)
            self.nack(consumer, held)
            return held

    def ack(self, consumer: Hashable, position: Position) -> AckResult:
        """An individual ack from ``consumer``, accepted as Pulsar accepts it (see ``AckResult``)."""
        with self._lock:
            state = self._state(consumer)
            try:
                slot = state.pending.pop(position, None)
            except TypeError:  # unhashable: refused, typed, by the slow path
                slot = None
            if slot is None:
                return self._ack_rest(state, [position], [])
            self.cursor.ack(position)
            if self._redeliveries:
                self._redeliveries.pop(position, None)
            unblocked = self._release(state, slot)
            self._after_acks()
            return _ACKED_UNBLOCKING if unblocked else _ACKED

    def ack_many(self, consumer: Hashable, positions: Sequence[Position]) -> AckResult:
        """Individual acks of many positions from one consumer, accepted as Pulsar accepts them.

        The usual case (all pending on ``consumer``) is one pass in C; anything else (pending on
        another consumer, never sent, already acked) is sorted out position by position.
        """
        with self._lock:
            state = self._state(consumer)
            pending = state.pending
            slots: list[int] = []
            try:  # extend appends one by one: on a miss, ``slots`` holds exactly what was taken
                slots.extend(map(pending.pop, positions))
            except (KeyError, TypeError):
                return self._ack_rest(state, positions, slots)
            deque(map(self.cursor.ack, positions), 0)  # the loop runs in C
            if self._redeliveries:
                deque(map(self._redeliveries.pop, positions, [None] * len(positions)), 0)
            unblocked = sum(self._release(state, h) for h in slots) if self._draining_live else 0
            self._after_acks()
            return AckResult(acked=len(slots), unblocked=unblocked)

    def _ack_rest(self, state: _Consumer, positions: Sequence[Position], taken: list[int]) -> AckResult:
        """Acks ``positions`` whose first ``len(taken)`` were popped from ``state`` already.

        Pulsar's rule: a position pending on another consumer is removed there; one pending on
        nobody is acked on the cursor (and leaves the replay queue); a duplicate changes nothing.
        """
        try:
            _check_positions(positions)
        except InvalidInputType:  # malformed: nothing changes
            for p, h in zip(positions, taken, strict=False):
                state.pending[p] = h
            raise
        head = positions[: len(taken)]
        deque(map(self.cursor.ack, head), 0)
        for pos in head:
            self._redeliveries.pop(pos, None)
        unblocked = sum(self._release(state, h) for h in taken)
        acked, other, nobody, dup = len(taken), 0, 0, 0
        for pos in positions[len(taken) :]:
            slot = state.pending.pop(pos, None)
            holder = state
            if slot is None:
                holder = next((s for s in self._consumers.values() if pos in s.pending), state)
                slot = holder.pending.pop(pos, None)
            if slot is not None:
                unblocked += self._release(holder, slot)
                if holder is state:
                    acked += 1
                else:
                    other += 1
            elif self.cursor.is_acked(pos):
                dup += 1
                continue
            else:
                nobody += 1
                if pos in self._replay:
                    self._from_replay(pos)
            self.cursor.ack(pos)
            self._redeliveries.pop(pos, None)
        self._after_acks()
        return AckResult(
            acked=acked, from_other_consumer=other, not_pending=nobody, duplicates=dup, unblocked=unblocked
        )

    def _after_acks(self) -> None:
        self._seen_mutations = self.cursor.mutations  # our own acks leave nothing acked in replay
        self._forget_joined()
        if self.policy is not None:
            self.policy.after_ack(self.cursor, "Key_Shared")

    def _forget_joined(self) -> None:
        """PIP-282: a joiner is free once mark-delete reaches its joining position."""
        if self._joined:
            md = self.cursor.mark_delete_position
            for c in [c for c, j in self._joined.items() if j <= md]:
                del self._joined[c]

    @property
    def _draining_live(self) -> bool:
        return len(self._draining) > 0

    def _release(self, state: _Consumer, slot: int) -> bool:
        if self.mode != "draining" or not self._draining_live:
            return False
        if self._draining.reduce_ref(state.cid, slot, False):
            self._unblocked += 1
            return True
        return False

    def _to_replay(self, pos: Position, slot: int) -> None:
        if pos in self._replay:
            return
        if pos <= self.cursor.mark_delete_position:  # acknowledged already: Pulsar never queues it
            self._dropped_acked += 1
            return
        self._replay[pos] = slot
        bisect.insort(self._replay_order, pos)
        self._replay_slots[slot] = self._replay_slots.get(slot, 0) + 1

    def _from_replay(self, pos: Position) -> None:
        slot = self._replay.pop(pos)
        i = bisect.bisect_left(self._replay_order, pos)
        del self._replay_order[i]
        left = self._replay_slots[slot] - 1
        if left:
            self._replay_slots[slot] = left
        else:
            del self._replay_slots[slot]

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
            permits = sum(s.permits for s in self._consumers.values() if s.permits > 0)
            room = max(self.look_ahead_limit - len(self._replay), 1)
            return min(room, permits)

    def should_read(self) -> bool:
        """Whether the broker should read new entries now (PIP-299, look-ahead, permits).

        When not, ``stats().read_blocked`` says why: ``paused`` (ack state not persistable),
        ``look-ahead`` (the replay queue is at its limit) or ``no-permits``.
        """
        with self._lock:
            if self.policy is not None and self.policy.should_pause(self.cursor, "Key_Shared"):
                self._read_blocked = "paused"
            elif len(self._replay) >= self.look_ahead_limit:
                self._read_blocked = "look-ahead"
            elif not any(s.permits > 0 for s in self._consumers.values()):
                self._read_blocked = "no-permits"
            else:
                self._read_blocked = None
            return self._read_blocked is None

    def dispatch_with_counts(self) -> list[tuple[Any, list[Position], npt.NDArray[np.int32]]]:
        """``dispatch()`` with each position's redelivery count, as an int32 array per consumer.

        Pulsar sends the count with the message; consumers use it for ``maxRedeliverCount``.
        """
        with self._lock:
            out = self.dispatch()
            red = self._redeliveries
            if not red:
                return [(c, ps, np.zeros(len(ps), dtype=np.int32)) for c, ps in out]
            return [
                (c, ps, np.fromiter((red.get(p, 0) for p in ps), dtype=np.int32, count=len(ps)))
                for c, ps in out
            ]

    def dispatch(self) -> list[tuple[Any, list[Position]]]:
        """Sends what can be sent: due delayed messages and the replay queue first, then new entries."""
        with self._lock:
            out: dict[int, list[Position]] = {}
            self._blocked.clear()
            self._forget_joined()
            if self.delayed is not None:
                for ledger, entry in self.delayed.get_scheduled_messages(2**31).tolist():
                    pos = Position(ledger, entry)
                    slot = self._delayed_slots.pop(pos, None)
                    if slot is not None:
                        self._to_replay(pos, slot)
            if self.cursor.mutations != self._seen_mutations:  # acked elsewhere (skip, TTL, seek)
                self._drop_acked_replays()
                self._drop_acked_counts()
            self._seen_mutations = self.cursor.mutations
            if self._replay_order:  # one selector call for the whole replay queue
                queued = list(self._replay_order)
                slots = [self._replay[pos] for pos in queued]
                owners = self.selector.select_many(np.array(slots, dtype=np.int64)).tolist()
                by_index = self.selector.consumers_by_index
                for pos, slot, owner in zip(queued, slots, owners, strict=True):
                    target = self._target(pos, slot, by_index[owner], replay=True)
                    if target is not None:
                        self._from_replay(pos)
                        self._send(target, pos, slot, out)
            reads, self._incoming = self._incoming, []
            for read in reads:
                self._dispatch_read(read, out)
            for cid, positions in out.items():
                self._by_cid[cid].delivered += len(positions)
            if self.mode == "last-sent" and out:
                self._advance_last_sent()
            return [(self._by_cid[cid].consumer, positions) for cid, positions in out.items()]

    def _count_redeliveries(self, positions: Iterable[Position]) -> None:
        red = self._redeliveries
        for pos in positions:
            red[pos] = red.get(pos, 0) + 1

    def _drop_everything_read(self) -> None:
        """Releases everything read when no consumer is left, as Pulsar's dispatcher does.

        The replay queue and unsent reads go, and the broker is told to rewind to mark-delete
        (``take_rewind``).
        """
        self._replay.clear()
        self._replay_order.clear()
        self._replay_slots.clear()
        self._incoming.clear()
        self._highest_read = None
        self._rewind = self.cursor.mark_delete_position

    def take_rewind(self) -> Position | None:
        """The position to read again after (mark-delete) when the last consumer left, or None.

        Everything read and not acknowledged was released then; the broker re-reads from the
        position after this one. Reading clears it.
        """
        with self._lock:
            rewind, self._rewind = self._rewind, None
            return rewind

    def redelivery_count(self, position: Position) -> int:
        """How many times ``position`` went back for redelivery (nack, redeliver, a leaving consumer)."""
        with self._lock:
            return self._redeliveries.get(position, 0)

    def _drop_acked_counts(self) -> None:
        """Forgets redelivery counts of positions the cursor acknowledged elsewhere (one bulk look-up)."""
        red = self._redeliveries
        if red:
            held = list(red)
            for i in np.flatnonzero(acked_mask(self.cursor, held)).tolist():
                del red[held[i]]

    def _drop_acked_replays(self) -> None:
        """Removes replay-queue positions the cursor has acknowledged: one bulk look-up."""
        queued = self._replay_order
        if not queued:
            return
        acked = acked_mask(self.cursor, queued)
        if acked.any():
            for i in np.flatnonzero(acked).tolist()[::-1]:
                self._redeliveries.pop(queued[i], None)
                self._from_replay(queued[i])
            self._dropped_acked += int(acked.sum())

    def _dispatch_read(self, read: _Read, out: dict[int, list[Position]]) -> None:
        """New entries of one read, in order; one selector call for all of them."""
        owners = self.selector.select_many(read.slots).tolist()
        by_index = self.selector.consumers_by_index
        consumers, replay_slots, delayed = self._consumers, self._replay_slots, self.delayed
        # Fast path: no gate can hold an entry back (nothing draining, no PIP-282 joiners).
        plain = (self.mode == "out-of-order" or not self._draining_live) and not self._joined
        plain = plain and self.mode != "last-sent"
        ats = read.deliver_at if read.deliver_at is not None else [None] * len(owners)
        for pos, slot, owner, at in zip(read.positions, read.slots.tolist(), owners, ats, strict=True):
            if (
                at is not None
                and delayed is not None
                and delayed.add_message(pos.ledger_id, pos.entry_id, at)
            ):
                self._delayed_slots[pos] = slot
                continue
            if slot in replay_slots:  # earlier messages of this hash are waiting
                self._blocked.setdefault(slot, Blocked("replay-order", position=pos))
                self._to_replay(pos, slot)
                continue
            consumer = by_index[owner]
            state = consumers.get(consumer) if consumer is not None else None
            if plain and state is not None and state.permits > 0:
                state.permits -= 1
                state.pending[pos] = slot
                sent = out.get(state.cid)
                if sent is None:
                    out[state.cid] = [pos]
                else:
                    sent.append(pos)
                continue
            target = self._target(pos, slot, consumer)
            if target is None:
                self._to_replay(pos, slot)
            else:
                self._send(target, pos, slot, out)

    def _target(self, pos: Position, slot: int, consumer: Any, *, replay: bool = False) -> _Consumer | None:
        """The consumer ``slot`` may go to now, or None (the reason is recorded)."""
        state = self._consumers.get(consumer) if consumer is not None else None
        if state is None:
            self._blocked.setdefault(slot, Blocked("no-consumer", position=pos))
            return None
        if state.permits <= 0:
            self._blocked.setdefault(slot, Blocked("no-permits", consumer=state.name, position=pos))
            return None
        if self.mode == "draining" and self._draining_live and self._draining.should_block(state.cid, slot):
            owner = self._by_cid.get(self._draining.owner(slot) or -1)
            self._blocked.setdefault(
                slot,
                Blocked("draining", consumer=state.name, owner=owner.name if owner else None, position=pos),
            )
            return None
        if self.mode == "last-sent":
            limit = self._joined.get(state.consumer)
            if limit is not None and replay:  # 3.3: replays to joiners stop at the earliest joiner's
                limit = min(limit, min(self._joined.values()))
            if limit is not None and pos > limit:
                self._blocked.setdefault(slot, Blocked("recently-joined", consumer=state.name, position=pos))
                return None
        return state

    def _send(self, state: _Consumer, pos: Position, slot: int, out: dict[int, list[Position]]) -> None:
        state.permits -= 1
        state.pending[pos] = slot
        out.setdefault(state.cid, []).append(pos)
        if self.mode == "last-sent":
            lsp = self._lsp()
            if pos > lsp and not self._sent.contains(pos.ledger_id, pos.entry_id):
                self._sent.add(pos.ledger_id, pos.entry_id)

    # --- PIP-282 ------------------------------------------------------------------------------------

    def _lsp(self) -> Position:
        md = self.cursor.mark_delete_position
        if self._last_sent is None:  # first use: the cursor's ack holes count as sent (3.3)
            self._sent = self.cursor.individually_deleted
        if self._last_sent is None or self._last_sent < md:
            self._last_sent = md
        return self._last_sent

    def _next(self, pos: Position) -> Position:
        """The entry after ``pos``.

        Past a ledger's last entry (the cursor's ledger sizes say where it ends) that is the first
        entry of the next non-empty ledger, so the last sent position crosses ledger boundaries.
        """
        sizes = self.cursor.ledger_sizes
        if sizes and pos.entry_id + 1 >= sizes.get(pos.ledger_id, 2**63):
            later = [lid for lid, n in sizes.items() if lid > pos.ledger_id and n > 0]
            if later:
                return Position(min(later), 0)
        return Position(pos.ledger_id, pos.entry_id + 1)

    def _advance_last_sent(self) -> None:
        """Moves the last sent position over every contiguous run of sent positions after it."""
        lsp = self._lsp()
        self._sent.remove_at_most(lsp.ledger_id, lsp.entry_id)
        while True:
            nxt = self._next(lsp)
            if not self._sent.contains(nxt.ledger_id, nxt.entry_id):
                break
            run = self._sent.range_containing(nxt.ledger_id, nxt.entry_id)
            assert run is not None
            lsp = run[1]
        self._last_sent = lsp
        self._sent.remove_at_most(lsp.ledger_id, lsp.entry_id)

    # --- state ----------------------------------------------------------------------------------------

    @property
    def consumers(self) -> list[Any]:
        """Registered consumers, in join order."""
        with self._lock:
            return [s.consumer for s in self._consumers.values()]

    def unacked(self, consumer: Hashable) -> list[Position]:
        """Positions sent to ``consumer`` and not acked yet, in order."""
        with self._lock:
            return sorted(self._state(consumer).pending)

    @property
    def replay_queue(self) -> list[Position]:
        """Positions waiting for redelivery, in order."""
        with self._lock:
            return list(self._replay_order)

    def stats(self) -> SubscriptionStats:
        """Pulsar 4's Key_Shared stats plus the reason each blocked hash is blocked."""
        with self._lock:
            ranges_of = getattr(self.selector, "consumer_key_hash_ranges", None)
            ranges: dict[Any, list[tuple[int, int]]] = ranges_of() if callable(ranges_of) else {}
            cleared = {cid: c["draining_hashes_cleared_total"] for cid, c in self._draining.stats().items()}
            per: dict[int, list[tuple[int, int, int]]] = {}
            for h, owner, refs, blocked in self._draining.draining_hashes().tolist():
                per.setdefault(owner, []).append((h, refs, blocked))
            consumers = [
                ConsumerStats(
                    name=s.name,
                    available_permits=s.permits,
                    unacked_messages=len(s.pending),
                    msg_out_counter=s.delivered,
                    draining_hashes_count=len(per.get(s.cid, [])),
                    draining_hashes_cleared_total=cleared.get(s.cid, 0),
                    draining_hashes_unacked_messages=sum(r for _, r, _ in per.get(s.cid, [])),
                    draining_hashes=sorted(per.get(s.cid, [])),
                    last_sent_position_when_joining=(
                        str(s.joined_last_sent) if s.joined_last_sent is not None else None
                    ),
                    key_hash_ranges=list(ranges.get(s.consumer, [])),
                )
                for s in self._consumers.values()
            ]
            return SubscriptionStats(
                mode=self.mode,
                consumers=consumers,
                replay_size=len(self._replay),
                look_ahead_limit=self.look_ahead_limit,
                last_sent_position=str(self._last_sent) if self._last_sent is not None else None,
                individually_sent_positions=str(self._sent),
                consumers_after_mark_delete_position={
                    self._consumers[c].name: str(j) for c, j in self._joined.items() if c in self._consumers
                },
                blocked_on_ack_state_persistent=(
                    self.policy.blocked_on_ack_state_persistent if self.policy is not None else False
                ),
                blocked=dict(self._blocked),
                read_blocked=self._read_blocked,
                unblocked_events=self._unblocked,
                replay_dropped_acked=self._dropped_acked,
                draining_hashes_count=sum(c.draining_hashes_count for c in consumers),
                draining_hashes_cleared_total=sum(c.draining_hashes_cleared_total for c in consumers),
                draining_hashes_unacked_messages=sum(c.draining_hashes_unacked_messages for c in consumers),
            )


def acked_mask(cursor: Cursor, positions: Sequence[Position]) -> npt.NDArray[np.bool_]:
    """Which of ``positions`` the cursor has acknowledged: one bulk call into Rust."""
    n = len(positions)
    ls = np.fromiter((p.ledger_id for p in positions), dtype=np.int64, count=n)
    es = np.fromiter((p.entry_id for p in positions), dtype=np.int64, count=n)
    return cursor.is_acked_many(ls, es)


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
