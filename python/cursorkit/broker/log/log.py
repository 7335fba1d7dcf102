"""``MessageLog``: one topic's durable entries, as ledgers of segment files in one locked directory."""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Sequence
from itertools import pairwise, repeat
from operator import attrgetter
from pathlib import Path
from types import TracebackType

import numpy as np

from cursorkit import Position
from cursorkit.broker.log.format import (
    HEADER,
    NO_LEDGER,
    RECORD,
    Entry,
    EntryRow,
    Read,
    SegmentHeader,
    as_entries,
    encode_records,
)
from cursorkit.broker.log.recovery import LogRecoveryReport, recover_directory
from cursorkit.broker.log.segment import Segment
from cursorkit.errors import InvalidArgument, InvalidInputType, InvalidPosition, PersistFailed, UnknownLedger
from cursorkit.fsio import Opener, default_opener, fsync_dir

__all__ = ["DEFAULT_SEGMENT_BYTES", "MessageLog"]

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
"""A ledger's size past which the next append opens a new ledger."""
_MAX_LEDGER = (1 << 63) - 1

EntryTuple = tuple[bytes, int, int]
"""``(data, publish_time_ms, num_messages)``: one entry to append."""


_LEDGER = attrgetter("ledger_id")
_ENTRY = attrgetter("entry_id")


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputType(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {value}")
    return value


def _position(value: object) -> Position:
    if not isinstance(value, Position):
        raise InvalidInputType(f"expected a Position, got {type(value).__name__}")
    return value


class MessageLog:
    """One topic's entries: append in groups (one write, one fsync), read by position or by time, trim.

    Positions are Pulsar's ``(ledger id, entry id)``. A ledger is one segment file, its entries
    numbered from 0; once a ledger holds ``segment_bytes`` or more, the next append opens a new
    ledger with the next id (ids start at 1, ascend and are never reused, even across trims and
    restarts). A group is never split: it lands
    in one ledger, which may therefore pass ``segment_bytes`` by one group.

    Thread-safe: appends are serialised, and reads and trims wait only for an append's index update,
    not for its write and fsync.
    """

    def __init__(self, path: Path, dir_fd: int, opener: Opener, *, segment_bytes: int, sync: bool) -> None:
        """Takes a locked directory; use :meth:`open`."""
        self._path = path
        self._dir_fd = dir_fd
        self._opener = opener
        self._segment_bytes = segment_bytes
        self._sync = sync
        self._append_lock = threading.Lock()
        self._lock = threading.Lock()
        self._segments: dict[int, Segment] = {}
        self._ids: list[int] = []
        self._next_ledger = 1
        self._closed = False
        self._report = LogRecoveryReport(ledgers=0, entries=0)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        sync: bool = True,
        opener: Opener | None = None,
    ) -> MessageLog:
        """Creates the log in ``directory`` (made if missing) or recovers it; :attr:`report` says how.

        ``sync=False`` skips every fsync (tests only). ``opener(path, mode)`` opens the files written
        (fault injection). A directory another ``MessageLog`` holds raises ``BlockingIOError``.
        """
        segment_bytes = _count("segment_bytes", segment_bytes)
        if opener is not None and not callable(opener):
            raise InvalidInputType(f"opener must be callable, got {type(opener).__name__}")
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(dir_fd)
            raise BlockingIOError(errno.EAGAIN, "message log is open elsewhere", str(path)) from e
        log = cls(path, dir_fd, opener or default_opener, segment_bytes=segment_bytes, sync=sync)
        try:
            found = recover_directory(path)
            for segment in found.segments:
                log._install(segment)
            log._next_ledger = found.next_ledger
            log._report = found.report
            if not log._ids:
                log._roll()
        except BaseException:
            log._release()
            raise
        return log

    # -- state -------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The log's directory."""
        return self._path

    @property
    def report(self) -> LogRecoveryReport:
        """What :meth:`open` found."""
        return self._report

    @property
    def current_ledger(self) -> int:
        """The ledger appends go to (a new one once it is full or sealed)."""
        return self._ids[-1]

    @property
    def last_position(self) -> Position:
        """The newest entry; ``Position(current_ledger, -1)`` when the log holds none (as in Pulsar)."""
        with self._lock:
            for lid in reversed(self._ids):
                if self._segments[lid].entries:
                    return Position(lid, self._segments[lid].entries - 1)
            return Position(self._ids[-1], -1)

    @property
    def first_position(self) -> Position:
        """The oldest entry held; equal to :attr:`last_position` (entry -1) when the log holds none."""
        with self._lock:
            for lid in self._ids:
                if self._segments[lid].entries:
                    return Position(lid, 0)
            return Position(self._ids[-1], -1)

    @property
    def end_position(self) -> Position:
        """The position just after the newest entry (``read_from`` there returns nothing yet)."""
        last = self.last_position
        return Position(last.ledger_id, last.entry_id + 1)

    @property
    def entries(self) -> int:
        """Entries held."""
        with self._lock:
            return sum(s.entries for s in self._segments.values())

    @property
    def bytes(self) -> int:
        """Bytes of the ledgers' files that are served (headers and records)."""
        with self._lock:
            return sum(s.end for s in self._segments.values())

    def ledger_sizes(self) -> dict[int, int]:
        """Entries per ledger, oldest first: the sealed ledgers and the current one."""
        with self._lock:
            return {lid: self._segments[lid].entries for lid in self._ids}

    def ledger_bytes(self) -> dict[int, int]:
        """Bytes of entry data per ledger (its file without its header and record headers), oldest first."""
        with self._lock:
            return {
                lid: max(0, s.end - HEADER.size - s.entries * RECORD.size)
                for lid, s in ((lid, self._segments[lid]) for lid in self._ids)
            }

    # -- appends -----------------------------------------------------------------------------------

    def append(self, entries: Sequence[EntryTuple]) -> list[Position]:
        """Stores ``(data, publish_time_ms, num_messages)`` entries; their positions, in order.

        The whole group is one write, fdatasynced before this returns (with ``sync``): the group
        commit. A failed write or sync raises ``PersistFailed``; the group is cut off again and
        never read back. After a failed sync, or when cutting off fails, the ledger is sealed: a
        new one is opened whose header records where the old one ends.
        """
        given: object = entries
        if not isinstance(given, Sequence) or isinstance(given, str | bytes | bytearray | memoryview):
            raise InvalidInputType(f"entries must be a sequence of tuples, got {type(given).__name__}")
        blob, offsets, times = encode_records(entries)  # checks every entry first
        if not offsets:
            return []
        with self._append_lock:
            self._check_open()
            current = self._segments[self._ids[-1]]
            if current.must_seal or (current.entries and current.end >= self._segment_bytes):
                current = self._roll()
            try:
                start = current.write(blob, self._opener, sync=self._sync)
            except OSError as e:
                self._seal_now(current)
                raise self._failed(e, f"append to ledger {current.ledger_id}") from e
            with self._lock:
                first = current.publish(start, len(blob), offsets, times)
            return [Position(current.ledger_id, first + i) for i in range(len(entries))]

    def _roll(self) -> Segment:
        """Opens the next ledger; its header records where the current one ends."""
        lid = self._next_ledger
        if lid > _MAX_LEDGER:
            raise PersistFailed(errno.EOVERFLOW, f"message log {self._path}: no ledger id left")
        self._next_ledger += 1  # spent even if creating fails: an id is never used twice
        prev = self._segments[self._ids[-1]] if self._ids else None
        header = SegmentHeader(
            lid,
            prev.ledger_id if prev else NO_LEDGER,
            prev.entries if prev else 0,
            prev.end if prev else 0,
        )
        try:
            segment = Segment.create(self._path, header, self._opener, sync=self._sync)
        except OSError as e:
            raise self._failed(e, f"creating ledger {lid}") from e
        with self._lock:
            self._install(segment)
        if prev is not None:
            prev.close_writer()
            prev.save_index(self._opener, sync=self._sync)
        return segment

    def _seal_now(self, current: Segment) -> None:
        """Opens the next ledger at once when ``current`` must be sealed (else the next append does).

        Its header records where ``current`` ends, so a failed group left in ``current``'s tail
        is not served even after a crash. Only when this fails too, and the process dies before an
        append or :meth:`close` succeeds at it, can recovery find such a group whole and serve it.
        """
        if current.must_seal:
            with contextlib.suppress(PersistFailed):
                self._roll()

    def _install(self, segment: Segment) -> None:
        self._segments[segment.ledger_id] = segment
        self._ids.append(segment.ledger_id)

    def _failed(self, e: OSError, what: str) -> PersistFailed:
        if isinstance(e, PersistFailed):
            return e
        code = e.errno if e.errno is not None else errno.EIO
        return PersistFailed(code, f"message log {self._path}: {what} failed ({e}); nothing of it is served")

    # -- reads -------------------------------------------------------------------------------------

    def read(self, position: Position) -> Entry:
        """The entry at ``position``.

        ``UnknownLedger`` for a ledger the log does not hold (trimmed, or never made);
        ``InvalidPosition`` for an entry its ledger does not hold.
        """
        position = _position(position)
        with self._lock:
            self._check_open()
            segment = self._segments.get(position.ledger_id)
            if segment is None:
                raise UnknownLedger(f"ledger {position.ledger_id} is not in the log (trimmed or never made)")
            if not 0 <= position.entry_id < segment.entries:
                raise InvalidPosition(
                    f"entry {position.entry_id} is not in ledger {position.ledger_id} "
                    f"({segment.entries} entries)"
                )
            return segment.read(position.entry_id, 1)[0]

    def read_from(self, position: Position, max_entries: int, max_bytes: int) -> list[Entry]:
        """Entries at or after ``position``, in order across ledgers, up to both limits.

        ``max_bytes`` counts entry data; the first entry is returned even when it alone is larger
        (so a reader always moves on). A position in a trimmed ledger starts at the oldest entry
        after it; past the end the list is empty.
        """
        return as_entries(self._rows(position, max_entries, max_bytes))

    def read_positions(self, positions: Sequence[Position]) -> Read:
        """The entries at ``positions``, in that order, as columns (a dispatcher's redeliveries).

        Each run of consecutive entries of one ledger is one ``pread``. ``UnknownLedger`` or
        ``InvalidPosition`` as :meth:`read` for a position the log does not hold.
        """
        if not all(map(isinstance, positions, repeat(Position))):
            for p in positions:
                _position(p)  # the first that is not one raises
        n = len(positions)
        ls = np.fromiter(map(_LEDGER, positions), np.int64, n)
        es = np.fromiter(map(_ENTRY, positions), np.int64, n)
        # A run starts where the ledger changes or the entry is not the one after the previous.
        starts = (
            np.flatnonzero(np.r_[True, (ls[1:] != ls[:-1]) | (es[1:] != es[:-1] + 1)]).tolist() if n else []
        )
        rows: list[EntryRow] = []
        with self._lock:
            self._check_open()
            for start, stop in pairwise([*starts, n]):
                lid, first, count = int(ls[start]), int(es[start]), stop - start
                segment = self._segments.get(lid)
                if segment is None:
                    raise UnknownLedger(f"ledger {lid} is not in the log (trimmed or never made)")
                if not (first >= 0 and first + count <= segment.entries):
                    raise InvalidPosition(
                        f"entries {first}..{first + count - 1} are not all in ledger {lid} "
                        f"({segment.entries} entries)"
                    )
                rows += segment.read_rows(first, count)
        return Read.of(rows)

    def read_columns(self, position: Position, max_entries: int, max_bytes: int) -> Read:
        """:meth:`read_from` as columns (:class:`~.format.Read`): no ``Entry`` per entry."""
        return Read.of(self._rows(position, max_entries, max_bytes))

    def _rows(self, position: Position, max_entries: int, max_bytes: int) -> list[EntryRow]:
        position = _position(position)
        max_entries = _count("max_entries", max_entries)
        max_bytes = _count("max_bytes", max_bytes)
        rows: list[EntryRow] = []
        with self._lock:
            self._check_open()
            k = bisect.bisect_left(self._ids, position.ledger_id)
            budget = max_bytes
            for lid in self._ids[k:]:
                segment = self._segments[lid]
                first = max(position.entry_id, 0) if lid == position.ledger_id else 0
                count, size = segment.fit(first, max_entries - len(rows), budget, take_one=not rows)
                budget -= size
                rows += segment.read_rows(first, count)
                if len(rows) >= max_entries or (first + count < segment.entries):
                    break
        return rows

    def find_by_time(self, publish_time_ms: int) -> Position:
        """The first entry, by ledger then entry, whose publish time is >= ``publish_time_ms``.

        Publish times need not grow (producers' clocks differ): each ledger keeps the running
        maximum of its publish times, so a binary search finds exactly the first entry at or after
        the time, in O(ledgers + log entries). :attr:`end_position` when no entry is that late.
        """
        if isinstance(publish_time_ms, bool) or not isinstance(publish_time_ms, int):
            raise InvalidInputType(f"publish_time_ms must be an int, got {type(publish_time_ms).__name__}")
        with self._lock:
            self._check_open()
            for lid in self._ids:
                times = self._segments[lid].max_times
                if times and times[-1] >= publish_time_ms:
                    return Position(lid, bisect.bisect_left(times, publish_time_ms))
        return self.end_position

    # -- trim --------------------------------------------------------------------------------------

    def trim(self, before: Position) -> list[int]:
        """Deletes the ledgers whose entries all lie before ``before`` (never the current one).

        Returns their ids. Each ledger goes with one unlink, oldest first, then the directory is
        synced: a crash leaves every ledger whole or gone, and the ones left are the newest.
        """
        before = _position(before)
        gone: list[int] = []
        with self._lock:
            self._check_open()
            doomed = [
                lid
                for lid in self._ids[:-1]
                if lid < before.ledger_id
                or (lid == before.ledger_id and before.entry_id >= self._segments[lid].entries)
            ]
            try:
                for lid in doomed:
                    segment = self._segments[lid]
                    segment.remove()
                    segment.close()
                    del self._segments[lid]
                    self._ids.remove(lid)
                    gone.append(lid)
                if gone and self._sync:
                    fsync_dir(self._path)
            except OSError as e:
                raise self._failed(e, f"trimming (deleted {gone})") from e
        return gone

    # -- lifetime ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"message log {self._path} is closed")

    def close(self) -> None:
        """Closes every file and unlocks the directory (everything appended is already durable).

        A ledger left sealed by a failed append gets its successor first, if it has none yet. Each
        ledger's index file is written where it is missing or stale, so that the next open loads
        the indexes instead of scanning the records.
        """
        with self._append_lock:
            if not self._closed:
                self._seal_now(self._segments[self._ids[-1]])
            with self._lock:
                if not self._closed:
                    for segment in self._segments.values():
                        segment.save_index(self._opener, sync=self._sync)
                    self._release()

    def _release(self) -> None:
        self._closed = True
        for segment in self._segments.values():
            segment.close()
        with contextlib.suppress(OSError):
            os.close(self._dir_fd)

    def __enter__(self) -> MessageLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._ids)} ledgers"
        return f"MessageLog({str(self._path)!r}, {state})"
