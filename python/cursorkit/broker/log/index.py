"""A ledger's index file, so that a restart loads its in-memory index instead of scanning its records.

``<segment>.idx`` beside the segment, written atomically when the ledger is sealed and when the log
is closed. Little endian::

    magic (89 "CKIDX" 0d 0a) | version u16 (1) | flags u16 (0) | 0 u32 | ledger id u64
    | segment bytes covered u64 | entries u64 | record offset i64 x entries
    | running maximum of publish times i64 x entries | CRC-32 u32

(the CRC covers every byte before it). An index is used only when it checks out against its
segment as it is now: checksum, version, ledger, exactly the segment's size, offsets that tile the
file from its header to its end, every record header announcing the length and time the index
gives it, and its first and last records intact (reads check every record's checksum).
Anything else is a reason to scan, never an error.
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from pathlib import Path

import numpy as np

from cursorkit.broker.log.format import HEADER, MAX_ENTRY_BYTES, RECORD
from cursorkit.fsio import read_regular

__all__ = ["INDEX_SUFFIX", "encode_index", "index_path", "load_index"]

INDEX_SUFFIX = ".idx"
"""An index file's name is its segment's name with this appended."""
INDEX_VERSION = 1
_MAGIC = b"\x89CKIDX\r\n"
_HEAD = struct.Struct("<8sHHIQQQ")
_CRC = struct.Struct("<I")
_I64 = np.dtype("<i8")
_CHUNK = 8 << 20


def index_path(segment: Path) -> Path:
    """The index file of the segment at ``segment``."""
    return segment.with_name(segment.name + INDEX_SUFFIX)


def _native(values: np.ndarray) -> array[int]:
    out = array("q")
    out.frombytes(values.astype(np.int64).tobytes())
    return out


def encode_index(ledger_id: int, size: int, offsets: array[int], max_times: array[int]) -> bytes:
    """The bytes of the index of a ledger whose file is ``size`` bytes, every one of them served."""
    parts = [
        _HEAD.pack(_MAGIC, INDEX_VERSION, 0, 0, ledger_id, size, len(offsets)),
        np.asarray(offsets, dtype=np.int64).astype(_I64).tobytes(),
        np.asarray(max_times, dtype=np.int64).astype(_I64).tobytes(),
    ]
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def load_index(segment: Path, fd: int, ledger_id: int, size: int) -> tuple[array[int], array[int]] | str:
    """The offsets and running maximum times in the index file of ``segment``, or why it is not used.

    ``segment`` is open at ``fd`` and ``size`` bytes long; the reason is ``""`` when there is no index.
    """
    most = _HEAD.size + 16 * (size // RECORD.size) + _CRC.size
    try:
        data = read_regular(index_path(segment), limit=most)
    except FileNotFoundError:
        return ""
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if len(data) < _HEAD.size + _CRC.size or len(data) > most:
        return f"index of {len(data)} bytes"
    if zlib.crc32(memoryview(data)[: -_CRC.size]) != _CRC.unpack_from(data, len(data) - _CRC.size)[0]:
        return "index fails its checksum"
    magic, version, flags, pad, lid, covers, entries = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != INDEX_VERSION or flags or pad or lid != ledger_id:
        return f"bad index header (version {version}, ledger {lid})"
    if covers != size:
        return f"index covers {covers} bytes, the segment has {size}"
    if len(data) != _HEAD.size + 16 * entries + _CRC.size:
        return f"index of {len(data)} bytes for {entries} entries"
    offsets = np.frombuffer(data, _I64, entries, _HEAD.size)
    times = np.frombuffer(data, _I64, entries, _HEAD.size + 8 * entries)
    reason = (
        _mismatch(offsets, times, size)
        or _headers_disagree(fd, offsets, times, size)
        or _ends_intact(fd, offsets, size)
    )
    return reason or (_native(offsets), _native(times))


def _mismatch(offsets: np.ndarray, times: np.ndarray, size: int) -> str:
    """Why the offsets do not tile ``size`` bytes with records, or the times are no running maximum."""
    if not len(offsets):
        return "" if size == HEADER.size else f"index holds no entries, the segment has {size} bytes"
    if int(offsets[0]) != HEADER.size:
        return f"index's first record at byte {int(offsets[0])}"
    gaps = np.diff(offsets, append=np.int64(size))
    if int(gaps.min()) < RECORD.size or int(gaps.max()) > RECORD.size + MAX_ENTRY_BYTES:
        return "index's offsets are not records"
    if len(times) > 1 and bool((times[1:] < times[:-1]).any()):
        return "index's times decrease"
    return ""


def _headers_disagree(fd: int, offsets: np.ndarray, times: np.ndarray, size: int) -> str:
    """Why some record's header does not announce the length and time the index gives it.

    Reads the segment in chunks and compares every record header at once (numpy), data unchecked.
    """
    lengths = np.diff(offsets, append=np.int64(size)) - RECORD.size
    top = np.iinfo(np.int64).min
    lo = 0
    while lo < len(offsets):
        start = int(offsets[lo])
        hi = max(lo + 1, int(np.searchsorted(offsets, start + _CHUNK)))
        stop = int(offsets[hi - 1]) + RECORD.size
        try:
            buf = os.pread(fd, stop - start, start)
        except OSError as e:
            return f"segment unreadable at byte {start} ({e.strerror or e})"
        if len(buf) != stop - start:
            return "segment ends before its index's last record"
        heads = np.frombuffer(buf, np.uint8)[(offsets[lo:hi] - start)[:, None] + np.arange(RECORD.size)]
        length = heads[:, 4:8].copy().view("<u4").ravel()
        when = heads[:, 8:16].copy().view("<i8").ravel()
        count = heads[:, 16:20].copy().view("<u4").ravel()
        running = np.maximum.accumulate(np.maximum(when, top))
        if (length != lengths[lo:hi]).any() or not count.all() or (running != times[lo:hi]).any():
            return f"records from byte {start} differ from the index"
        top, lo = int(running[-1]), hi
    return ""


def _ends_intact(fd: int, offsets: np.ndarray, size: int) -> str:
    """Why the first or last record the index names fails its checksum."""
    for k in sorted({0, len(offsets) - 1}) if len(offsets) else ():
        start = int(offsets[k])
        stop = int(offsets[k + 1]) if k + 1 < len(offsets) else size
        try:
            record = os.pread(fd, stop - start, start)
        except OSError as e:
            return f"segment unreadable at byte {start} ({e.strerror or e})"
        if len(record) != stop - start or zlib.crc32(memoryview(record)[4:]) != RECORD.unpack_from(record)[0]:
            return f"index's record at byte {start} fails its checksum"
    return ""
