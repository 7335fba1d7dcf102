"""Recovering a message log's directory: every segment scanned and checked, damage reported, not served.

Rules (the module docstring of :mod:`cursorkit.broker.log` gives the format):

* A ledger is served up to its first record that is not intact; nothing after it, even intact
  records, is served (``damaged`` names the ledger, offset and reason).
* The last ledger's tail from a record that runs past the end of the file is a torn write:
  ``torn_tail_bytes``, cut off before the next append. Any other damage in the last ledger seals
  it: the next append opens a new ledger.
* A ledger's successor records, in its header, how many entries the ledger held when it was
  sealed; entries beyond that (a failed append that could not be cut off) are never served and
  are counted in ``unused_tail_bytes``; fewer is reported as damage.
* Files that are not regular files (a directory, a symlink, a FIFO) or whose header is unusable
  are reported and left alone; their ledger ids are never reused. Left-over temp files of a new
  ledger whose creation was cut short are removed.

Work is one sequential read of every segment, memory one index row per entry.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from cursorkit.broker.log.format import HEADER, RECORD, SegmentHeader, parse_header, record_problem
from cursorkit.broker.log.segment import SEGMENT_NAME, Segment, open_for_reads
from cursorkit.fsio import temp_target

__all__ = ["LogRecoveryReport", "Recovered", "recover_directory"]

_MAX_LEDGER = (1 << 63) - 1
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecoveryReport:
    """What :meth:`MessageLog.open` found in the directory."""

    ledgers: int
    """Ledgers served (a damaged one counts, up to its damage)."""
    entries: int
    """Entries served."""
    torn_tail_bytes: int = 0
    """Bytes of a write cut short by a crash at the end of the last ledger (cut off before the next
    append)."""
    damaged: list[tuple[int, int, str]] = field(default_factory=list)
    """``(ledger, byte offset, reason)`` of each damage found; nothing at or after it is served."""
    unused_tail_bytes: int = 0
    """Bytes past the end a sealed ledger's successor recorded (a failed append, never served)."""
    temp_files_removed: tuple[str, ...] = ()
    """Temp files of a ledger whose creation was cut short."""

    @property
    def healthy(self) -> bool:
        """Whether nothing was torn or damaged."""
        return not (self.torn_tail_bytes or self.damaged)


@dataclass(slots=True)
class Recovered:
    """The ledgers recovery serves, in id order, the next ledger id and what it found."""

    segments: list[Segment]
    next_ledger: int
    report: LogRecoveryReport


@dataclass(slots=True)
class _Scan:
    """One segment file read end to end: its index, and where (and why) it stops being intact."""

    header: SegmentHeader
    offsets: array[int]
    max_times: array[int]
    end: int
    size: int
    problem: str = ""
    torn: bool = False


def _scan(fd: int) -> tuple[_Scan | None, str]:
    """The index of the segment open at ``fd``, or ``None`` and why its header is unusable."""
    size = os.fstat(fd).st_size
    with open(fd, "rb", buffering=_CHUNK, closefd=False) as f:
        header, reason = parse_header(f.read(HEADER.size))
        if header is None:
            return None, reason
        scan = _Scan(header, array("q"), array("q"), HEADER.size, size)
        top: int | None = None
        while scan.end < size:
            head = f.read(RECORD.size)
            length, reason, torn = record_problem(head, size - scan.end)
            if reason:
                scan.problem, scan.torn = reason, torn
                break
            crc, _, when, _ = RECORD.unpack_from(head)
            data = f.read(length)
            if len(data) != length or zlib.crc32(data, zlib.crc32(head[4:])) != crc:
                scan.problem = "record fails its checksum"
                break
            top = when if top is None else max(top, when)
            scan.offsets.append(scan.end)
            scan.max_times.append(top)
            scan.end += RECORD.size + length
    return scan, ""


def _cut(scan: _Scan, entries: int) -> None:
    """Keeps the first ``entries`` entries of ``scan`` (at most as many as it holds)."""
    if entries < len(scan.offsets):
        scan.end = scan.offsets[entries]
    del scan.offsets[entries:]
    del scan.max_times[entries:]
    scan.problem, scan.torn = "", False


def _found(directory: Path, removed: list[str]) -> dict[int, Path]:
    """Segment files by ledger id; left-over temp files of unfinished ledgers are removed."""
    found: dict[int, Path] = {}
    for name in sorted(os.listdir(directory)):
        m = SEGMENT_NAME.fullmatch(name)
        if m:
            found[int(m.group(1))] = directory / name
            continue
        target = temp_target(name)
        if target is not None and SEGMENT_NAME.fullmatch(target):
            with contextlib.suppress(OSError):
                (directory / name).unlink()  # a symlink is unlinked, never followed
                removed.append(name)
    return found


def recover_directory(directory: Path) -> Recovered:
    """Every usable ledger of ``directory``, checked against its successor, with the report."""
    removed: list[str] = []
    found = _found(directory, removed)
    damaged: list[tuple[int, int, str]] = []
    scans: list[tuple[int, Path, int, _Scan]] = []
    try:
        for lid, path in sorted(found.items()):
            if lid > _MAX_LEDGER:
                damaged.append((lid, 0, "ledger id out of range"))
                continue
            try:
                fd = open_for_reads(path)
            except OSError as e:
                damaged.append((lid, 0, f"unreadable ({e.strerror or e})"))
                continue
            try:
                scan, reason = _scan(fd)
            except BaseException:
                os.close(fd)
                raise
            if scan is not None and scan.header.ledger_id != lid:
                reason = f"header names ledger {scan.header.ledger_id}"
                scan = None
            if scan is None:
                os.close(fd)
                damaged.append((lid, 0, reason))
                continue
            scans.append((lid, path, fd, scan))
    except BaseException:
        for _, _, fd, _ in scans:
            os.close(fd)
        raise
    unused = 0
    for (lid, _, _, scan), (_, _, _, nxt) in zip(scans, scans[1:], strict=False):
        if nxt.header.previous_ledger != lid:
            continue  # not the ledger that was current when the next one was made
        sealed, held = nxt.header.previous_entries, len(scan.offsets)
        if held < sealed:
            scan.problem = (
                scan.problem or f"holds {held} entries, ledger {nxt.header.ledger_id} recorded {sealed}"
            )
            continue
        _cut(scan, sealed)
        unused += scan.size - scan.end
        if scan.end != nxt.header.previous_end:
            scan.problem = (
                f"ends at byte {scan.end}, ledger {nxt.header.ledger_id} recorded {nxt.header.previous_end}"
            )
    torn_bytes = 0
    segments: list[Segment] = []
    for i, (lid, path, fd, scan) in enumerate(scans):
        segment = Segment(lid, path, fd, scan.offsets, scan.max_times, scan.end)
        last = i == len(scans) - 1
        if scan.problem and last and scan.torn:
            torn_bytes = scan.size - scan.end
            segment.truncate_to = scan.end
        elif scan.problem:
            damaged.append((lid, scan.end, scan.problem))
            segment.must_seal = True
        segments.append(segment)
    usable = [lid for lid in found if lid <= _MAX_LEDGER]
    if segments and segments[-1].ledger_id != max(usable):
        segments[-1].must_seal = True  # a higher id is taken by an unusable file
    report = LogRecoveryReport(
        ledgers=len(segments),
        entries=sum(s.entries for s in segments),
        torn_tail_bytes=torn_bytes,
        damaged=sorted(damaged),
        unused_tail_bytes=unused,
        temp_files_removed=tuple(removed),
    )
    next_ledger = max(usable, default=0) + 1
    return Recovered(segments, next_ledger, report)
