"""``NonDurableCursor``: where a reader starts, its acks, and that it is never persisted.

The start is checked against a small model of Pulsar's rules; the acks against ``Cursor``'s model
machine, driven unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit import Position
from cursorkit.ackstate.non_durable import EARLIEST, LATEST, NonDurableCursor, Start, start_of
from cursorkit.errors import NotDurable
from tests.ackstate.test_cursor_vs_model import CursorMachine

Pos = tuple[int, int]


def _topic(sizes: dict[int, int], trimmed: int) -> list[Pos]:
    """The entries a topic holds: ledgers in order, the first ``trimmed`` ledgers gone."""
    return [(lid, e) for lid in sorted(sizes)[trimmed:] for e in range(sizes[lid])]


def _model_first_delivered(
    entries: list[Pos], start: Pos | Start | None, inclusive: bool, initial: Start
) -> Pos | None:
    """The first entry a reader gets, by Pulsar's rules over the list of entries (None: only new ones)."""
    last = entries[-1] if entries else None
    if start is None or start == LATEST or (isinstance(start, tuple) and last is not None and start > last):
        start = initial
    if start == EARLIEST:
        return entries[0] if entries else None
    if start == LATEST:
        return None
    assert isinstance(start, tuple)
    later = [e for e in entries if (e >= start if inclusive else e > start)]
    return later[0] if later else None


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[int, int], int, Pos | Start | None, bool, Start]:
    ledgers = sorted(draw(st.sets(st.integers(1, 9), min_size=1, max_size=4)))
    sizes = {lid: draw(st.integers(1, 5)) for lid in ledgers}
    trimmed = draw(st.integers(0, len(ledgers) - 1))
    start = draw(
        st.none() | st.sampled_from([EARLIEST, LATEST]) | st.tuples(st.integers(0, 10), st.integers(-1, 6))
    )
    return sizes, trimmed, start, draw(st.booleans()), draw(st.sampled_from([EARLIEST, LATEST]))


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_the_first_message_delivered_follows_pulsars_start_rules(
    case: tuple[dict[int, int], int, Pos | Start | None, bool, Start],
) -> None:
    sizes, trimmed, start, inclusive, initial = case
    entries = _topic(sizes, trimmed)
    first, last = Position(*entries[0]), Position(*entries[-1])
    at = Position(*start) if isinstance(start, tuple) else start
    cursor = NonDurableCursor.starting_at(at, first=first, last=last, inclusive=inclusive, initial=initial)
    md = cursor.mark_delete_position
    delivered = [e for e in entries if e > (md.ledger_id, md.entry_id)]
    expected = _model_first_delivered(entries, start, inclusive, initial)
    assert (delivered[0] if delivered else None) == expected


def test_an_empty_topic_starts_every_reader_before_what_comes() -> None:
    empty = Position(4, -1)
    for start in (None, EARLIEST, LATEST, Position(4, 0), Position(9, 9)):
        cursor = NonDurableCursor.starting_at(start, first=empty, last=empty)
        assert cursor.mark_delete_position == empty


def test_sentinels_as_they_travel() -> None:
    u64 = 1 << 64
    assert start_of(u64 - 1, u64 - 1) == EARLIEST  # MessageId.earliest: -1, -1
    assert start_of((1 << 63) - 1, (1 << 63) - 1) == LATEST  # MessageId.latest: INT64_MAX
    assert start_of((1 << 63) - 1, 0) == LATEST  # only the ledger decides
    assert start_of(7, u64 - 1) == Position(7, -1)
    assert start_of(7, 3) == Position(7, 3)


def test_it_is_never_persisted() -> None:
    cursor = NonDurableCursor.starting_at(EARLIEST, first=Position(1, 0), last=Position(1, 5))
    cursor.ack(Position(1, 0))
    for encoding in ("compact", "message_range", "managed_cursor_info"):
        with pytest.raises(NotDurable):
            cursor.encode(encoding)
    with pytest.raises(NotDurable):
        cursor.persist()
    assert not cursor.durable
    assert cursor.mark_delete_position == Position(1, 0)


class NonDurableMachine(CursorMachine):
    """The Cursor model machine, driving a NonDurableCursor: its acks are Cursor's exactly."""

    def start(self, with_sizes: bool, start: Pos, fresh: bool) -> None:
        super().start(with_sizes, start, fresh)
        md = self.cursor.mark_delete_position
        self.cursor = NonDurableCursor(md, ledger_sizes=self.cursor.ledger_sizes or None)


NonDurableMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestNonDurableMachine = NonDurableMachine.TestCase
