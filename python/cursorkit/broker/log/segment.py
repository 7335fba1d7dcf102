"""One ledger of a message log: its segment file, the in-memory index of its entries, its appends.

The index keeps, per entry, the offset of its record and the running maximum of the publish
times up to it (what :meth:`MessageLog.find_by_time` searches); it is saved in an index file
(:mod:`.index`) when the ledger is sealed or the log closed, and that file is removed before the
next append. Reads verify each record's checksum again; an append is one write and one
``fdatasync``, cut off again when it fails, and served only once it is durable.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from array import array
from itertools import accumulate
from pathlib import Path

from cursorkit.broker.log.format import (
    RECORD,
    Entry,
    EntryRow,
    SegmentHeader,
    as_entries,
    decode_rows,
    encode_header,
)
from cursorkit.broker.log.index import encode_index, index_path
from cursorkit.errors import CorruptSnapshot
from cursorkit.fsio import Opener, StoreFile, atomic_write, datasync, regular_fd, write_all

__all__ = ["SEGMENT_NAME", "Segment", "open_for_reads", "segment_path"]

SEGMENT_NAME = re.compile(r"ledger-(\d{20})\.seg")
"""A segment's file name: its ledger id in 20 digits."""

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


def segment_path(directory: Path, ledger_id: int) -> Path:
    """The segment file of ``ledger_id`` in ``directory``."""
    return directory / f"ledger-{ledger_id:020d}.seg"


def open_for_reads(path: Path) -> int:
    """A read descriptor of a segment: a regular file, never through a symlink (else ``OSError``)."""
    return regular_fd(path, _READ_FLAGS)


