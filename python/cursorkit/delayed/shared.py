"""``SharedDelayedIndex``: one delayed index per topic serving every subscription (PIP-195's option).

Deliver-at belongs to the message, so every subscription's delayed messages fall due at the same
moments. The topic keeps one tracker; when messages fall due they are appended once to a due log,
and each subscription reads the log at its own offset. A subscription receives a due message only
if it had already read that position when the message fell due (its *watermark*, the highest
position it passed to ``add_message``); later positions it reads itself and, being due, dispatches
directly. Memory is one tracker plus the unread part of the log, whatever the number of
subscriptions.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cursorkit.delayed.bucket import Int64Array
from cursorkit.errors import InvalidArgument

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


class DelayedTracker(Protocol):
    """What both trackers offer; the shared index drives any of them."""

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """Tracks a message; False means dispatch it now."""
        ...

    def add_many(self, ledger_ids: Any, entry_ids: Any, deliver_at: Any) -> BoolArray:
        """Tracks messages given as columns; returns the tracked mask."""
        ...

    def has_message_available(self) -> bool:
        """Whether a message is due."""
        ...

    def get_scheduled_messages(self, max_messages: int) -> Int64Array:
        """Due messages as (ledger, entry) rows."""
        ...

    def contains_message(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is tracked."""
        ...

    def should_pause_all_deliveries(self) -> bool:
        """Whether the dispatcher should stop reading (fixed-delay detection)."""
        ...

    def next_delivery_time(self) -> int | None:
        """Earliest deliver-at held."""
        ...

    def now(self) -> int:
        """The tracker's clock (ms)."""
        ...

    @property
    def number_of_delayed_messages(self) -> int:
        """Positions tracked."""
        ...

    @property
    def buffer_memory_usage(self) -> int:
        """Bytes held."""
        ...


@dataclass(slots=True)
class _Chunk:
    """Positions that fell due together, and each subscription's watermark at that moment."""

    seq: int
    rows: Int64Array
    cuts: dict[str, tuple[int, int]]


@dataclass(slots=True)
class _Sub:
    name: str
    watermark: tuple[int, int] = (-1, -1)
    offset: int = 0
    """Sequence number of the first chunk not yet read."""
    backlog: deque[Int64Array] = field(default_factory=deque)


class SharedDelayedIndex:
    """A topic-wide delayed index; ``subscription(name)`` gives each subscription its tracker view."""

    def __init__(self, tracker: DelayedTracker) -> None:
        self.tracker = tracker
        self._lock = threading.RLock()
        self._subs: dict[str, _Sub] = {}
        self._chunks: list[_Chunk] = []
        self._next_seq = 0

    def subscription(self, name: str) -> SubscriptionView:
        """The view of subscription ``name`` (created on first use)."""
        with self._lock:
            if name not in self._subs:
                self._subs[name] = _Sub(name, offset=self._next_seq)
            return SubscriptionView(self, name)

    def remove_subscription(self, name: str) -> None:
        """Forgets a subscription (its unread due messages are released)."""
        with self._lock:
            if self._subs.pop(name, None) is None:
                raise InvalidArgument(f"no subscription {name!r} in the shared delayed index")
            self._collect()

    @property
    def subscriptions(self) -> list[str]:
        """Names of the subscriptions."""
        with self._lock:
            return sorted(self._subs)

    def memory_usage(self) -> int:
        """The tracker's buffers plus the retained due log."""
        with self._lock:
            return self.tracker.buffer_memory_usage + sum(c.rows.nbytes for c in self._chunks)

    def _sub(self, name: str) -> _Sub:
        try:
            return self._subs[name]
        except KeyError:
            raise InvalidArgument(
                f"subscription {name!r} was removed from the shared delayed index"
            ) from None

    def _pull(self) -> None:
        """Moves every due message of the topic into the log."""
        self._log(self.tracker.get_scheduled_messages(2**62))

    def _log(self, rows: Int64Array, skip: str | None = None) -> None:
        """Appends due positions, each owed to the subscriptions that had read it (all but ``skip``)."""
        if len(rows):
            cuts = {s.name: s.watermark for s in self._subs.values() if s.name != skip}
            self._chunks.append(_Chunk(self._next_seq, rows, cuts))
            self._next_seq += 1

    def _collect(self) -> None:
        low = min((s.offset for s in self._subs.values()), default=self._next_seq)
        while self._chunks and self._chunks[0].seq < low:
            self._chunks.pop(0)

    def _catch_up(self, sub: _Sub) -> None:
        """Pulls what is due, then moves the log rows owed to ``sub`` into its backlog."""
        self._pull()
        for chunk in self._chunks:
            if chunk.seq < sub.offset:
                continue
            cut = chunk.cuts.get(sub.name)
            if cut is not None:
                ls, es = chunk.rows[:, 0], chunk.rows[:, 1]
                mine = (ls < cut[0]) | ((ls == cut[0]) & (es <= cut[1]))
                if mine.any():
                    sub.backlog.append(chunk.rows[mine])
            sub.offset = chunk.seq + 1
        self._collect()

    def _read(self, sub: _Sub, limit: int) -> Int64Array:
        self._catch_up(sub)
        parts: list[Int64Array] = []
        need = limit
        while need > 0 and sub.backlog:  # from the front, without re-joining what stays
            head = sub.backlog[0]
            if len(head) <= need:
                parts.append(sub.backlog.popleft())
                need -= len(head)
            else:
                parts.append(head[:need])
                sub.backlog[0] = head[need:]
                need = 0
        if not parts:
            return np.empty((0, 2), dtype=np.int64)
        taken = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return taken[np.lexsort((taken[:, 1], taken[:, 0]))]


