"""``NonDurableCursor``: a reader's ack state, started at a position, never persisted.

Pulsar's readers and ``durable = false`` subscriptions keep their place in memory only: the cursor
starts where the reader asks (a message, the earliest or the latest end of the topic, or a number
of seconds of publish time back), disappears with its consumer and holds nothing back from
trimming. Acks work as on :class:`~cursorkit.Cursor`; only persisting is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from cursorkit._core import Position
from cursorkit.ackstate import persist
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.starts import EARLIEST, LATEST, Start, start_of
from cursorkit.errors import InvalidArgument, NotDurable

__all__ = ["EARLIEST", "LATEST", "NonDurableCursor", "Start", "start_of"]


def _before(position: Position) -> Position:
    return Position(position.ledger_id, position.entry_id - 1) if position.entry_id >= 0 else position


class NonDurableCursor(Cursor):
    """A cursor that lives in memory only: :meth:`persist` and :meth:`encode` raise ``NotDurable``."""

    durable: ClassVar[bool] = False
    """Never persisted: its state lives as long as its reader."""

    @classmethod
    def starting_at(
        cls,
        start: Position | Start | None,
        *,
        first: Position,
        last: Position,
        inclusive: bool = False,
        initial: Start = LATEST,
        name: str = "reader",
        ledger_sizes: Mapping[int, int] | None = None,
    ) -> NonDurableCursor:
        """A cursor whose next message is ``start`` (``inclusive``) or the one after it.

        ``first`` and ``last`` are the topic's oldest and newest entries (``last`` with entry -1
        when the topic is empty). Pulsar's rules: ``EARLIEST`` starts before ``first``; ``None``,
        ``LATEST`` or a position past ``last`` start at ``initial`` (``LATEST``: after ``last``);
        a position before ``first`` (trimmed) starts at ``first``.
        """
        if initial not in (EARLIEST, LATEST):
            raise InvalidArgument(f"initial must be 'earliest' or 'latest', got {initial!r}")
        before_first = _before(first)
        if start is None or start == LATEST or (isinstance(start, Position) and start > last):
            start = initial
        if start == EARLIEST:
            md = before_first
        elif start == LATEST:
            md = last
        elif isinstance(start, Position):
            md = _before(start) if inclusive else start
            md = max(md, before_first)
        else:
            raise InvalidArgument(f"start must be a Position, 'earliest' or 'latest', got {start!r}")
        return cls(md, name=name, ledger_sizes=ledger_sizes)

    def persist(self, encoding: str = "compact") -> persist.PersistResult:
        """Refused: a non-durable cursor is never written anywhere."""
        raise NotDurable(f"cursor {self.name!r} is non-durable: it is never persisted")
