"""A file store's log cut at a flush boundary recovers the flush before it, unreported (issue 44 item 8).

The log holds nothing past its last marker, so a log cut exactly where a flush began reads the same
as a log whose owner crashed before writing that flush. This is the documented contract: recovery
returns the older flush with ``damaged=False``, and a broker loses the acks of the flushes cut (their
messages are redelivered; the cursor only ever goes back to a state it held, never past an
unacknowledged message). A cut anywhere else, inside a record or between a flush's records, is
reported. Checked against a model: the state after each flush.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import given, settings

from cursorkit import Position, RangeSet
from cursorkit.ackstate import Cursor, FileCursorStore

State = tuple[Position, RangeSet, list[tuple[int, int, int, bytes]], dict[str, int]]

# Each flush acks some (ledger, entry) pairs of three small ledgers, and sometimes a batch index.
FLUSHES = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(1, 3), st.integers(0, 63)), min_size=1, max_size=12),
        st.booleans(),
    ),
    min_size=1,
    max_size=5,
)


def state(c: Cursor) -> State:
    return c.mark_delete_position, c.individually_deleted, c.batches(), dict(c.properties)


def written(path: Path, flushes: list[tuple[list[tuple[int, int]], bool]]) -> tuple[list[State], list[int]]:
    """A store after ``flushes``: the state after each (the model) and the log size after each."""
    states: list[State] = []
    ends: list[int] = []
    with FileCursorStore.create(path, name="boundary") as store:
        c = store.recover()
        states.append(state(c))
        ends.append(store.log_bytes)
        for i, (acks, batch) in enumerate(flushes):
            for ledger, entry in acks:
                c.ack(Position(ledger, entry))
            if batch:
                c.ack_batch_index(Position(9, i), i % 4, 4)
            c.properties["flush"] = i
            store.flush(c, force=True)
            states.append(state(c))
            ends.append(store.log_bytes)
    return states, ends


def cut_copy(path: Path, where: Path, size: int) -> Path:
    """A copy of the store at ``path`` whose log is cut to ``size`` bytes."""
    shutil.copytree(path, where)
    (log,) = where.glob("cursor-*.log")
    log.write_bytes(log.read_bytes()[:size])
    return where


@settings(max_examples=60)
@given(flushes=FLUSHES, data=st.data())
def test_a_cut_at_a_flush_boundary_is_a_crash_before_that_flush(
    flushes: list[tuple[list[tuple[int, int]], bool]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "store"
        states, ends = written(base, flushes)
        # At every boundary: the flush before it, unreported, as if the process died before the next.
        for k, end in enumerate(ends):
            with FileCursorStore.open(cut_copy(base, Path(tmp) / f"b{k}", end)) as store:
                back = store.recover()
                report = store.report
                assert state(back) == states[k], k
                assert not report.damaged, (k, report)
                assert (report.torn_tail_bytes, report.unfinished_flush_records) == (0, 0)
                assert report.marker_sequence == k
        # Anywhere inside a flush: the flush before it, and the cut is reported.
        k = data.draw(st.integers(1, len(ends) - 1), label="flush")
        cut = data.draw(st.integers(ends[k - 1] + 1, ends[k] - 1), label="cut")
        with FileCursorStore.open(cut_copy(base, Path(tmp) / "inside", cut)) as store:
            back = store.recover()
            assert state(back) == states[k - 1]
            assert store.report.damaged
            assert store.report.torn_tail_bytes or store.report.unfinished_flush_records


def test_what_a_boundary_cut_loses_is_the_later_acks_never_an_unacked_message(tmp_path: Path) -> None:
    """The rolled-back cursor acks a subset of what the lost flush had acked: redelivery, not loss."""
    states, ends = written(tmp_path / "s", [([(1, 1), (1, 2)], False), ([(1, 3), (2, 0)], True)])
    with FileCursorStore.open(cut_copy(tmp_path / "s", tmp_path / "cut", ends[1])) as store:
        back = store.recover()
        assert not store.report.damaged
    assert back.is_acked(Position(1, 1)) and back.is_acked(Position(1, 2))
    assert not back.is_acked(Position(1, 3)) and not back.is_acked(Position(2, 0))  # redelivered
    assert back.batches() == [] and back.properties["flush"] == 0
    assert state(back) == states[1]
