"""Hostile log directories: flipped bytes, truncations, crafted lengths, files that are not segments.

Opening never raises anything but ``cursorkit.errors``; what it serves is a subset of what was
written, each entry at its own position with its own bytes; damage is reported; the log keeps
working (appends land, and come back after a reopen); nothing outside the directory is read or written.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from cursorkit import Position
from cursorkit.broker.log import MessageLog
from cursorkit.broker.log.format import HEADER, NO_LEDGER, RECORD, SegmentHeader, encode_header
from cursorkit.broker.log.index import index_path
from cursorkit.errors import CursorkitError

SEGMENT_BYTES = 400
Written = dict[Position, tuple[bytes, int, int]]


def build(path: Path) -> Written:
    """A log of several sealed ledgers and a current one; every entry by position."""
    rng = random.Random(7)
    written: Written = {}
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as log:
        for g in range(30):
            group = [
                (rng.randbytes(rng.randrange(0, 90)), rng.randrange(100), 1 + g % 3) for _ in range(1 + g % 3)
            ]
            written.update(zip(log.append(group), group, strict=True))
        assert len(log.ledger_sizes()) > 4
    return written


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Written]:
    path = tmp_path_factory.mktemp("pristine") / "log"
    return path, build(path)


def segments(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.name.endswith(".seg"))


def check_serves_only_what_was_written(path: Path, written: Written) -> MessageLog | None:
    """Opens the damaged log; checks what it serves and that it keeps working. None if it refused."""
    try:
        log = MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False)
    except CursorkitError:
        return None
    with log:
        served = log.read_from(Position(0, -1), 1 << 30, 1 << 40)
        for e in served:
            assert written.get(e.position) == (e.data, e.publish_time_ms, e.num_messages), e.position
        assert len(served) == log.entries == log.report.entries
        for lid, size in log.ledger_sizes().items():
            if size:
                log.read(Position(lid, size - 1))
        last = log.last_position
        (pos,) = log.append([(b"after", 1, 1)])
        assert pos > last and log.last_position == pos
        log.find_by_time(50)
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES, sync=False) as again:
        assert again.read(pos).data == b"after"
        assert again.entries == len(served) + 1
    return log


@pytest.mark.parametrize("seed", range(60))
def test_flipped_bytes_and_truncations_are_reported_never_served(
    tmp_path: Path, pristine: tuple[Path, Written], seed: int
) -> None:
    source, written = pristine
    path = tmp_path / "log"
    shutil.copytree(source, path)
    for index in path.glob("*.idx"):
        index.unlink()  # every ledger scanned (test_message_log_index.py: damage under an index)
    rng = random.Random(seed)
    victim = rng.choice(segments(path))
    data = bytearray(victim.read_bytes())
    if seed % 3 == 0:
        del data[rng.randrange(len(data)) :]
    else:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    victim.write_bytes(bytes(data))
    log = check_serves_only_what_was_written(path, written)
    assert log is not None  # flips and cuts are damage to report, not a reason to refuse
    report = log.report
    assert report.damaged or report.torn_tail_bytes or report.entries < len(written)


def test_damage_in_a_sealed_ledger_stops_that_ledger_and_the_rest_works(
    tmp_path: Path, pristine: tuple[Path, Written]
) -> None:
    source, written = pristine
    shutil.copytree(source, tmp_path / "log")
    victim = segments(tmp_path / "log")[1]
    index_path(victim).unlink()  # scanned, so the damage is found at open
    lid = int(victim.name[7:27])
    data = bytearray(victim.read_bytes())
    (length,) = struct.unpack_from("<I", data, HEADER.size + 4)
    second = HEADER.size + RECORD.size + length
    data[second + RECORD.size] ^= 0xFF  # the second entry's first data byte
    victim.write_bytes(bytes(data))
    log = check_serves_only_what_was_written(tmp_path / "log", written)
    assert log is not None
    assert log.report.damaged == [(lid, second, "record fails its checksum")]
    assert log.ledger_sizes()[lid] == 1
    assert log.ledger_sizes()[lid + 1] == sum(p.ledger_id == lid + 1 for p in written)


def test_a_torn_tail_is_cut_off_and_appends_continue_after_the_last_whole_entry(
    tmp_path: Path, pristine: tuple[Path, Written]
) -> None:
    source, written = pristine
    shutil.copytree(source, tmp_path / "log")
    last = segments(tmp_path / "log")[-1]
    os.truncate(last, last.stat().st_size - 3)
    with MessageLog.open(tmp_path / "log", segment_bytes=SEGMENT_BYTES, sync=False) as log:
        assert log.report.torn_tail_bytes > 0 and not log.report.damaged
        lost = max(written)
        assert log.last_position == Position(lost.ledger_id, lost.entry_id - 1)
        assert log.append([(b"x", 1, 1)]) == [lost]  # the torn entry's id goes to the next append
    with MessageLog.open(tmp_path / "log", sync=False) as log:
        assert log.report.healthy and log.read(lost).data == b"x"


def test_a_crafted_length_is_never_allocated(tmp_path: Path) -> None:
    path = tmp_path / "log"
    MessageLog.open(path, sync=False).close()
    (seg,) = segments(path)
    with seg.open("ab") as f:
        f.write(struct.pack("<IIqI", 0, (1 << 30), 0, 1) + b"tiny")
        f.write(struct.pack("<IIqI", 0, (1 << 32) - 1, 0, 1))
    with MessageLog.open(path, sync=False) as log:
        assert log.entries == 0 and log.report.torn_tail_bytes > 0


@pytest.mark.parametrize(
    "kind", ["random", "directory", "symlink", "fifo", "empty", "wrong ledger", "future"]
)
def test_files_that_are_not_healthy_segments_are_reported_and_left_alone(
    tmp_path: Path, pristine: tuple[Path, Written], kind: str
) -> None:
    source, written = pristine
    path = tmp_path / "log"
    shutil.copytree(source, path)
    outside = tmp_path / "outside.seg"
    shutil.copy(segments(path)[0], outside)
    before = outside.read_bytes()
    planted = path / f"ledger-{999:020d}.seg"
    if kind == "random":
        planted.write_bytes(random.Random(1).randbytes(5000))
    elif kind == "directory":
        planted.mkdir()
    elif kind == "symlink":
        planted.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(planted)
    elif kind == "empty":
        planted.write_bytes(b"")
    elif kind == "wrong ledger":
        planted.write_bytes(encode_header(SegmentHeader(5, 4, 0, 0)))
    else:
        body = bytearray(encode_header(SegmentHeader(999, NO_LEDGER, 0, 0))[:-4])
        body[8] = 9  # version 9, with a checksum to match
        planted.write_bytes(bytes(body) + struct.pack("<I", zlib.crc32(body)))
    log = check_serves_only_what_was_written(path, written)
    if kind == "future":
        assert log is None  # an intact segment of a later format: refused, not stepped over
    else:
        assert log is not None
        assert [d[0] for d in log.report.damaged] == [999]
        assert log.entries == len(written) + 1
        assert 999 not in log.ledger_sizes() and max(log.ledger_sizes()) > 999
    assert outside.read_bytes() == before
    assert planted.exists() or planted.is_symlink()
