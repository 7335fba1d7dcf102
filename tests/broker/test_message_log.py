"""``MessageLog``: its API and errors, and failed writes and syncs injected at every step via ``opener``."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorkit import Position
from cursorkit.broker.log import MessageLog
from cursorkit.broker.log.format import HEADER
from cursorkit.errors import InvalidArgument, InvalidInputType, InvalidPosition, PersistFailed, UnknownLedger
from faulty_files import Faults, faulty_opener

Item = tuple[bytes, int, int]


def item(n: int) -> Item:
    return (f"entry {n} ".encode() * (1 + n % 5), 1000 + n, 1 + n % 3)


def test_a_new_log_is_empty_with_pulsars_nothing_yet_positions(tmp_path: Path) -> None:
    with MessageLog.open(tmp_path / "t") as log:
        assert log.ledger_sizes() == {1: 0}
        assert log.last_position == log.first_position == Position(1, -1)
        assert log.end_position == Position(1, 0)
        assert log.entries == 0 and log.append([]) == []
        assert log.read_from(Position(0, -1), 10, 100) == []
        assert log.find_by_time(0) == Position(1, 0)
        assert log.report.healthy and log.report.ledgers == 0  # what open found: nothing


def test_group_appends_roll_over_and_read_across_ledgers(tmp_path: Path) -> None:
    with MessageLog.open(tmp_path, segment_bytes=200) as log:
        positions = [p for g in range(6) for p in log.append([item(3 * g + i) for i in range(3)])]
        assert len(set(positions)) == 18 and positions == sorted(positions)
        sizes = log.ledger_sizes()
        assert len(sizes) > 2 and sum(sizes.values()) == 18 and list(sizes) == sorted(sizes)
        got = log.read_from(Position(0, 0), 100, 1 << 20)
        assert [e.position for e in got] == positions
        assert [(e.data, e.publish_time_ms, e.num_messages) for e in got] == [item(n) for n in range(18)]
        assert log.read(positions[7]).data == item(7)[0]
        # limits: entries, and bytes (the first entry always comes)
        assert len(log.read_from(positions[2], 4, 1 << 20)) == 4
        assert [e.position for e in log.read_from(positions[2], 10, 0)] == [positions[2]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_read_positions_gives_each_entry_in_the_order_asked(tmp_path: Path, data: st.DataObject) -> None:
    """A dispatcher's redeliveries in one call: the same entries as reading each, runs or not."""
    with MessageLog.open(tmp_path / str(data.draw(st.uuids())), segment_bytes=200) as log:
        positions = [p for g in range(5) for p in log.append([item(3 * g + i) for i in range(3)])]
        asked = data.draw(st.lists(st.sampled_from(positions), max_size=20))
        if data.draw(st.booleans()):
            asked = sorted(set(asked))  # as a dispatcher asks: ascending, in runs
        got = log.read_positions(asked)
        assert got.positions == asked
        one_by_one = [log.read(p) for p in asked]
        assert got.datas == [e.data for e in one_by_one]
        assert got.counts == [e.num_messages for e in one_by_one]
        assert got.publish_times_ms == [e.publish_time_ms for e in one_by_one]
        last = positions[-1]
        with pytest.raises(InvalidPosition):
            log.read_positions([*asked, Position(last.ledger_id, last.entry_id + 1)])
        with pytest.raises(UnknownLedger):
            log.read_positions([Position(99, 0)])


