"""Recovering a message log's directory: every segment indexed or scanned, damage reported, not served.

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
  ledger or index whose creation was cut short, and index files of missing ledgers, are removed.
* A ledger whose index file (:mod:`.index`) checks out against the segment as it is now is loaded
  from it, its records not read (reads still check each one); any other index file is reported in
  ``damaged_indexes`` and the ledger is scanned (:mod:`.scan`).

Work is one read of each index file, or one sequential read of a segment without one; memory one
index row per entry.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cursorkit.broker.log.format import HEADER, parse_header
from cursorkit.broker.log.index import INDEX_SUFFIX, load_index
from cursorkit.broker.log.scan import SegmentScan, scan_records
from cursorkit.broker.log.segment import SEGMENT_NAME, Segment, open_for_reads
from cursorkit.fsio import temp_target

__all__ = ["LogRecoveryReport", "Recovered", "recover_directory"]

_MAX_LEDGER = (1 << 63) - 1


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
    """Temp files of a ledger whose creation was cut short, and index files of missing ledgers."""
    indexed_ledgers: int = 0
    """Ledgers whose index was loaded from their index file, none of their records read."""
    scanned_ledgers: int = 0
    """Ledgers whose every record was read and checked (no usable index file)."""
    damaged_indexes: list[tuple[int, str]] = field(default_factory=list)
    """``(ledger, reason)`` of each index file not used (stale or damaged): that ledger was scanned.
    Damage of an index, not of the data: :attr:`healthy` does not count it."""

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


def _read(fd: int, path: Path, lid: int, damaged_indexes: list[tuple[int, str]]) -> SegmentScan | str:
    """The index of the segment ``path`` (open at ``fd``), or why its header is unusable.

    From its index file when that checks out, else by a scan.
    """
    size = os.fstat(fd).st_size
    header, reason = parse_header(os.pread(fd, HEADER.size, 0))
    if header is None:
        return reason
    if header.ledger_id != lid:
        return f"header names ledger {header.ledger_id}"
    loaded = load_index(path, fd, lid, size)
    if isinstance(loaded, tuple):
        offsets, max_times = loaded
        return SegmentScan(header, offsets, max_times, size, size, indexed=True)
    if loaded:
        damaged_indexes.append((lid, loaded))
    return scan_records(fd, header, size)


def _found(directory: Path, removed: list[str], *, tidy: bool = True) -> dict[int, Path]:
    """Segment files by ledger id.

    With ``tidy``, left-over temp files and index files of missing ledgers are removed.
    """
    names = sorted(os.listdir(directory))
    found = {int(m.group(1)): directory / m.group(0) for m in map(SEGMENT_NAME.fullmatch, names) if m}
    for name in names:
        target = temp_target(name)
        if target is not None:
            doomed = SEGMENT_NAME.fullmatch(target.removesuffix(INDEX_SUFFIX)) is not None
        else:
            m = SEGMENT_NAME.fullmatch(name[: -len(INDEX_SUFFIX)]) if name.endswith(INDEX_SUFFIX) else None
            doomed = m is not None and int(m.group(1)) not in found
        if doomed and tidy:
            with contextlib.suppress(OSError):
                (directory / name).unlink()  # a symlink is unlinked, never followed
                removed.append(name)
    return found


def recover_directory(directory: Path, *, tidy: bool = True) -> Recovered:
    """Every usable ledger of ``directory``, checked against its successor, with the report.

    ``tidy=False`` changes nothing on disk (an inspection of a stopped broker's log): left-over temp
    files stay, and the segments are only read.
    """
    removed: list[str] = []
    found = _found(directory, removed, tidy=tidy)
    damaged: list[tuple[int, int, str]] = []
    damaged_indexes: list[tuple[int, str]] = []
    scans: list[tuple[int, Path, int, SegmentScan]] = []
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
                scan = _read(fd, path, lid, damaged_indexes)
            except BaseException:
                os.close(fd)
                raise
            if isinstance(scan, str):
                os.close(fd)
                damaged.append((lid, 0, scan))
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
        scan.cut(sealed)
        unused += scan.size - scan.end
        if scan.end != nxt.header.previous_end:
            scan.problem = (
                f"ends at byte {scan.end}, ledger {nxt.header.ledger_id} recorded {nxt.header.previous_end}"
            )
    torn_bytes = 0
    segments: list[Segment] = []
    for i, (lid, path, fd, scan) in enumerate(scans):
        segment = Segment(lid, path, fd, scan.offsets, scan.max_times, scan.end)
        segment.indexed = scan.indexed and scan.end == scan.size
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
        indexed_ledgers=sum(scan.indexed for *_, scan in scans),
        scanned_ledgers=sum(not scan.indexed for *_, scan in scans),
        damaged_indexes=sorted(damaged_indexes),
    )
    next_ledger = max(usable, default=0) + 1
    return Recovered(segments, next_ledger, report)
