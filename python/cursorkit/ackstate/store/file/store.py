"""``FileCursorStore``: one cursor in one locked directory; recovery picks the last intact marker."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from cursorkit._core import RangeSet, RedeliveryCounts
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist import checked_properties
from cursorkit.ackstate.store.api import CursorStore
from cursorkit.ackstate.store.file.generations import LogFiles, Switched
from cursorkit.ackstate.store.file.log import (
    KIND_LEDGER,
    LOG_NAME,
    META_FILE,
    META_TMP,
    Checkpoint,
    DamagedRecord,
    LogRecovery,
    Unusable,
    ledger_record,
    parse_at,
    read_ledger,
    read_meta,
    recover_log,
)
from cursorkit.ackstate.store.file.reports import FlushResult, RecoveryReport, StoreOptions
from cursorkit.ackstate.store.file.side_files import (
    PROPERTIES_FILE,
    REDELIVERIES_FILE,
    LazyJournal,
    StoreProperties,
    file_options,
)
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.ackstate.store.redelivery_journal import JournalReport
from cursorkit.errors import CorruptSnapshot, InvalidArgument, PersistFailed
from cursorkit.fsio import Opener, default_opener, read_regular

__all__ = ["PROPERTIES_FILE", "REDELIVERIES_FILE", "FileCursorStore"]


class FileCursorStore(CursorStore):
    """A durable home for one cursor's ack state in a local directory: incremental flushes, crash recovery.

    ``CursorStore.create(path)`` makes one, ``CursorStore.open(path)`` reopens it (recovery happens
    there, with ``options=StoreOptions(...)`` and ``opener=`` as keywords); :meth:`recover` rebuilds the
    cursor, :meth:`flush` persists it. One lock serialises flushes and compactions; the store directory
    is locked (``flock``) against a second opener. A log cut exactly at a flush boundary recovers the
    flush before it, unreported, as a crash before that flush would (see the package docstring).
    """

    def __init__(self, path: Path, options: StoreOptions | None, opener: Opener | None) -> None:
        """Locks the directory; use :meth:`create` or :meth:`open`."""
        self._path = path
        self._options = options if options is not None else StoreOptions()
        self._opener: Opener = opener if opener is not None else default_opener
        self._lock = threading.Lock()
        self._dir_fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(self._dir_fd)
            raise BlockingIOError(errno.EAGAIN, "cursor store is open elsewhere", str(path)) from e
        self._closed = False
        self._name = ""
        self._log = LogFiles(path, self._dir_fd, self._opener, sync=self._options.sync)
        self._properties: FileCursorProperties | None = None
        self._journal = LazyJournal(path / REDELIVERIES_FILE, self._opener, self._options.sync)
        self._bound: Cursor | None = None
        self._bound_mutations = -1
        self._bitmaps: list[tuple[int, bytes]] | None = None
        self._report = RecoveryReport(
            log_file="",
            generation=0,
            marker_offset=0,
            marker_sequence=0,
            records_scanned=0,
            ledgers=0,
            log_bytes=0,
        )

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def _create(cls, location: str | os.PathLike[str], *, name: str, **options: Any) -> FileCursorStore:
        """A new, empty store in ``location`` (created if missing); ``FileExistsError`` if one is there."""
        store_options, opener = file_options(options)
        root = Path(location)
        root.mkdir(parents=True, exist_ok=True)
        if (root / META_FILE).exists() or any(LOG_NAME.fullmatch(p.name) for p in root.iterdir()):
            raise FileExistsError(errno.EEXIST, "a cursor store already exists", str(root))
        store = cls(root, store_options, opener)
        try:
            store._name = name
            with store._lock:
                try:
                    written = store._log.roll([], store._log.checkpoint, name)
                except (OSError, Switched) as e:
                    raise store._failed(e, "create") from e
            store._report = RecoveryReport(
                log_file=str(store.log_path),
                generation=store._log.generation,
                marker_offset=store._log.size - store._log.marker_bytes,
                marker_sequence=0,
                records_scanned=2,
                ledgers=0,
                log_bytes=written,
            )
            store._bitmaps = []
        except BaseException:
            store._release()
            raise
        return store

    @classmethod
    def _open(cls, location: str | os.PathLike[str], **options: Any) -> FileCursorStore:
        """An existing store, recovered: :attr:`report` says what was found, :meth:`recover` rebuilds it."""
        store_options, opener = file_options(options)
        store = cls(Path(location), store_options, opener)
        try:
            store._load()
        except BaseException:
            store._release()
            raise
        return store

    def _load(self) -> None:
        meta_path = self._path / META_FILE
        meta, meta_error = read_meta(meta_path)
        logs = self._log.found()
        if meta is not None:
            primary: int | None = meta.generation
            order = [meta.generation, *sorted((g for g in logs if g != meta.generation), reverse=True)]
        else:
            primary = None
            order = sorted(logs, reverse=True)
        passed: list[DamagedRecord] = []
        found: LogRecovery | None = None
        for gen in order:
            path = self._log.log_for(gen)
            if gen not in logs:
                passed.append(DamagedRecord(str(path), 0, "log file missing"))
                continue
            try:
                found = recover_log(path, gen)
            except Unusable as e:
                passed.append(DamagedRecord(str(path), e.offset, str(e)))
                continue
            break
        if found is None:
            why = [meta_error] if meta_error is not None else []
            why.extend(str(d) for d in passed)
            if not logs:
                why.append("no log file")
            raise CorruptSnapshot(f"cursor store {self._path}: nothing recoverable: {'; '.join(why)}")
        self._name = meta.cursor_name if meta is not None else (found.name or self._path.name)
        removed: list[str] = []
        if found.generation == primary:
            for gen, path in logs.items():
                if gen != primary:
                    path.unlink(missing_ok=True)
                    removed.append(path.name)
            tmp = self._path / META_TMP
            if tmp.exists():
                tmp.unlink()
                removed.append(tmp.name)
            if removed:
                self._log.sync(self._dir_fd)
        else:
            self._log.needs_roll = True
        self._log.install(found)
        self._bitmaps = found.bitmaps
        passed_markers = [*passed, *found.skipped]
        torn_bytes = found.size - found.torn_offset if found.torn_offset is not None else 0
        self._report = RecoveryReport(
            log_file=str(self._log.log_for(found.generation)),
            generation=found.generation,
            marker_offset=found.marker_offset,
            marker_sequence=found.checkpoint.sequence,
            records_scanned=found.records,
            ledgers=len(found.index),
            log_bytes=found.size,
            torn_tail_bytes=torn_bytes,
            unused_tail_bytes=found.size - found.marker_end,
            unfinished_flush_records=found.unfinished,
            corrupt_records=tuple(found.corrupt),
            fallbacks=tuple(passed_markers),
            meta_error=meta_error,
            stale_files_removed=tuple(sorted(removed)),
        )
        self._log.next_generation = max([found.generation, *logs]) + 1
        if found.corrupt or found.skipped:
            self._log.needs_roll = True
        elif found.marker_end != found.size:
            self._log.truncate_to = found.marker_end

    # -- state -------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The store directory."""
        return self._path

    @property
    def location(self) -> str:
        """The store directory, as :meth:`open` takes it."""
        return str(self._path)

    @property
    def report(self) -> RecoveryReport:
        """What :meth:`open` found (for a new store: its first, empty marker)."""
        return self._report

    @property
    def cursor_properties(self) -> FileCursorProperties:
        """Pulsar's string ``cursorProperties``, in ``cursor.properties`` beside the log (made on first use).

        Each change is one atomic rewrite of that file, independent of the ack state's flushes.
        """
        with self._lock:
            self._check_open()
            if self._properties is None:
                self._properties = StoreProperties(
                    self._path / PROPERTIES_FILE, self._opener, self._check_open
                )
            return self._properties

    @property
    def redelivery_counts(self) -> RedeliveryCounts:
        """The cursor's redelivery counts, journaled in ``redeliveries`` beside the log (made on first use).

        :meth:`flush` appends what changed before it writes the ack state.
        """
        with self._lock:
            self._check_open()
            return self._journal.get().counts

    @property
    def redelivery_report(self) -> JournalReport:
        """What reading the redelivery journal found."""
        with self._lock:
            self._check_open()
            return self._journal.get().report

    @property
    def generation(self) -> int:
        """Current log generation."""
        return self._log.generation

    @property
    def log_path(self) -> Path:
        """The current log file."""
        return self._log.log_for(self._log.generation)

    @property
    def sequence(self) -> int:
        """Flush number of the current marker."""
        return self._log.checkpoint.sequence

    @property
    def log_bytes(self) -> int:
        """Size of the current log file."""
        return self._log.size

    @property
    def live_bytes(self) -> int:
        """Bytes of the current log that recovery needs: header, live ledger records, last marker."""
        return self._log.live_bytes

    @property
    def dead_bytes(self) -> int:
        """Bytes of the current log that compaction would drop."""
        return self._log.size - self.live_bytes

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"cursor store {self._path} is closed")

    # -- recovery ----------------------------------------------------------------------------------

    def recover(
        self,
        *,
        ledger_sizes: Mapping[int, int] | None = None,
        limits: PersistLimits | None = None,
        pulsar_quirks: bool = False,
    ) -> Cursor:
        """The cursor as of the current marker; later :meth:`flush` calls with it are incremental."""
        with self._lock:
            self._check_open()
            bitmaps = self._bitmaps if self._bitmaps is not None else self._read_bitmaps()
            self._bitmaps = None
            cp = self._log.checkpoint
            acked = RangeSet(pulsar_quirks)
            for lid, bitmap in bitmaps:
                acked.set_ledger_bytes(lid, bitmap)
            cursor = Cursor(
                cp.mark_delete,
                name=self.name,
                pulsar_quirks=pulsar_quirks,
                ledger_sizes=ledger_sizes,
                limits=limits,
                properties=cp.properties,
            )
            cursor.restore(cp.mark_delete, acked, cp.batches)
            cursor.clear_dirty()  # the state is exactly what the marker holds
            self._bound = cursor
            self._bound_mutations = cursor.mutations
            return cursor

    def _read_bitmaps(self) -> list[tuple[int, bytes]]:
        path = self.log_path
        data = read_regular(path)
        out: list[tuple[int, bytes]] = []
        for lid, (off, length) in sorted(self._log.index.items()):
            rec, reason, _ = parse_at(data, off)
            if rec is None or rec.kind != KIND_LEDGER or rec.total != length:
                raise CorruptSnapshot(
                    f"{path}: ledger {lid} record at byte {off}: {reason or 'wrong record'}"
                )
            try:
                got = read_ledger(data, rec)
            except DecodeError as e:
                raise CorruptSnapshot(f"{path}: ledger {lid} record at byte {off} does not decode") from e
            out.append(got)
        return out

    # -- flush -------------------------------------------------------------------------------------

    @property
    def compaction_due(self) -> bool:
        """Whether the next flush rolls into a new generation (dead bytes over the threshold, or damage)."""
        live = self.live_bytes
        threshold = max(int(live * self._options.compact_dead_ratio), self._options.compact_min_dead_bytes)
        return self._log.needs_roll or self._log.size - live > threshold

    def flush(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> FlushResult:
        """Persists the cursor: its dirty ledgers and a marker, in one write, fsynced before returning.

        Writes every ledger when ``full``, when ``cursor`` is not the one last flushed or recovered,
        or when the log rolls into a new generation (compaction, or after damage). Skips the write
        when nothing changed unless ``force``. A failed write raises ``PersistFailed``, leaves the
        previous flush recoverable and marks the ledgers dirty again. Changed redelivery counts are
        appended to their journal first; if that fails, the ack state is still written, then the
        journal's ``PersistFailed`` is raised (its next flush writes every count).
        """
        with self._lock:
            self._check_open()
            failed = self._journal.flush()
        result = self._flush(cursor, full=full, force=force, roll=False)
        if failed is not None:
            raise failed
        return result

    def compact(self, cursor: Cursor | None = None) -> FlushResult:
        """Rolls the log into a new generation now.

        With ``cursor``, a full flush of its current state; without, a copy of the live records and
        the current marker.
        """
        if cursor is not None:
            return self._flush(cursor, full=True, force=True, roll=True)
        started = time.perf_counter()
        with self._lock:
            self._check_open()
            data = read_regular(self.log_path)
            records: list[tuple[int, bytes]] = []
            for lid, (off, length) in sorted(self._log.index.items()):
                rec, reason, _ = parse_at(data, off)
                if rec is None or rec.total != length:
                    raise CorruptSnapshot(f"{self.log_path}: ledger {lid} record at byte {off}: {reason}")
                records.append((lid, data[off : off + length]))
            cp = self._log.checkpoint
            nxt = Checkpoint(cp.sequence + 1, cp.mark_delete, cp.batches, cp.properties)
            try:
                written = self._log.roll(records, nxt, self.name)
            except (OSError, Switched) as e:
                raise self._failed(e, "compaction") from e
            return FlushResult(
                skipped=False,
                bytes_written=written,
                ledgers_written=len(records),
                ledgers_dropped=0,
                marker_bytes=self._log.marker_bytes,
                compacted=True,
                generation=self._log.generation,
                sequence=nxt.sequence,
                duration_s=time.perf_counter() - started,
            )

    def _flush(self, cursor: Cursor, *, full: bool, force: bool, roll: bool) -> FlushResult:
        started = time.perf_counter()
        with self._lock:
            self._check_open()
            roll = roll or self.compaction_due
            whole = full or roll or cursor is not self._bound
            properties = checked_properties(cursor.properties, f"cursor {cursor.name!r}")
            md, ledgers, live, batches, mutations = cursor.flush_state(dirty_only=not whole, clear_dirty=True)
            cp = self._log.checkpoint
            if (
                not (whole or force or ledgers)
                and mutations == self._bound_mutations
                and md == cp.mark_delete
                and batches == cp.batches
                and properties == cp.properties
            ):
                return FlushResult(
                    skipped=True,
                    bytes_written=0,
                    ledgers_written=0,
                    ledgers_dropped=0,
                    marker_bytes=0,
                    compacted=False,
                    generation=self._log.generation,
                    sequence=cp.sequence,
                    duration_s=time.perf_counter() - started,
                )
            if not whole and not self._index_follows(ledgers, live):
                # The cursor's ledgers are not the store's (its state was replaced): write them all.
                md, ledgers, live, batches, mutations = cursor.flush_state(dirty_only=False, clear_dirty=True)
                whole = True
            touched = {lid for lid, _ in ledgers}
            dropped = len(set(self._log.index) - set(live))
            if whole:
                touched.update(self._log.index)
            nxt = Checkpoint(cp.sequence + 1, md, batches, properties)
            records = [(lid, ledger_record(lid, blob)) for lid, blob in ledgers if blob is not None]
            try:
                written = (
                    self._log.roll(records, nxt, self.name)
                    if roll
                    else self._log.append(records, set(live), nxt, whole)
                )
            except (OSError, Switched) as e:
                cursor.mark_dirty(sorted(touched))
                raise self._failed(e, "flush") from e
            self._bound = cursor
            self._bound_mutations = mutations
            self._bitmaps = None
            return FlushResult(
                skipped=False,
                bytes_written=written,
                ledgers_written=len(records),
                ledgers_dropped=dropped,
                marker_bytes=self._log.marker_bytes,
                compacted=roll,
                generation=self._log.generation,
                sequence=nxt.sequence,
                duration_s=time.perf_counter() - started,
            )

    def _index_follows(self, ledgers: Iterable[tuple[int, bytes | None]], live: list[int]) -> bool:
        keys = set(self._log.index)
        for lid, blob in ledgers:
            if blob is None:
                keys.discard(lid)
            else:
                keys.add(lid)
        return keys == set(live)

    def _failed(self, e: BaseException, what: str) -> PersistFailed:
        cause = e.cause if isinstance(e, Switched) else e
        code = cause.errno if isinstance(cause, OSError) and cause.errno is not None else errno.EIO
        return PersistFailed(
            code,
            f"cursor store {self._path}: {what} failed ({cause}); the previous flush is still recoverable",
        )

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the log and unlocks the directory (nothing is flushed: call :meth:`flush` first)."""
        with self._lock:
            if not self._closed:
                self._release()

    def _release(self) -> None:
        self._closed = True
        self._log.close()
        self._journal.close()
        with contextlib.suppress(OSError):
            os.close(self._dir_fd)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"generation {self._log.generation}, {self._log.size} bytes"
        return f"FileCursorStore({str(self._path)!r}, name={self.name!r}, {state})"


CursorStore.register("", FileCursorStore)