class SubscriptionView:
    """One subscription's delayed tracker, backed by the topic's shared index."""

    def __init__(self, index: SharedDelayedIndex, name: str) -> None:
        self._index = index
        self.name = name

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """Tracks a message this subscription read; False: it is due, dispatch it now.

        A tracked message that is due when re-read is untracked by the tracker (Pulsar's rule); the
        other subscriptions that read it earlier still get it, through the log.
        """
        index = self._index
        with index._lock:
            sub = index._sub(self.name)
            was = index.tracker.contains_message(ledger_id, entry_id)
            tracked = index.tracker.add_message(ledger_id, entry_id, deliver_at)
            if was and not tracked:
                index._log(np.array([[ledger_id, entry_id]], dtype=np.int64), skip=self.name)
            sub.watermark = max(sub.watermark, (ledger_id, entry_id))
            return tracked

    def add_many(self, ledger_ids: Any, entry_ids: Any, deliver_at: Any) -> BoolArray:
        """``add_message`` over columns; returns the tracked mask.

        Due messages are moved to the log first, so the adds cannot untrack what others still await.
        """
        with self._index._lock:
            sub = self._index._sub(self.name)
            self._index._pull()
            mask = self._index.tracker.add_many(ledger_ids, entry_ids, deliver_at)
            ls = np.asarray(ledger_ids, dtype=np.int64)
            if len(ls):
                es = np.asarray(entry_ids, dtype=np.int64)
                i = int(np.lexsort((es, ls))[-1])
                sub.watermark = max(sub.watermark, (int(ls[i]), int(es[i])))
            return mask

    def get_scheduled_messages(self, max_messages: int) -> Int64Array:
        """Up to ``max_messages`` due messages of this subscription, sorted by position."""
        if max_messages < 0:
            raise InvalidArgument(f"max_messages must be >= 0, got {max_messages}")
        with self._index._lock:
            return self._index._read(self._index._sub(self.name), max_messages)

    def _caught_up(self) -> _Sub:
        sub = self._index._sub(self.name)
        self._index._catch_up(sub)
        return sub

    def has_message_available(self) -> bool:
        """Whether a due message is owed to this subscription (exact: others' messages do not count)."""
        with self._index._lock:
            return bool(self._caught_up().backlog)

    def contains_message(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the topic index tracks the position."""
        return self._index.tracker.contains_message(ledger_id, entry_id)

    def next_delivery_time(self) -> int | None:
        """When to look again: now if a due message is owed, else the topic's next deliver-at.

        Never later than the earliest message this subscription is owed (it may be earlier, for a
        message only other subscriptions read, which then falls due to them); None when the topic
        tracks nothing and nothing is owed.
        """
        with self._index._lock:
            if self._caught_up().backlog:
                return self._index.tracker.now()
            return self._index.tracker.next_delivery_time()

    def should_pause_all_deliveries(self) -> bool:
        """The topic tracker's fixed-delay pause."""
        return self._index.tracker.should_pause_all_deliveries()

    @property
    def number_of_delayed_messages(self) -> int:
        """Messages the topic still delays plus this subscription's unread due ones."""
        with self._index._lock:
            sub = self._caught_up()
            return self._index.tracker.number_of_delayed_messages + sum(len(b) for b in sub.backlog)