def test_reads_of_positions_not_held_raise_typed_errors(tmp_path: Path) -> None:
    with MessageLog.open(tmp_path, segment_bytes=100) as log:
        log.append([item(0), item(1)])
        log.append([item(2)])
        with pytest.raises(UnknownLedger):
            log.read(Position(9, 0))
        with pytest.raises(InvalidPosition):
            log.read(Position(1, 2))
        with pytest.raises(InvalidPosition):
            log.read(Position(1, -1))
        assert log.trim(Position(2, 0)) == [1]
        with pytest.raises(UnknownLedger):
            log.read(Position(1, 0))
        # a read from a trimmed ledger starts at the oldest entry after it
        assert [e.position for e in log.read_from(Position(1, 0), 10, 1000)] == [Position(2, 0)]
        assert log.read_from(Position(2, 1), 10, 1000) == []
        assert log.trim(Position(99, 0)) == []  # never the current ledger


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda log: log.append([(b"x", 1)]), InvalidInputType),
        (lambda log: log.append([("x", 1, 1)]), InvalidInputType),
        (lambda log: log.append([(b"x", 1.5, 1)]), InvalidInputType),
        (lambda log: log.append([(b"x", 1, 0)]), InvalidArgument),
        (lambda log: log.append([(b"x", 1 << 63, 1)]), InvalidArgument),
        (lambda log: log.append(b"xyz"), InvalidInputType),
        (lambda log: log.read((1, 0)), InvalidInputType),
        (lambda log: log.read_from(Position(1, 0), -1, 10), InvalidArgument),
        (lambda log: log.find_by_time("now"), InvalidInputType),
    ],
)
def test_bad_arguments_are_refused_with_typed_errors(
    tmp_path: Path, call: Callable[[MessageLog], object], error: type[Exception]
) -> None:
    with MessageLog.open(tmp_path) as log:
        with pytest.raises(error):
            call(log)
        assert log.entries == 0


def test_find_by_time_is_the_first_entry_at_or_after_the_time_in_log_order(tmp_path: Path) -> None:
    times = [10, 30, 20, 25, 40, 5, 50]
    with MessageLog.open(tmp_path, segment_bytes=90) as log:
        positions = [log.append([(b"m" * 10, t, 1)])[0] for t in times]
        assert len(log.ledger_sizes()) > 2
        for t in range(0, 60):
            first = next((p for p, at in zip(positions, times, strict=True) if at >= t), log.end_position)
            assert log.find_by_time(t) == first, t


def test_a_second_opener_is_refused_and_a_closed_log_refuses_calls(tmp_path: Path) -> None:
    log = MessageLog.open(tmp_path)
    with pytest.raises(BlockingIOError):
        MessageLog.open(tmp_path)
    log.close()
    log.close()
    with pytest.raises(InvalidArgument):
        log.append([item(0)])
    MessageLog.open(tmp_path).close()


def test_ledger_ids_are_never_reused_after_trims_and_restarts(tmp_path: Path) -> None:
    seen: list[int] = []
    for _ in range(4):
        with MessageLog.open(tmp_path, segment_bytes=60) as log:
            for n in range(3):
                seen += [p.ledger_id for p in log.append([item(n)])]
            log.trim(log.last_position)
            assert list(log.ledger_sizes()) == [log.current_ledger]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


# -- faults ----------------------------------------------------------------------------------------

GROUPS = [[item(10 * g + i) for i in range(1 + g % 3)] for g in range(8)]


def run_with_fault(path: Path, arm: Callable[[Faults], None]) -> tuple[list[Position], list[int]]:
    """Opens a log, arms the fault, appends GROUPS (disarming after a failure), checks, reopens, checks.

    Returns the positions that came back and the groups that failed.
    """
    faults = Faults()
    done: list[Position] = []
    failed: list[int] = []
    with MessageLog.open(path, segment_bytes=180, opener=faulty_opener(faults)) as log:
        arm(faults)
        for g, group in enumerate(GROUPS):
            try:
                got = log.append(group)
            except PersistFailed:
                failed.append(g)
                faults.budget, faults.fsyncs_left, faults.fail_truncate = None, None, False
                continue
            done += got
        check_served(log, done, failed)
        faults.budget, faults.fsyncs_left, faults.fail_truncate = None, None, False
    with MessageLog.open(path, segment_bytes=180) as log:
        check_served(log, done, failed)
        assert not log.report.damaged and not log.report.torn_tail_bytes, log.report
    return done, failed


def check_served(log: MessageLog, done: list[Position], failed: list[int]) -> None:
    """Exactly the groups that returned are served, in order, with their bytes."""
    kept = [it for g, group in enumerate(GROUPS) if g not in failed for it in group]
    got = log.read_from(Position(0, -1), 1000, 1 << 30)
    assert [e.position for e in got] == done
    assert [(e.data, e.publish_time_ms, e.num_messages) for e in got] == kept