class Segment:
    """One ledger's file and index; the log that owns it serialises every call.

    ``must_seal`` says the next append must go to a new ledger: the tail of this file may hold
    bytes of a failed append (an fsync failed, or cutting it off did), or damage was found in it.
    ``truncate_to`` is a torn tail recovery found, cut off before the first append.
    """

    def __init__(
        self, ledger_id: int, path: Path, read_fd: int, offsets: array[int], max_times: array[int], end: int
    ) -> None:
        self.ledger_id = ledger_id
        self.path = path
        self.offsets = offsets
        """Byte offset of each entry's record."""
        self.max_times = max_times
        """The largest publish time among entries 0..i, for each entry i (non-decreasing)."""
        self.end = end
        """Bytes of the file this ledger serves (header and whole, intact records)."""
        self.must_seal = False
        self.truncate_to: int | None = None
        self.indexed = False
        """Whether the index file describes this ledger as it is now."""
        self._read_fd: int | None = read_fd
        self._writer: StoreFile | None = None

    @classmethod
    def create(cls, directory: Path, header: SegmentHeader, opener: Opener, *, sync: bool) -> Segment:
        """A new, empty ledger file: its header written atomically (temp file, fsync, rename, fsync dir).

        Raises ``PersistFailed`` (from :func:`cursorkit.fsio.atomic_write`) or ``OSError``.
        """
        path = segment_path(directory, header.ledger_id)
        data = encode_header(header)
        atomic_write(path, data, opener=opener, sync=sync)
        try:
            fd = open_for_reads(path)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return cls(header.ledger_id, path, fd, array("q"), array("q"), len(data))

    @property
    def entries(self) -> int:
        """Entries this ledger serves."""
        return len(self.offsets)

    def fit(self, first: int, max_count: int, budget: int, *, take_one: bool) -> tuple[int, int]:
        """How many entries from ``first`` (at most ``max_count``) fit ``budget`` data bytes, and their bytes.

        With ``take_one``, one entry even when it alone is larger. A binary search over the index
        (records are at least ``RECORD.size`` bytes each, so data bytes grow with the count):
        nothing is read.
        """
        limit = max(0, min(max_count, len(self.offsets) - first))
        if limit == 0:
            return 0, 0
        start = self.offsets[first]
        offsets, n, end = self.offsets, len(self.offsets), self.end

        def span(k: int) -> int:
            stop = offsets[first + k] if first + k < n else end
            return stop - start - k * RECORD.size

        count = bisect.bisect_right(range(1, limit + 1), budget, key=span)
        if count == 0 and take_one:
            count = 1
        return count, span(count)

    def read(self, first: int, count: int) -> list[Entry]:
        """Entries ``first .. first+count-1`` (in range), read in one ``pread`` and checked again."""
        return as_entries(self.read_rows(first, count))

    def read_rows(self, first: int, count: int) -> list[EntryRow]:
        """:meth:`read` as ``(position, data, publish time, count)`` tuples (no object per entry)."""
        if count <= 0:
            return []
        start = self.offsets[first]
        stop = self.offsets[first + count] if first + count < len(self.offsets) else self.end
        if self._read_fd is None:
            raise CorruptSnapshot(f"ledger {self.ledger_id} is closed")
        try:
            data = os.pread(self._read_fd, stop - start, start)
        except OSError as e:
            raise CorruptSnapshot(f"ledger {self.ledger_id}: unreadable at byte {start} ({e})") from e
        if len(data) != stop - start:
            raise CorruptSnapshot(f"ledger {self.ledger_id}: the file ends before byte {stop}")
        return decode_rows(self.ledger_id, first, data)

    def write(self, blob: bytes, opener: Opener, *, sync: bool) -> int:
        """Writes ``blob`` at the end of the served part in one write, then ``fdatasync``; its offset.

        Nothing is served until :meth:`publish`. On ``OSError`` the write is cut off again; if the
        sync failed, or cutting off did, ``must_seal`` is set.
        """
        f = self._writer_for(opener, sync=sync)
        start = self.end
        stage = "write"
        try:
            write_all(f, blob)
            if sync:
                stage = "sync"
                datasync(f.fileno())
        except OSError:
            self._undo(f, start, sync=sync)
            if stage == "sync":
                self.must_seal = True  # after a failed fsync the page cache cannot be trusted
            raise
        return start

    def publish(self, start: int, length: int, offsets: list[int], times: list[int]) -> int:
        """Serves the records written at ``start`` (``offsets`` within them); the first new entry id."""
        first = len(self.offsets)
        top = self.max_times[-1] if self.max_times else times[0]
        self.offsets.extend([start + off for off in offsets])
        self.max_times.extend(accumulate(times, max, initial=top))
        del self.max_times[first]  # the running maximum's seed
        self.end = start + length
        return first

    def save_index(self, opener: Opener, *, sync: bool) -> None:
        """Writes the index file when it is missing or stale and the file holds only what is served.

        A failure leaves no index file (the next recovery scans the ledger instead): not an error.
        """
        if self.indexed or self._read_fd is None:
            return
        try:
            if os.fstat(self._read_fd).st_size != self.end:
                return  # a failed append's bytes in the tail: recovery scans, as it must
            data = encode_index(self.ledger_id, self.end, self.offsets, self.max_times)
            atomic_write(index_path(self.path), data, opener=opener, sync=sync)
        except OSError:
            return
        self.indexed = True

    def remove(self) -> None:
        """Deletes the index file, then the segment file (one that is gone already is no error)."""
        for path in (index_path(self.path), self.path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _writer_for(self, opener: Opener, *, sync: bool) -> StoreFile:
        """The append handle, after removing the index file and cutting off a torn tail recovery found.

        The index file's removal need not be durable: one that survives a crash no longer covers
        the file's size once an append landed, so recovery does not use it.
        """
        if self._writer is None:
            with contextlib.suppress(OSError):
                index_path(self.path).unlink()
            self.indexed = False
            try:
                f = opener(str(self.path), "ab")
            except OSError:
                self.must_seal = True
                raise
            try:
                if self.truncate_to is not None:
                    f.truncate(self.truncate_to)
                    if sync:
                        os.fsync(f.fileno())
                    self.truncate_to = None
                f.seek(self.end)
            except OSError:
                self.must_seal = True
                with contextlib.suppress(OSError):
                    f.close()
                raise
            self._writer = f
        return self._writer

    def _undo(self, f: StoreFile, start: int, *, sync: bool) -> None:
        """Cuts a failed append off the file; when that fails too, the ledger must be sealed."""
        try:
            f.truncate(start)
            f.seek(start)
            if sync:
                os.fsync(f.fileno())
        except OSError:
            self.must_seal = True

    def close_writer(self) -> None:
        """Closes the append handle (a sealed ledger is only read)."""
        if self._writer is not None:
            with contextlib.suppress(OSError):
                self._writer.close()
            self._writer = None

    def close(self) -> None:
        """Closes both handles."""
        self.close_writer()
        if self._read_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)
            self._read_fd = None
