"""``RedeliveryJournal``: a cursor's redelivery counts on disk, a snapshot then each flush's changes.

Beyond Pulsar, whose counts live in memory only. A flush appends one record holding the runs of
the positions that changed (``RedeliveryCounts.take_delta``), so its size follows the change, not
the state; once the deltas outweigh the snapshot, the journal is rewritten atomically as one
snapshot (Kafka's share groups keep their delivery counts the same way: snapshots and updates).
Counts of positions the cursor has acknowledged are not journaled: the owner prunes them with the
cursor after loading, and a compaction leaves them out.

File layout (little endian)::

    magic (8 bytes: 0x89 "CKREDL" LF) | version u16 | flags u16 (0)
    records: payload length u32 | kind u8 | CRC-32 u32 of length and kind | payload
             | CRC-32 u32 of everything before it
    kind 1: snapshot, kind 2: delta; payloads zlib-compressed ``RedeliveryCounts`` bytes

Recovery applies every intact record in order; a torn last record (an intact header, its payload
cut short: a flush that never returned) is cut off; anything else unreadable is reported as damage
(``report.damaged``) and the journal is rewritten from what was read, so the damage is passed over
once and said. The header's own checksum keeps a damaged length from passing for a torn record.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cursorkit._core import RedeliveryCounts
from cursorkit.errors import BudgetExceeded, CorruptSnapshot, PersistFailed, UnsupportedVersion
from cursorkit.fsio import Opener, StoreFile, atomic_write, datasync, default_opener, read_regular, write_all

__all__ = ["JOURNAL_VERSION", "JournalReport", "RedeliveryJournal", "inflate_counts"]

JOURNAL_VERSION = 1
"""Version of the journal file format this build writes and reads."""

_MAGIC = b"\x89CKREDL\n"
_HEAD = struct.Struct("<8sHH")
_REC = struct.Struct("<IBI")  # payload length, kind, CRC-32 of the two
_CRC = struct.Struct("<I")
_SNAPSHOT, _DELTA = 1, 2
_BYTES_PER_RUN = 32
"""Most bytes one run takes decoded (four varints): bounds what a record may inflate to."""
_COMPACT_MIN = 64 * 1024
"""Journal bytes below which it is never rewritten."""


@dataclass(slots=True)
class JournalReport:
    """What opening a journal found."""

    created: bool = False
    """No journal was there: an empty one was written."""
    records: int = 0
    """Records applied (the snapshot and the deltas)."""
    torn_bytes: int = 0
    """Bytes of an unfinished last record cut off (a flush that never returned: not damage)."""
    problems: list[str] = field(default_factory=list)
    """What could not be read, and where."""

    @property
    def damaged(self) -> bool:
        """Whether a record was passed over: some counts may be lower than they were."""
        return bool(self.problems)


class RedeliveryJournal:
    """Redelivery counts kept in one file; :attr:`counts` is the live state, :meth:`flush` persists it.

    Not thread-safe: one owner (a subscription) calls it. ``max_runs`` bounds the counts held and
    read (``BudgetExceeded`` past it); ``sync=False`` skips fsyncs (tests only).
    """

    def __init__(
        self,
        path: Path,
        counts: RedeliveryCounts,
        report: JournalReport,
        *,
        opener: Opener,
        sync: bool,
    ) -> None:
        self._path = path
        self.counts = counts
        self.report = report
        self._opener = opener
        self._sync = sync
        self._file: StoreFile | None = None
        self._size = 0
        self._snapshot_bytes = 0
        self._needs_compact = False
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        max_runs: int | None = None,
        opener: Opener | None = None,
        sync: bool = True,
    ) -> RedeliveryJournal:
        """The journal at ``path``, read back; damage is in :attr:`report`.

        A missing journal is empty, and written on the first :meth:`flush` that has counts to keep
        (reading never creates one).
        """
        target = Path(path)
        report = JournalReport()
        counts = RedeliveryCounts(max_runs)
        try:
            data = read_regular(target)
        except FileNotFoundError:
            data = None
            report.created = True
        except OSError as e:
            raise PersistFailed(e.errno or errno.EIO, f"{target}: unreadable ({e})") from e
        clean = data is not None and _read(data, counts, report, str(target))
        journal = cls(target, counts, report, opener=opener or default_opener, sync=sync)
        if clean and data is not None:
            journal._size = len(data) - report.torn_bytes
            if report.torn_bytes:
                journal._cut(journal._size)
        elif data is None:
            journal._needs_compact = True  # written whole on the first flush with something to keep
        else:
            journal.compact()
        return journal

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    @property
    def size(self) -> int:
        """Bytes of the journal file."""
        return self._size

    def flush(self) -> int:
        """Appends what changed since the last flush, durable when it returns; bytes written.

        Rewrites the journal as a snapshot instead once the deltas outweigh it. ``PersistFailed``
        when the disk refuses; the next flush then writes a whole snapshot, so nothing is lost.
        """
        self._check_open()
        if self._needs_compact:
            if (
                self.report.created
                and not self._size
                and not len(self.counts)
                and not self.counts.has_changes
            ):
                return 0  # never written, and nothing to keep
            return self.compact()
        if not self.counts.has_changes:
            return 0
        record = _record(_DELTA, self.counts.take_delta())
        start = self._size
        try:
            f = self._writer()
            write_all(f, record)
            if self._sync:
                datasync(f.fileno())
        except OSError as e:
            self._needs_compact = True
            self._drop_writer()
            raise PersistFailed(e.errno or errno.EIO, f"{self._path}: append failed ({e})") from e
        self._size = start + len(record)
        if self._size > max(_COMPACT_MIN, 2 * self._snapshot_bytes):
            return len(record) + self.compact()
        return len(record)

    def compact(self) -> int:
        """Rewrites the journal atomically as one snapshot of :attr:`counts`; bytes written."""
        self._check_open()
        self.counts.take_delta()  # the snapshot holds every change
        data = _HEAD.pack(_MAGIC, JOURNAL_VERSION, 0) + _record(_SNAPSHOT, self.counts.encode())
        self._drop_writer()
        self._needs_compact = True
        atomic_write(self._path, data, opener=self._opener, sync=self._sync)
        self._needs_compact = False
        self._size = len(data)
        self._snapshot_bytes = len(data)
        return len(data)

    def reset(self) -> None:
        """Forgets every count, durably (a seek replays from a new point: counting starts again)."""
        self.counts.clear()
        self.compact()

    def close(self) -> None:
        """Releases the file (call :meth:`flush` first to keep the last changes)."""
        self._drop_writer()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise PersistFailed(errno.EBADF, f"{self._path}: the journal is closed")

    def _writer(self) -> StoreFile:
        if self._file is None:
            self._file = self._opener(str(self._path), "ab")
        return self._file

    def _drop_writer(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _cut(self, size: int) -> None:
        """Cuts a torn last record off before anything is appended after it."""
        try:
            f = self._writer()
            f.truncate(size)
            f.seek(size)
        except OSError:
            self._needs_compact = True
            self._drop_writer()


def _record(kind: int, payload: bytes) -> bytes:
    body = zlib.compress(payload, 1)
    head = _REC.pack(len(body), kind, zlib.crc32(struct.pack("<IB", len(body), kind)))
    return head + body + _CRC.pack(zlib.crc32(body, zlib.crc32(head)))


def inflate_counts(body: bytes, max_runs: int) -> bytes:
    """Compressed ``RedeliveryCounts`` bytes, inflated; refused past what ``max_runs`` runs can take."""
    limit = _BYTES_PER_RUN * max_runs + 64
    try:
        d = zlib.decompressobj()
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise CorruptSnapshot(f"redelivery counts do not inflate ({e})") from e
    if len(out) > limit or d.unconsumed_tail:
        raise BudgetExceeded(f"redelivery counts inflate past {limit} bytes (max_runs bounds them)")
    if not d.eof or d.unused_data:
        raise CorruptSnapshot("compressed redelivery counts are incomplete or have bytes after them")
    return out


def _read(data: bytes, counts: RedeliveryCounts, report: JournalReport, where: str) -> bool:
    """Applies the journal's records to ``counts``; False when it must be rewritten (damage found)."""
    if len(data) < _HEAD.size:
        report.problems.append(f"{where}: {len(data)} bytes, shorter than the journal header")
        return False
    magic, version, flags = _HEAD.unpack_from(data)
    if magic != _MAGIC or flags != 0:
        report.problems.append(f"{where}: not a redelivery journal (bad magic)")
        return False
    if version > JOURNAL_VERSION:  # a newer build's journal: refused, never rewritten
        raise UnsupportedVersion(f"{where}: journal version {version}, this build reads {JOURNAL_VERSION}")
    if version != JOURNAL_VERSION:
        report.problems.append(f"{where}: journal version {version} is not one any build wrote")
        return False
    limit = _BYTES_PER_RUN * counts.max_runs + 64
    pos = _HEAD.size
    first = True
    while pos < len(data):
        if len(data) - pos < _REC.size + _CRC.size:
            if first:
                break  # the snapshot is written whole (atomically): a short one is damage
            report.torn_bytes = len(data) - pos
            break
        length, kind, head_crc = _REC.unpack_from(data, pos)
        if zlib.crc32(data[pos : pos + 5]) != head_crc or kind not in (_SNAPSHOT, _DELTA) or length > limit:
            report.problems.append(f"{where}: a bad record header at byte {pos}")
            break
        end = pos + _REC.size + length
        if end + _CRC.size > len(data):
            if not first:
                report.torn_bytes = len(data) - pos
            break
        (stored,) = _CRC.unpack_from(data, end)
        if zlib.crc32(memoryview(data)[pos:end]) != stored:
            report.problems.append(f"{where}: the record at byte {pos} fails its checksum")
            break
        if first != (kind == _SNAPSHOT):
            report.problems.append(f"{where}: the record at byte {pos} is out of place")
            break
        try:
            counts.apply(inflate_counts(data[pos + _REC.size : end], counts.max_runs))
        except CorruptSnapshot as e:
            report.problems.append(f"{where}: the record at byte {pos} does not decode ({e})")
            break
        report.records += 1
        first = False
        pos = end + _CRC.size
    counts.take_delta()  # what was read is stored already
    if first and not report.problems:
        report.problems.append(f"{where}: no snapshot record (the journal is cut short)")
    if report.problems and pos < len(data):
        report.problems[-1] += f"; {len(data) - pos} bytes from there not read"
    return not report.problems
