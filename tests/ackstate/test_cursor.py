"""Cursor behaviour as Pulsar's ManagedCursorImpl has it, and how bad input is refused."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cursorkit import Cursor, Position, RangeSet
from cursorkit.errors import (
    CursorkitError,
    InvalidArgument,
    InvalidInputType,
    InvalidPosition,
    LengthMismatch,
    UnknownLedger,
)


def P(text: str) -> Position:
    return Position.parse(text)


def test_default_cursor_has_acked_nothing() -> None:
    c = Cursor()
    assert c.mark_delete_position == P("0:-1")
    assert c.name == "cursor"
    assert not c.is_acked(P("0:0"))
    assert c.non_contiguous_deleted_ranges == 0


def test_in_order_acks_move_mark_delete_without_ranges() -> None:
    c = Cursor(P("7:-1"))
    for e in range(100):
        assert c.ack(Position(7, e))
    assert c.mark_delete_position == P("7:99")
    assert c.individually_deleted.is_empty()


def test_holes_are_ranges_until_filled() -> None:
    """Pulsar adds (prev, pos] per ack; mark-delete jumps over the first range once it touches."""
    c = Cursor(P("3:-1"))
    for e in (1, 2, 4, 6, 7):
        c.ack(Position(3, e))
    assert str(c.individually_deleted) == "[(3:0..3:2],(3:3..3:4],(3:5..3:7]]"
    assert c.non_contiguous_deleted_ranges == 3
    c.ack(P("3:0"))
    assert c.mark_delete_position == P("3:2")
    c.ack(P("3:3"))
    assert c.mark_delete_position == P("3:4")
    c.ack(P("3:5"))
    assert c.mark_delete_position == P("3:7")
    assert c.non_contiguous_deleted_ranges == 0


def test_noop_acks_are_counted() -> None:
    c = Cursor(P("1:9"))
    assert not c.ack(P("1:5"))  # below mark-delete
    assert c.ack(P("1:20"))
    assert not c.ack(P("1:20"))  # already acked
    assert not c.ack_cumulative(P("1:3"))
    counters = c.counters()
    assert counters["duplicate_acks"] == 2
    assert counters["acks"] == 1
    assert counters["stale_cumulative_acks"] == 1


def test_without_ledger_sizes_mark_delete_stops_at_ledger_end() -> None:
    """Unknown ledger sizes: the end of a ledger is unknown, so nothing rolls into the next one."""
    c = Cursor(P("1:-1"))
    c.ack_many([1, 1, 2], [0, 1, 0])
    assert c.mark_delete_position == P("1:1")
    assert str(c.individually_deleted) == "[(2:-1..2:0]]"
    c.set_ledger_sizes({1: 2, 2: 10})
    assert c.mark_delete_position == P("2:0")


def test_rolls_over_empty_ledgers_with_sizes() -> None:
    c = Cursor(P("1:-1"), ledger_sizes={1: 3, 2: 0, 4: 5})
    c.ack_many([4, 4], [0, 1])
    c.ack_cumulative(P("1:2"))
    assert c.mark_delete_position == P("4:1")
    assert c.backlog() == 3


def test_backlog_is_entries_minus_acked() -> None:
    c = Cursor(P("1:4"))
    c.ack_many([1, 1, 2], [6, 8, 3])
    sizes = {1: 10, 2: 5}
    assert c.backlog(sizes) == (10 - 5 - 2) + (5 - 1)
    with pytest.raises(InvalidArgument, match="ledger sizes"):
        c.backlog()
    with pytest.raises(UnknownLedger, match="ledger 2"):
        c.backlog({1: 10})


def test_next_unacked_walks_gaps_in_order() -> None:
    c = Cursor(P("1:0"), ledger_sizes={1: 6, 2: 3})
    c.ack_many([1, 1, 2], [2, 3, 1])
    rows = c.next_unacked()
    assert rows.dtype == np.int64 and rows.shape == (5, 2)
    assert rows.tolist() == [[1, 1], [1, 4], [1, 5], [2, 0], [2, 2]]
    assert c.next_unacked(after=P("1:4"), limit=2).tolist() == [[1, 5], [2, 0]]
    assert c.next_unacked(limit=0).shape == (0, 2)


def test_partial_batch_entries_are_still_delivered() -> None:
    c = Cursor(P("1:-1"), ledger_sizes={1: 3})
    c.ack_batch_index(P("1:0"), 1, 4)
    assert c.next_unacked().tolist() == [[1, 0], [1, 1], [1, 2]]
    assert c.backlog() == 3


def test_skip_clear_backlog_and_reset() -> None:
    c = Cursor(P("1:-1"), ledger_sizes={1: 5, 2: 5})
    c.ack(P("1:1"))
    assert c.skip(2) == 2  # 1:0 and 1:2 (1:1 is acked already)
    assert c.mark_delete_position == P("1:2")
    assert c.clear_backlog()
    assert c.mark_delete_position == P("2:4")
    assert c.backlog() == 0
    c.seek(P("1:3"))
    assert c.mark_delete_position == P("1:2")
    assert c.backlog() == 2 + 5
    assert c.counters()["resets"] == 1 and c.counters()["skipped"] == 2


def test_batch_index_acks_complete_the_entry() -> None:
    """A set bit means still unacked; the last index acks the entry (Pulsar's batchDeletedIndexes)."""
    c = Cursor(P("1:-1"))
    c.ack(P("1:1"))
    for i in (0, 2):
        assert c.ack_batch_index(P("1:0"), i, 3)
    assert c.batch(P("1:0")) == (3, (0b010).to_bytes(8, "little"))
    assert c.is_batch_index_acked(P("1:0"), 2)
    assert not c.is_batch_index_acked(P("1:0"), 1)
    assert not c.is_acked(P("1:0"))
    assert c.ack_batch_index(P("1:0"), 1, 3)
    assert c.mark_delete_position == P("1:1")
    assert c.batch_count == 0
    assert c.is_batch_index_acked(P("1:0"), 1)


def test_individual_ack_drops_partial_batch() -> None:
    c = Cursor(P("1:-1"))
    c.ack_batch_index(P("1:4"), 0, 100)
    c.ack(P("1:4"))
    assert c.batch_count == 0 and c.is_acked(P("1:4"))


def test_cumulative_ack_inside_a_batch() -> None:
    """Pulsar: mark-delete becomes the entry before; the batch keeps its unacked tail."""
    c = Cursor(P("1:-1"))
    c.ack_batch_index(P("1:5"), 8, 10)
    assert c.ack_cumulative(P("1:5"), batch_index=4, batch_size=10)
    assert c.mark_delete_position == P("1:4")
    words = c.batch(P("1:5"))
    assert words is not None
    unacked = int.from_bytes(words[1], "little")
    assert [i for i in range(10) if unacked >> i & 1] == [5, 6, 7, 9]  # both acks kept
    assert c.ack_cumulative(P("1:5"), batch_index=9, batch_size=10)
    assert c.mark_delete_position == P("1:5") and c.batch_count == 0


def test_compact_estimate_is_o1_and_bounds_encoding() -> None:
    c = Cursor(P("1:-1"))
    c.ack_many(np.ones(5000, dtype=np.int64), np.arange(1, 10000, 2, dtype=np.int64))
    c.ack_batch_index(P("2:3"), 0, 200)
    assert c.compact_size_estimate() >= len(c.encode("compact"))


def test_concurrent_acks_from_threads() -> None:
    """The state is behind a lock: acks from several threads all land."""
    c = Cursor(P("1:-1"))
    n_threads, per = 4, 5000

    def work(k: int) -> None:
        for e in range(k, n_threads * per, n_threads):
            c.ack(Position(1, e + 1))
        c.ack_many(np.full(per, 2, dtype=np.int64), np.arange(k * per, (k + 1) * per, dtype=np.int64))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.mark_delete_position == P("1:-1")
    assert str(c.individually_deleted) == f"[(1:0..1:{n_threads * per}],(2:-1..2:{n_threads * per - 1}]]"
    assert c.counters()["acks"] == 2 * n_threads * per


def test_individually_deleted_is_a_copy() -> None:
    c = Cursor(P("1:-1"))
    c.ack(P("1:5"))
    copy = c.individually_deleted
    copy.add(1, 9)
    assert c.individually_deleted == RangeSet.from_bytes(c.individually_deleted.to_bytes())
    assert not c.is_acked(P("1:9"))


# --- bad input -------------------------------------------------------------------------------------


def test_errors_name_the_cursor() -> None:
    c = Cursor(name="orders-sub")
    with pytest.raises(InvalidPosition, match="orders-sub"):
        c.ack(P("1:-1"))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.ack((1, 2)), InvalidInputType),
        (lambda c: c.ack(P("1:4294967295")), None),
        (lambda c: c.ack_many([1, 1], [1]), LengthMismatch),
        (lambda c: c.ack_many([1, -1], [1, 2]), InvalidPosition),
        (lambda c: c.ack_many([1, 1], [1.5, 2]), InvalidInputType),
        (lambda c: c.ack_batch_index(P("1:3"), 5, 5), InvalidArgument),
        (lambda c: c.ack_batch_index(P("1:3"), -1, 5), InvalidArgument),
        (lambda c: c.ack_batch_index(P("1:3"), 0, 0), InvalidArgument),
        (lambda c: c.ack_batch_index(P("1:3"), 0, 1 << 21), InvalidArgument),
        (lambda c: c.ack_batch_index(P("1:4"), 1, 3), InvalidArgument),  # size differs from recorded 4
        (lambda c: c.ack_cumulative(P("1:3"), batch_index=1), InvalidArgument),
        (lambda c: c.next_unacked(limit=-1, ledger_sizes={1: 5}), InvalidArgument),
        (lambda c: c.backlog({1: -5}), InvalidArgument),
        (lambda c: c.backlog([1, 2]), InvalidInputType),
        (lambda c: c.reset(P("1:-1")), InvalidPosition),
        (lambda c: c.set_ledger_sizes({1: 2}), InvalidPosition),  # acked 1:2 lies beyond
    ],
)
def test_rejected_calls_leave_state_unchanged(call: object, error: type[Exception] | None) -> None:
    c = Cursor(P("1:-1"))
    c.ack_many([1, 1], [2, 7])
    c.ack_batch_index(P("1:4"), 0, 4)
    before = (c.mark_delete_position, c.individually_deleted, c.batches(), c.mutations, c.ledger_sizes)
    assert callable(call)
    if error is None:
        call(c)
        return
    with pytest.raises(error) as info:
        call(c)
    assert isinstance(info.value, CursorkitError)
    after = (c.mark_delete_position, c.individually_deleted, c.batches(), c.mutations, c.ledger_sizes)
    assert after == before


