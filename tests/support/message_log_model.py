"""A pure-Python model of the broker's message log: ledgers as lists, the same rollover and trim rules."""

from __future__ import annotations

from dataclasses import dataclass, field

from cursorkit import Position
from cursorkit.broker.log.format import HEADER, RECORD

Item = tuple[bytes, int, int]


@dataclass
class LogModel:
    """Ledgers in id order, each a list of ``(data, publish_time_ms, num_messages)``."""

    segment_bytes: int
    ledgers: dict[int, list[Item]] = field(default_factory=lambda: {1: []})
    next_ledger: int = 2

    @property
    def current(self) -> int:
        return max(self.ledgers)

    def size(self, ledger: int) -> int:
        return HEADER.size + sum(RECORD.size + len(d) for d, _, _ in self.ledgers[ledger])

    def roll(self) -> None:
        """A new ledger (what a sealed current ledger makes the next append do)."""
        self.ledgers[self.next_ledger] = []
        self.next_ledger += 1

    def append(self, items: list[Item]) -> list[Position]:
        if not items:
            return []
        cur = self.current
        if self.ledgers[cur] and self.size(cur) >= self.segment_bytes:
            self.roll()
            cur = self.current
        first = len(self.ledgers[cur])
        self.ledgers[cur].extend(items)
        return [Position(cur, first + i) for i in range(len(items))]

    def all(self) -> list[tuple[Position, Item]]:
        return [
            (Position(lid, i), it)
            for lid, items in sorted(self.ledgers.items())
            for i, it in enumerate(items)
        ]

    def read_from(self, pos: Position, max_entries: int, max_bytes: int) -> list[tuple[Position, Item]]:
        out: list[tuple[Position, Item]] = []
        budget = max_bytes
        for p, it in self.all():
            if p < pos:
                continue
            if len(out) >= max_entries or (out and len(it[0]) > budget):
                break
            budget -= len(it[0])
            out.append((p, it))
        return out

    def find_by_time(self, t: int) -> Position:
        for p, (_, when, _) in self.all():
            if when >= t:
                return p
        return self.end_position()

    def last_position(self) -> Position:
        entries = self.all()
        return entries[-1][0] if entries else Position(self.current, -1)

    def first_position(self) -> Position:
        entries = self.all()
        return entries[0][0] if entries else Position(self.current, -1)

    def end_position(self) -> Position:
        last = self.last_position()
        return Position(last.ledger_id, last.entry_id + 1)

    def trim(self, before: Position) -> list[int]:
        gone = [
            lid
            for lid in sorted(self.ledgers)[:-1]
            if lid < before.ledger_id
            or (lid == before.ledger_id and before.entry_id >= len(self.ledgers[lid]))
        ]
        for lid in gone:
            del self.ledgers[lid]
        return gone
