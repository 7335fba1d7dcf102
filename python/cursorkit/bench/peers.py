"""What people run today instead of cursorkit: the peers the benchmarks put beside it.

Each is what a Python broker writes first with the libraries at hand: a pyroaring bitmap per ledger
with Pulsar's roll-forward rule, a sortedcontainers set of packed positions, Murmur3 in plain Python
(or ``mmh3``), a ``heapq`` of tuples, and a Key_Shared dispatcher with an owner list, permits and a
pending dict per consumer. Optional peers are ``None`` when not installed.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from cursorkit import Cursor, Position
from cursorkit.keyshared.hashing import slot as slot_of_hash
from cursorkit.keyshared.hashing import sticky_key_hash

__all__ = ["NaiveDispatcher", "PyroaringCursor", "murmur3_py", "optional"]

I64 = npt.NDArray[np.int64]
_M32 = 0xFFFFFFFF
_ALL_SLOTS = np.arange(65536, dtype=np.int64)


def optional(name: str) -> Any:
    """The module ``name`` if it is installed, else None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@cache
def _blocks(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def murmur3_py(key: bytes, seed: int = 0) -> int:
    """Murmur3 x86_32 in plain Python (blocks unpacked by ``struct``), masked to 31 bits as Pulsar does."""
    n = len(key)
    full = n & ~3
    h = seed
    for k in _blocks(n >> 2).unpack_from(key):
        k = (k * 0xCC9E2D51) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        h ^= (k * 0x1B873593) & _M32
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    if n > full:
        k = (int.from_bytes(key[full:], "little") * 0xCC9E2D51) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        h ^= (k * 0x1B873593) & _M32
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return (h ^ (h >> 16)) & 0x7FFFFFFF


class PyroaringCursor:
    """Mark-delete + one pyroaring ``BitMap`` per ledger, rolled forward like Pulsar (no ledger sizes)."""

    def __init__(self, mark_delete: tuple[int, int]) -> None:
        self.md = mark_delete
        self.ledgers: dict[int, Any] = {}
        self._bitmap = importlib.import_module("pyroaring").BitMap

    def ack(self, ledger: int, entry: int) -> bool:
        """Individual ack with Pulsar's no-op and roll-forward rules."""
        md_ledger, md_entry = self.md
        if ledger < md_ledger or (ledger == md_ledger and entry <= md_entry):
            return False
        bm = self.ledgers.get(ledger)
        if bm is None:
            bm = self.ledgers[ledger] = self._bitmap()
        elif entry in bm:
            return False
        if ledger == md_ledger and entry == md_entry + 1:
            end = entry
            while end + 1 in bm:
                end += 1
            if end > entry:
                bm.remove_range(entry + 1, end + 1)
            self.md = (ledger, end)
        else:
            bm.add(entry)
        return True

    def ack_many(self, ledgers: I64, entries: I64) -> None:
        """Bulk ack: one ``update`` per ledger (numpy grouping), then a roll-forward check."""
        order = np.argsort(ledgers, kind="stable")
        ls, es = ledgers[order], entries[order]
        cuts = np.flatnonzero(np.diff(ls)) + 1
        for chunk_l, chunk_e in zip(np.split(ls, cuts), np.split(es, cuts), strict=True):
            if chunk_l.size:
                bm = self.ledgers.setdefault(int(chunk_l[0]), self._bitmap())
                bm.update(chunk_e.astype(np.uint32))
        md_ledger, md_entry = self.md
        bm = self.ledgers.get(md_ledger)
        if bm is not None and md_entry + 1 in bm:
            bm.discard(md_entry + 1)
            self.ack(md_ledger, md_entry + 1)


class NaiveDispatcher:
    """Key_Shared as a Python broker writes it first: owner list, permits, pending dicts, a retry list.

    One loop iteration per message and no ordering guarantee at all (no replay order, no draining,
    no last-sent rule), so it bounds what pure Python does per message. It speaks the column API
    ``keyshared.sim.Simulation`` drives and the object API of the broker loop. Acks go to the same
    Rust ``Cursor`` cursorkit uses, so the peer is, if anything, faster than a pure-Python one.
    """

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

    def add_read(self, positions: Sequence[Position], slots: I64) -> None:
        """A read of ``Position`` objects and their slots (the object API)."""
        ids = [(p.ledger_id, p.entry_id) for p in positions]
        self.incoming.extend((lid, eid, s) for (lid, eid), s in zip(ids, slots.tolist(), strict=True))

    def _route(self) -> dict[Any, tuple[list[int], list[int]]]:
        """One loop iteration per message: owner, permits, pending; what each consumer gets."""
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
        return out

    def dispatch_columns(self) -> list[tuple[Any, I64, I64]]:
        """What can be sent, as int64 columns per consumer."""
        return [
            (c, np.array(ls, dtype=np.int64), np.array(es, dtype=np.int64))
            for c, (ls, es) in self._route().items()
        ]

    def dispatch(self) -> list[tuple[Any, list[Position]]]:
        """What can be sent, as ``Position`` lists per consumer (the object API)."""
        return [(c, list(map(Position, ls, es))) for c, (ls, es) in self._route().items()]

    def ack_columns(self, consumer: Any, ledgers: I64, entries: I64) -> None:
        """Pending entries dropped one by one; the cursor gets one bulk call."""
        held = self.pending[consumer]
        for key in zip(ledgers.tolist(), entries.tolist(), strict=True):
            held.pop(key, None)
        self.cursor.ack_many(ledgers, entries)

    def ack_many(self, consumer: Any, positions: Sequence[Position]) -> None:
        """Pending entries dropped one by one, each acked on the cursor (the object API)."""
        held = self.pending[consumer]
        ack = self.cursor.ack
        for p in positions:
            held.pop((p.ledger_id, p.entry_id), None)
            ack(p)