def test_unknown_ledgers_when_sizes_are_set() -> None:
    c = Cursor(P("1:-1"), name="s", ledger_sizes={1: 10})
    with pytest.raises(UnknownLedger, match="ledger 2"):
        c.ack(P("2:0"))
    with pytest.raises(UnknownLedger, match="at index 1"):
        c.ack_many([1, 2], [0, 0])
    with pytest.raises(InvalidPosition, match="beyond the end of ledger 1"):
        c.ack(P("1:10"))
    assert isinstance(UnknownLedger("x"), KeyError)
    assert str(UnknownLedger("plain message")) == "plain message"
    assert c.individually_deleted.is_empty() and c.mark_delete_position == P("1:-1")


def test_ack_from_two_ints_is_the_position_form() -> None:
    c = Cursor(P("1:-1"))
    assert c.ack(1, 1) is True
    assert c.ack(1, 1) is False
    assert c.is_acked(1, 1) and c.is_acked(P("1:1"))
    assert c.ack(1, 0) is True
    assert c.mark_delete_position == P("1:1")
    with pytest.raises(InvalidInputType):
        c.ack("1", 2)  # type: ignore[call-overload]
    with pytest.raises(InvalidInputType):
        c.ack(1, 2.0)  # type: ignore[call-overload]
    with pytest.raises(InvalidPosition):
        c.ack(1, -5)
    with pytest.raises(InvalidInputType):
        c.ack(P("1:3"), 4)  # type: ignore[call-overload]
