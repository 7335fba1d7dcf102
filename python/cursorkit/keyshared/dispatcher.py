"""``KeySharedDispatcher``: Key_Shared dispatch with Pulsar's three ordering modes, as one actor.

Entries read from the cursor come in (``add_entries``); deliveries come out of ``dispatch()`` as
``(consumer, positions)``. Every decision for a subscription happens in one place, under one lock,
so the join-during-send races of Pulsar's dispatchers cannot happen: the PIP-379
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
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast

import numpy as np
import numpy.typing as npt

from cursorkit._core import KeySharedBase, Position
from cursorkit.ackstate import Cursor, DispatchPausePolicy, RaisedCounts
from cursorkit.errors import ConsumerAssignError, InvalidArgument, InvalidInputType, UnknownConsumer
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash
from cursorkit.keyshared.hooks import DelayedTracker, Selector
from cursorkit.keyshared.selectors import AutoSplitSelector, ConsistentHashingSelector, ExclusiveRangeSelector
from cursorkit.keyshared.stats import Mode, SubscriptionStats, subscription_stats

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


class Entry(NamedTuple):
    """An entry read from the cursor: its position, its sticky-key slot, and an optional deliver-at."""

    position: Position
    slot: int
    deliver_at: int | None = None


class AckResult(NamedTuple):
    """What an ack did. Like Pulsar, every well-formed ack is accepted and reaches the cursor.

    With key-ordered nacks on (beyond Pulsar) an ack may wait, or be dropped: ``parked``, ``stale``.
    Truthy when it unblocked a draining hash (what ``ack`` used to return). Results are shared:
    each distinct outcome is made once (in Rust) and handed back again.
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
    parked: int = 0
    """Key-ordered nacks: acks waiting for an earlier message of their key the consumer has not
    answered (applied when it is acked; dropped, their messages sent again, when it is nacked)."""
    stale: int = 0
    """Key-ordered nacks: answers to copies taken back from the consumer at a nack (dropped: each
    such message is sent again after the nacked one)."""

    def __bool__(self) -> bool:  # noqa: D105
        return self.unblocked > 0


@dataclass(slots=True, eq=False)
class _Consumer:
    """A registered consumer: its object, name and id in the Rust core (which holds its state)."""

    consumer: Any
    name: str
    cid: int


_ALL_SLOTS = np.arange(65536, dtype=np.int64)
"""Every slot: the owner table is one ``select_many`` of these after each membership change."""


