"""Reading a segment file record by record: the index of its intact records and where, and why, they stop.

What recovery does for a ledger without a usable index file. The file is read in chunks of a few
MiB; per record, one ``unpack_from`` and one CRC over a memoryview slice; the running maximum of
publish times is computed once at the end.
"""

from __future__ import annotations

import os
import zlib
from array import array
from dataclasses import dataclass

import numpy as np

from cursorkit.broker.log.format import HEADER, RECORD, SegmentHeader, record_problem

__all__ = ["SegmentScan", "scan_records"]

_CHUNK = 8 << 20


@dataclass(slots=True)
class SegmentScan:
    """One segment's index, and where (and why) it stops being intact."""

    header: SegmentHeader
    offsets: array[int]
    max_times: array[int]
    end: int
    size: int
    problem: str = ""
    torn: bool = False
    indexed: bool = False
    """Loaded from the segment's index file, not scanned."""

    def cut(self, entries: int) -> None:
        """Keeps the first ``entries`` entries (at most as many as it holds)."""
        if entries < len(self.offsets):
            self.end = self.offsets[entries]
        del self.offsets[entries:]
        del self.max_times[entries:]
        self.problem, self.torn = "", False


def scan_records(fd: int, header: SegmentHeader, size: int) -> SegmentScan:
    """Every intact record of the segment open at ``fd`` (``size`` bytes, ``header`` already read)."""
    offsets, times = array("q"), array("q")
    scan = SegmentScan(header, offsets, array("q"), HEADER.size, size)
    want = _CHUNK
    while scan.end < size:
        start = scan.end
        buf = os.pread(fd, min(want, size - start), start)
        if len(buf) < min(want, size - start):  # the file shrank under us: it ends here
            size = scan.size = start + len(buf)
        stop = _records(buf, start, offsets, times)
        scan.end = start + stop
        head = buf[stop : stop + RECORD.size]
        if scan.end == size or (len(head) < RECORD.size and start + len(buf) < size):
            want = _CHUNK  # done, or a record header cut by the chunk's end: read on from it
            continue
        length, scan.problem, scan.torn = record_problem(head, size - scan.end)
        if scan.problem:
            break
        if stop + RECORD.size + length <= len(buf):
            scan.problem = "record fails its checksum"
            break
        want = max(_CHUNK, RECORD.size + length)  # a record the chunk cut: read it whole
    running = np.maximum.accumulate(np.frombuffer(times, dtype=np.int64))
    scan.max_times.frombytes(running.tobytes())
    return scan


def _records(buf: bytes, base: int, offsets: array[int], times: array[int]) -> int:
    """Appends offset (``base`` + position) and time of each whole, intact record from ``buf``'s start.

    Returns where they stop: at a record the buffer's end cuts, or one that is not intact.
    """
    view = memoryview(buf)
    unpack = RECORD.unpack_from
    crc32 = zlib.crc32
    add_offset, add_time = offsets.append, times.append
    size = len(buf)
    last = size - RECORD.size
    pos = 0
    while pos <= last:
        crc, length, when, count = unpack(buf, pos)
        end = pos + RECORD.size + length
        if end > size or not count or crc32(view[pos + 4 : end]) != crc:
            break
        add_offset(base + pos)
        add_time(when)
        pos = end
    return pos