def arming(**switches: object) -> Callable[[Faults], None]:
    return lambda faults: faults.__dict__.update(switches)


@pytest.mark.parametrize("undo_fails", [False, True])
def test_a_write_failing_at_any_byte_is_cut_off_and_never_served(tmp_path: Path, undo_fails: bool) -> None:
    run_with_fault(tmp_path / "count", arming())
    # every segment byte written after the first ledger's header (written by open, before the fault
    # is armed); a cut in an index file written at a rollover leaves none, and the group then fails
    written = sum(p.stat().st_size for p in (tmp_path / "count").glob("*.seg")) - HEADER.size
    for cut in range(0, written, 5):
        _, failed = run_with_fault(tmp_path / f"w{cut}", arming(budget=cut, fail_truncate=undo_fails))
        assert len(failed) == 1, cut


@pytest.mark.parametrize("undo_fails", [False, True])
def test_an_fsync_failing_at_any_point_is_cut_off_and_never_served(tmp_path: Path, undo_fails: bool) -> None:
    n = 0
    while True:
        done, failed = run_with_fault(tmp_path / f"s{n}", arming(fsyncs_left=n, fail_truncate=undo_fails))
        if not failed:
            break
        assert len(done) == sum(len(g) for i, g in enumerate(GROUPS) if i not in failed)
        n += 1
    assert n > len(GROUPS)  # one fsync per append and per new ledger: each was failed once


def test_an_undo_that_fails_seals_the_ledger_and_its_tail_is_never_served(tmp_path: Path) -> None:
    faults = Faults()
    with MessageLog.open(tmp_path, opener=faulty_opener(faults)) as log:
        log.append([item(0)])
        faults.fsyncs_left, faults.fail_truncate = 0, True  # the group lands whole, then cannot go
        with pytest.raises(PersistFailed):
            log.append([item(1), item(2)])
        faults.fsyncs_left, faults.fail_truncate = None, False
        (pos,) = log.append([item(3)])  # in a new ledger (the one tried at once failed too)
        assert pos.ledger_id > 1 and pos.entry_id == 0
        served = log.bytes
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) > served
    with MessageLog.open(tmp_path) as log:
        assert log.ledger_sizes() == {1: 1, pos.ledger_id: 1}
        assert log.report.unused_tail_bytes > 0 and not log.report.damaged
        assert [e.data for e in log.read_from(Position(0, 0), 10, 1 << 20)] == [item(0)[0], item(3)[0]]


def test_a_failed_new_ledger_leaves_nothing_and_the_next_append_retries(tmp_path: Path) -> None:
    faults = Faults()
    with MessageLog.open(tmp_path, segment_bytes=50, opener=faulty_opener(faults)) as log:
        log.append([item(0)])
        faults.fail_open = True
        with pytest.raises(PersistFailed):
            log.append([item(1)])
        faults.fail_open = False
        (pos,) = log.append([item(2)])
        assert pos.ledger_id > 2  # the failed attempt's id is spent
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_readers_see_whole_groups_while_a_writer_appends_and_trims(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with MessageLog.open(tmp_path, segment_bytes=300, sync=False) as log:
        stop = threading.Event()

        def reader() -> None:
            try:
                while not stop.is_set():  # a read from a trimmed ledger moves on to the next
                    got = log.read_from(log.first_position, 50, 1 << 20)
                    for e in got:
                        assert e.data == item(e.publish_time_ms - 1000)[0]
                    ns = [e.publish_time_ms for e in got]
                    assert ns == sorted(ns) and len(set(ns)) == len(ns)
            except BaseException as e:  # noqa: BLE001 - handed to the test thread
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        n = 0
        for g in range(300):
            log.append([item(n + i) for i in range(1 + g % 4)])
            n += 1 + g % 4
            if g % 40 == 39:
                log.trim(Position(log.current_ledger - 1, 0))
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
