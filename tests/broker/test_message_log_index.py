"""Index files of a message log: written at rollover and clean close, used at open, never trusted when off.

A log opened with its index files serves exactly what a scan of the same segments serves; an index
file that is damaged, crafted or stale is reported in ``damaged_indexes`` and its ledger scanned.
"""

from __future__ import annotations

import random
import shutil
import struct
import zlib
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from cursorkit import Position
from cursorkit.broker.log import MessageLog
from cursorkit.errors import CorruptSnapshot

SEGMENT_BYTES = 400
Served = tuple[list[tuple[Position, bytes, int, int]], dict[int, int], list[Position]]


def build(path: Path) -> None:
    rng = random.Random(3)
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        for g in range(30):
            log.append(
                [(rng.randbytes(rng.randrange(90)), rng.randrange(100), 1 + g % 3) for _ in range(1 + g % 3)]
            )


def served(path: Path) -> tuple[Served, MessageLog]:
    """What the log at ``path`` serves (entries, ledger sizes, find_by_time answers) and the closed log."""
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        entries = [
            (e.position, e.data, e.publish_time_ms, e.num_messages)
            for e in log.read_from(Position(0, -1), 1 << 30, 1 << 40)
        ]
        found = [log.find_by_time(t) for t in range(-1, 102, 7)]
        return (entries, log.ledger_sizes(), found), log


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Served]:
    """A closed log with an index per ledger, and what a scan of it serves."""
    path = tmp_path_factory.mktemp("pristine") / "log"
    build(path)
    scanned = tmp_path_factory.mktemp("scanned") / "log"
    shutil.copytree(path, scanned)
    for index in scanned.glob("*.idx"):
        index.unlink()
    want, log = served(scanned)
    assert log.report.scanned_ledgers == len(want[1]) and not log.report.indexed_ledgers
    return path, want


def indexes(path: Path) -> list[Path]:
    return sorted(path.glob("*.seg.idx"))


def indexed(path: Path) -> list[int]:
    """The ledgers with an index file."""
    return [int(p.name[7:27]) for p in indexes(path)]


def test_indexes_are_written_at_rollover_and_close_and_used_at_open(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        for n in range(20):
            log.append([(b"x" * 60, n, 1)])
        ledgers = list(log.ledger_sizes())
        assert indexed(path) == ledgers[:-1]  # each sealed at its rollover
    assert indexed(path) == ledgers  # and the current one at close
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        report = log.report
        assert report.healthy and not report.damaged_indexes
        assert report.indexed_ledgers == report.ledgers == len(ledgers) and report.scanned_ledgers == 0
        log.append([(b"y", 99, 1)])  # a new ledger (the current one is full): its index comes at close
        assert indexed(path) == ledgers
        log.trim(Position(log.current_ledger, 0))  # a trimmed ledger's index goes with it
        assert indexed(path) == []
        log.append([(b"z", 99, 1)])
    assert indexed(path) == [log.current_ledger]
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        assert log.report.indexed_ledgers == 1 and log.entries == 2
        log.append([(b"w", 99, 1)])  # the current ledger's index goes before its first append
        assert indexed(path) == []


def test_a_log_opened_from_its_indexes_serves_what_a_scan_serves(
    tmp_path: Path, pristine: tuple[Path, Served]
) -> None:
    source, want = pristine
    shutil.copytree(source, tmp_path / "log")
    got, log = served(tmp_path / "log")
    assert got == want
    assert log.report.scanned_ledgers == 0 and log.report.indexed_ledgers == len(want[1])


def crafted(data: bytes, entries: int, offsets: list[int]) -> bytes:
    """``data`` (an index) claiming ``entries`` entries at ``offsets``, with a checksum to match."""
    body = bytearray(data[:-4])
    struct.pack_into("<Q", body, 32, entries)
    body[40:] = struct.pack(f"<{len(offsets)}q", *offsets) + bytes(body[40 + 8 * len(offsets) :])
    return bytes(body) + struct.pack("<I", zlib.crc32(body))


damage = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("random"), st.integers(0, 600), st.integers(0, 1 << 30)),
    st.tuples(st.just("entries"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("offset"), st.integers(0, 1 << 20), st.integers(-200, 200)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 100), how=damage)
def test_a_damaged_or_crafted_index_is_reported_and_its_ledger_scanned(
    tmp_path_factory: pytest.TempPathFactory,
    pristine: tuple[Path, Served],
    which: int,
    how: tuple[str, int, int],
) -> None:
    source, want = pristine
    path = tmp_path_factory.mktemp("damaged") / "log"
    shutil.copytree(source, path)
    victim = indexes(path)[which % len(indexes(path))]
    data = victim.read_bytes()
    kind, at, arg = how
    entries = (len(data) - 44) // 16
    if kind == "flip":
        bad = bytearray(data)
        bad[at % len(data)] ^= 1 << arg
    elif kind == "cut":
        bad = bytearray(data[: at % len(data)])
    elif kind == "random":
        bad = bytearray(random.Random(arg).randbytes(at))
    elif kind == "entries":  # a count that does not match the file, checksum fixed
        bad = bytearray(crafted(data, entries + 1 + at % 5, []))
    else:  # an offset moved, checksum fixed
        offsets = list(struct.unpack_from(f"<{entries}q", data, 40))
        offsets[at % entries] += arg or 1
        bad = bytearray(crafted(data, entries, offsets))
    if bytes(bad) == data:
        return
    victim.write_bytes(bytes(bad))
    got, log = served(path)
    assert got == want
    lid = int(victim.name[7:27])
    assert [d[0] for d in log.report.damaged_indexes] == [lid]
    assert log.report.scanned_ledgers == 1 and log.report.healthy


@pytest.mark.parametrize("change", ["grown", "truncated"])
def test_an_index_of_an_older_segment_size_is_not_trusted(tmp_path: Path, change: str) -> None:
    path = tmp_path / "log"
    with MessageLog.open(path, sync=False) as log:
        log.append([(b"a" * 50, 1, 1), (b"b" * 50, 2, 1)])
    (index,) = indexes(path)
    old = index.read_bytes()
    segment = path / index.name.removesuffix(".idx")
    if change == "grown":
        with MessageLog.open(path, sync=False) as log:
            log.append([(b"c" * 50, 3, 1)])
    else:
        segment.write_bytes(segment.read_bytes()[:-10])
    index.write_bytes(old)
    with MessageLog.open(path, sync=False) as log:
        assert log.report.damaged_indexes and log.report.scanned_ledgers == 1
        assert log.entries == (3 if change == "grown" else 1)
        assert bool(log.report.torn_tail_bytes) == (change == "truncated")


def test_damage_in_a_ledger_loaded_from_its_index_is_caught_at_read(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with MessageLog.open(path, sync=False) as log:
        positions = log.append([(bytes([n]) * 50, n, 1) for n in range(5)])
    segment = next(path.glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[48 + 2 * 70 + 30] ^= 0x10  # the third entry's data (records of 20 + 50 bytes after the header)
    segment.write_bytes(bytes(data))
    with MessageLog.open(path, sync=False) as log:
        assert log.report.indexed_ledgers == 1 and log.report.healthy  # not read at open
        with pytest.raises(CorruptSnapshot):
            log.read(positions[2])
        assert [log.read(p).data for p in positions[:2] + positions[3:]] == [
            bytes([n]) * 50 for n in (0, 1, 3, 4)
        ]