class KeySharedDispatcher(KeySharedBase):
    """Dispatches a Key_Shared subscription's entries to consumers, keeping per-key order.

    ``cursor`` receives the acks; ``policy`` (PIP-299) is consulted before new entries are read;
    ``delayed`` holds messages with a deliver-at until they are due (its ``add_many`` may be handed
    the caller's own read arrays: it must not write to them). Consumers are hashable objects
    with a ``.name``; ``slot_kind`` is how a sticky-key hash maps to the selector's slots
    (``"consistent"`` for consistent hashing, ``"range"`` otherwise).

    The per-entry loop, pending acks, the replay queue and the ordering gates live in Rust
    (``cursorkit._core.DispatchCore``), and so do the calls a broker makes per event: ``ack``,
    ``ack_many``, ``ack_columns``, ``add_permits``, ``nack``, ``should_read``,
    ``max_entries_to_read``, ``add_read``, ``add_read_columns``, ``dispatch``, ``dispatch_columns``
    and ``redelivery_count`` are inherited from ``cursorkit._core.KeySharedBase``, each one call
    into Rust with no Python frame or lock around it (``Position`` lists are read there, results
    made there). Membership changes and stats are Python, under a lock of their own. Every call is
    safe from any thread.

    ``max_unacked_per_key`` (beyond Pulsar, off by default): a key with that many messages sent and
    not acknowledged is held — nothing more of it goes to anyone, shown as ``key-unacked-limit`` —
    until acks or nacks bring it below. Keys are counted by sticky-key hash slot (keys sharing a
    slot share the cap); a batch counts as its messages, and one still goes when none is out.

    ``key_ordered_nacks`` (beyond Pulsar, off by default; draining and last-sent modes): a nack
    keeps its key's order. The nacked message and every later message of its key in flight go
    back and are sent again in position order; an ack that overtakes an earlier message of its key
    the consumer has not answered yet waits for it (``AckResult.parked``: applied after it, or
    dropped if it is nacked); a consumer's answers to copies taken back from it are dropped
    (``AckResult.stale``) and the key is not sent to it again until it has answered them. Each
    key's accepted acks then come from deliveries in position order, for consumers that handle
    their messages in the order received, whatever their ack grouping or nack delay (see
    docs/semantics/keyshared.md, "Key-ordered negative acks"). ``redeliver`` and leaving release a
    consumer's holds.

    ``stuck_after`` (beyond Pulsar, off by default): stuck-consumer isolation. ``isolate_stuck()``
    marks a consumer stuck after that many seconds without progress (ack, nack or flow) while it
    holds unacked messages or has no permits: its keys' entries that cannot be sent are dropped
    from memory (``spilled``) instead of filling the look-ahead all share. Once it recovers or
    leaves, ``take_reread()`` names a span to read again and ``add_reread(...)`` brings them back
    once each, in order, before anything newer of their keys: none lost, none acked sent again.
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
        max_unacked_per_key: int = 0,
        key_ordered_nacks: bool = False,
        stuck_after: float | None = None,
    ) -> None:
        # The cursor, mode, policy, delayed tracker and look-ahead settings were taken (and
        # checked) by KeySharedBase.__new__, which holds them for the per-event calls.
        self.selector = selector
        self.mode: Mode = mode
        if slot_kind is None:
            slot_kind = "consistent" if type(selector).__name__ == "ConsistentHashingSelector" else "range"
        self.slot_kind = slot_kind
        self._exact_impacts = _exact_impacts(selector)
        """Whether membership changes may update the owner table from the impact alone."""
        self._lock = threading.RLock()
        """Membership changes and stats; the per-event calls lock the Rust core instead."""
        self._consumers: dict[Any, _Consumer] = {}
        self._by_cid: dict[int, _Consumer] = {}
        self._next_cid = 1
        if max_unacked_per_key:
            self._core.set_max_unacked_per_key(max_unacked_per_key)
        flag: object = key_ordered_nacks  # callers without type checking pass anything
        if not isinstance(flag, bool):
            raise InvalidInputType(f"key_ordered_nacks must be a bool, got {type(flag).__name__}")
        if flag:
            self._core.set_key_ordered_nacks(True)
        after: object = stuck_after
        positive = isinstance(after, int | float) and not isinstance(after, bool) and after > 0
        if after is not None and not positive:
            raise InvalidArgument(f"stuck_after must be a positive number of seconds or None, got {after!r}")
        self.stuck_after: float | None = None if stuck_after is None else float(stuck_after)
        """Stuck-consumer isolation (beyond Pulsar): seconds without progress that make a
        consumer stuck (None: off, as in Pulsar)."""
        self._progress: dict[int, tuple[int, float]] = {}
        """Consumer id -> (its progress counter, when it last moved)."""
        self._checked_at = float("-inf")
        """When ``isolate_stuck`` last walked the consumers."""

    @property
    def max_unacked_per_key(self) -> int:
        """The per-key in-flight cap (0: none; beyond Pulsar)."""
        return int(self._core.max_unacked_per_key())

    @property
    def key_ordered_nacks(self) -> bool:
        """Whether nacks keep key order (beyond Pulsar)."""
        return bool(self._core.key_ordered_nacks())

    # --- consumers --------------------------------------------------------------------------------

    def add_consumer(
        self, consumer: Hashable, permits: int = 0, ranges: Iterable[tuple[int, int]] | None = None
    ) -> None:
        """Registers a consumer (it must have a ``.name``); hashes it takes over may start draining.

        With an :class:`ExclusiveRangeSelector` (STICKY) the consumer brings its inclusive hash
        ``ranges``; ranges another consumer holds raise ``ConsumerAssignError`` and nothing changes.
        """
        name = getattr(consumer, "name", None)
        if not isinstance(name, str):
            raise InvalidInputType(f"a consumer needs a str .name, got {type(consumer).__name__}")
        n = _count(permits, "permits")
        sticky = isinstance(self.selector, ExclusiveRangeSelector)
        if sticky and ranges is None:
            raise ConsumerAssignError(f"a STICKY consumer needs hash ranges: {name!r} brought none")
        if not sticky and ranges is not None:
            raise InvalidArgument("hash ranges are for STICKY (exclusive-range) selectors only")
        with self._lock:
            if consumer in self._consumers:
                raise InvalidArgument(f"consumer {name!r} is already registered")
            if sticky:
                exclusive = cast(ExclusiveRangeSelector[Any], self.selector)
                impact = exclusive.add_consumer(consumer, list(ranges or ()))
            else:
                impact = self.selector.add_consumer(consumer)
            state = _Consumer(consumer, name, self._next_cid)
            self._next_cid += 1
            self._core.add_consumer(state.cid, n, self.cursor)
            self._consumers[consumer] = state
            self._by_cid[state.cid] = state
            self._register(consumer, state.cid)
            self._membership_changed(impact, state.cid)

    @property
    def sticky(self) -> bool:
        """Whether consumers bring their own hash ranges (Pulsar's STICKY mode)."""
        return isinstance(self.selector, ExclusiveRangeSelector)

    def remove_consumer(self, consumer: Hashable) -> list[Position]:
        """Removes a consumer; its unacked messages go to the replay queue (returned, in order).

        As in Pulsar, their redelivery counts are not raised, and when the last consumer leaves the
        counts are cleared. Messages the cursor acknowledged meanwhile are dropped, never resent.
        """
        with self._lock:
            state = self._state(consumer)
            impact = self.selector.remove_consumer(consumer)
            returned = self._core.remove_consumer(state.cid, self.cursor)
            self._unregister(consumer)
            del self._consumers[consumer]
            del self._by_cid[state.cid]
            self._progress.pop(state.cid, None)
            self._membership_changed(impact, state.cid)
            return returned

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

    def set_batch_sizes(self, positions: Sequence[Position], messages: Sequence[int]) -> None:
        """How many messages entries hold (a batch's ``num_messages_in_batch``), before they are read.

        Permits count messages, as the client's FLOW does: sending an entry takes as many of its
        consumer's permits as it holds messages (an entry with fewer permits left still goes, as
        in Pulsar). Entries never given a size count as one message.
        """
        self._core.set_batch_sizes(*_columns(positions), np.asarray(messages, dtype=np.int64))

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
        # No deliver-at is one in the past (0): the tracker never holds it.
        delayed = any(a is not None for a in ats)
        at = np.fromiter((a or 0 for a in ats), np.int64, len(ats)) if delayed else None
        self.add_read_columns(ls, es, slots, at)

    # --- acks ---------------------------------------------------------------------------------------

    def redeliver(self, consumer: Hashable) -> list[Position]:
        """Pulsar's redeliver-unacknowledged: all of the consumer's unacked messages, as ``nack``."""
        with self._lock:
            return self._core.redeliver(self._state(consumer).cid, self.cursor)

    # --- reads and dispatch ---------------------------------------------------------------------------

    # --- durable redelivery counts (beyond Pulsar) -------------------------------------------------

    def journal_redelivery_counts(self, on: bool = True) -> None:
        """Journals every redelivery-count raise for a durable store; counts then outlive the last leaver."""
        with self._lock:
            self._core.set_counts_journal(on)

    def take_raised_counts(self) -> RaisedCounts:
        """The raises journaled since the last call (empty with the journal off)."""
        with self._lock:
            return RaisedCounts(*self._core.take_raised_counts())

    def seed_redelivery_counts(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Counts read back from a durable store: each position keeps the higher of its count and this."""
        with self._lock:
            self._core.seed_counts(ledger_ids, entry_ids, counts)

    def raise_redelivery_counts(self, positions: Sequence[Position]) -> None:
        """One more redelivery of each position (a consumer lost holding them); journaled."""
        with self._lock:
            self._core.raise_counts(positions)

    def dispatch_with_counts(self) -> list[tuple[Any, list[Position], npt.NDArray[np.int32]]]:
        """``dispatch()`` with each position's redelivery count, as an int32 array per consumer.

        Pulsar sends the count with the message; consumers use it for ``maxRedeliverCount``.
        """
        with self._lock:
            return [
                (c, _positions(ls, es), self._core.redelivery_counts(ls, es))
                for c, ls, es in self.dispatch_columns()
            ]

    def isolate_stuck(self, now: float | None = None) -> tuple[list[Any], list[Any]]:
        """Stuck-consumer isolation's policy: marks consumers stuck or recovered; returns both lists.

        Stuck: no progress (ack, nack or flow) for ``stuck_after`` seconds while holding unacked
        messages or with no permits. Recovered: progress since. ``now`` defaults to
        ``time.monotonic()``. Does nothing when isolation is off, nor more often than every eighth
        of ``stuck_after`` (a broker may call it per dispatch: the walk over the consumers is paid
        a few times per period, not per event).
        """
        if self.stuck_after is None:
            return [], []
        at = time.monotonic() if now is None else now
        if at - self._checked_at < self.stuck_after / 8:
            return [], []
        self._checked_at = at
        stuck: list[Any] = []
        recovered: list[Any] = []
        with self._lock:
            core = self._core
            for s in self._consumers.values():
                permits, unacked, _, _, progress, is_stuck = core.consumer_figures(s.cid)
                seen = self._progress.get(s.cid)
                if seen is None or seen[0] != progress:
                    self._progress[s.cid] = (progress, at)
                    if is_stuck and seen is not None:
                        core.set_stuck(s.cid, False)
                        recovered.append(s.consumer)
                    continue
                idle = at - seen[1] >= self.stuck_after
                if idle and not is_stuck and (unacked > 0 or permits == 0):
                    core.set_stuck(s.cid, True)
                    stuck.append(s.consumer)
        return stuck, recovered

    def take_reread(self) -> tuple[Position, Position] | None:
        """The span ``(first, last)`` to read again from the log for spilled entries, or None.

        None when none can come back now (their consumers are stuck, or the look-ahead is full).
        Read from ``first`` on, all of it or a first part, for ``add_reread`` before the next dispatch.
        """
        with self._lock:
            if self._reread_room() == 0:
                return None
            return self._core.take_reread()

    def add_reread(self, entries: Iterable[Entry], read_to: Position | None = None) -> int:
        """The entries of the span ``take_reread`` named, read again; returns how many came back.

        ``entries``: every entry of the log from the span's first through ``read_to`` (None: its
        last). That part is done with (each spilled entry is read back once); at most the room the
        look-ahead leaves, and the per-consumer look-ahead, comes back: the rest stays spilled and
        the next ``take_reread`` names it, so the replay queue stays bounded.
        """
        batch = list(entries)
        _check_positions([e.position for e in batch])
        ls, es = _columns([e.position for e in batch])
        slots = np.fromiter((e.slot for e in batch), np.int64, len(batch))
        with self._lock:
            room = self._reread_room()
            return int(self._core.add_reread(ls, es, slots, room, self.cursor, read_to))

    def _reread_room(self) -> int | None:
        """How many spilled entries a re-read may bring back now (None: no limit)."""
        limit = self.look_ahead_limit
        per = self.look_ahead_per_consumer or limit
        return None if limit >= UNLIMITED else max(0, min(limit - self._core.replay_len(), per))

    def take_rewind(self) -> Position | None:
        """The position to read again after (mark-delete) when the last consumer left, or None.

        Everything read and not acknowledged was released then; the broker re-reads from the
        position after this one. Reading clears it.
        """
        with self._lock:
            return self._core.take_rewind()

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
        """Heap bytes of what the consumers have in flight (about 4 per unacked message)."""
        with self._lock:
            return self._core.pending_memory_usage()

    def stats(self) -> SubscriptionStats:
        """Pulsar 4's Key_Shared stats plus the reason each blocked hash is blocked."""
        with self._lock:
            return subscription_stats(
                self._core,
                self.selector,
                [(s.consumer, s.name, s.cid) for s in self._consumers.values()],
                mode=self.mode,
                look_ahead_limit=self.look_ahead_limit,
                blocked_on_ack_state_persistent=(
                    self.policy.blocked_on_ack_state_persistent if self.policy is not None else False
                ),
                read_blocked=self.read_blocked,
                isolating=self.stuck_after is not None,
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


def _columns(positions: Sequence[Position]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Ledger and entry columns of checked positions."""
    n = len(positions)
    ls = np.fromiter((p.ledger_id for p in positions), dtype=np.int64, count=n)
    es = np.fromiter((p.entry_id for p in positions), dtype=np.int64, count=n)
    return ls, es


def _positions(ls: npt.NDArray[np.int64], es: npt.NDArray[np.int64]) -> list[Position]:
    """Positions of two columns (the loop runs in C)."""
    return list(map(Position, ls.tolist(), es.tolist()))


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
