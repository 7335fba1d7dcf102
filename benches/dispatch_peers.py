"""The naive pure-Python Key_Shared dispatcher the benchmark compares against (issue 14).

What a Python broker would write first: an owner list per slot (refreshed from the selector on each
membership change), permits, a dict of pending messages per consumer, and a retry list for what
could not be sent. It keeps no ordering guarantee at all (no replay order, no draining, no
last-sent rule), so it is an upper bound on what pure Python does per message. It speaks the
column API the ``Simulation`` drives, converting at the edges as a Python broker would.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cursorkit import Cursor, Position
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash

I64 = npt.NDArray[np.int64]
_ALL_SLOTS = np.arange(65536, dtype=np.int64)


class NaiveDispatcher:
    """Selector owner table + permits + pending dicts, one Python loop iteration per message."""

    mode = "out-of-order"

    def __init__(self, *, selector: Any, cursor: Cursor) -> None:
        self.selector = selector
        self.cursor = cursor
        self.owner: list[Any] = [None] * 65536
        self.permits: dict[Any, int] = {}
        self.pending: dict[Any, dict[tuple[int, int], int]] = {}
        self.waiting: list[tuple[int, int, int]] = []
        self.incoming: list[tuple[int, int, int]] = []

    def slot_of(self, key: bytes) -> int:
        """The selector slot of a key."""
        return slot_of_hash(sticky_key_hash(key), "consistent")

    def _refresh(self) -> None:
        by_index = self.selector.consumers_by_index
        self.owner = [by_index[i] for i in self.selector.select_many(_ALL_SLOTS).tolist()]

    def add_consumer(self, consumer: Any, permits: int) -> None:
        """Joins: the owner list is rebuilt."""
        self.selector.add_consumer(consumer)
        self.permits[consumer] = permits
        self.pending[consumer] = {}
        self._refresh()

    def remove_consumer(self, consumer: Any) -> None:
        """Leaves: its pending messages are retried."""
        self.selector.remove_consumer(consumer)
        held = self.pending.pop(consumer)
        del self.permits[consumer]
        self.waiting.extend((lid, eid, s) for (lid, eid), s in sorted(held.items()))
        self._refresh()

    def add_permits(self, consumer: Any, n: int) -> None:
        """Flow."""
        self.permits[consumer] += n

    def should_read(self) -> bool:
        """Reads while the retry list is short."""
        return len(self.waiting) < 20_000

    def take_rewind(self) -> Position | None:
        """Never rewinds."""
        return None

    def add_read_columns(self, ledgers: I64, entries: I64, slots: I64) -> None:
        """A read, kept as Python tuples."""
        self.incoming.extend(zip(ledgers.tolist(), entries.tolist(), slots.tolist(), strict=True))

    def dispatch_columns(self) -> list[tuple[Any, I64, I64]]:
        """One loop iteration per message: owner, permits, pending, output."""
        todo, self.waiting, self.incoming = self.waiting + self.incoming, [], []
        owner, permits, pending, waiting = self.owner, self.permits, self.pending, self.waiting
        out: dict[Any, tuple[list[int], list[int]]] = {}
        for lid, eid, s in todo:
            c = owner[s]
            if c is None or permits[c] <= 0:
                waiting.append((lid, eid, s))
                continue
            permits[c] -= 1
            pending[c][(lid, eid)] = s
            got = out.get(c)
            if got is None:
                out[c] = got = ([], [])
            got[0].append(lid)
            got[1].append(eid)
        return [
            (c, np.array(ls, dtype=np.int64), np.array(es, dtype=np.int64)) for c, (ls, es) in out.items()
        ]

    def ack_columns(self, consumer: Any, ledgers: I64, entries: I64) -> None:
        """Pending entries dropped one by one; the cursor gets one bulk call."""
        held = self.pending[consumer]
        for key in zip(ledgers.tolist(), entries.tolist(), strict=True):
            held.pop(key, None)
        self.cursor.ack_many(ledgers, entries)
