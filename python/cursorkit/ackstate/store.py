"""``FileCursorStore``: a cursor's ack state made durable on local files, incrementally and crash-safely.

The embedded stand-in for Pulsar's cursor ledger + metadata store, in the layout PIP-81 proposed and
Pulsar never shipped: a flush appends one record per *dirty* ledger and a checkpoint marker naming the
live record of every ledger, so its cost follows what changed rather than the whole backlog.

One directory per cursor::

    store.meta           current log generation (replaced atomically: temp, fsync, rename, fsync dir)
    cursor-<gen>.log     append-only log of that generation

A log starts with ``LOG_MAGIC`` (8 bytes) and a HEADER record; then LEDGER and MARKER records. A
record is ``sync "CK" | kind u8 | flags u8 (0) | payload length u32 | payload | CRC-32 u32``, little
endian, the CRC covering header and payload. Payloads are protobuf (``cursor_store.proto``): HEADER a
``LogHeader``, LEDGER a ``cursor_snapshot.LedgerAcks`` (roaring portable bitmap), MARKER a
``Checkpoint`` (mark-delete, batches, properties, and (ledger, offset, length) of every live record).
``store.meta`` is ``META_MAGIC | length u32 | StoreMeta | CRC-32 u32`` (CRC over all before it).

Recovery uses the last marker whose record and referenced ledger records are intact; damage is
reported in :class:`RecoveryReport` and only a store with no usable marker left raises
``CorruptSnapshot``. Compaction rolls the live records into a new generation once dead bytes exceed
``StoreOptions``' threshold.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.persist import checked_properties
from cursorkit.ackstate.store_api import CursorStore
from cursorkit.ackstate.store_log import (
    FORMAT_VERSION,
    KIND_HEADER,
    KIND_LEDGER,
    LOG_MAGIC,
    LOG_NAME,
    META_FILE,
    META_MAGIC,
    META_TMP,
    U32,
    Checkpoint,
    DamagedRecord,
    LogRecovery,
    Unusable,
    encode_record,
    lay_out,
    ledger_record,
    parse_at,
    read_ledger,
    read_meta,
    recover_log,
)
from cursorkit.errors import CorruptSnapshot, InvalidArgument, PersistFailed
from cursorkit.fsio import Opener, StoreFile, default_opener, read_regular, write_all
from cursorkit.proto import cursor_store_pb2 as pb

__all__ = [
    "FORMAT_VERSION",
    "META_FILE",
    "CursorStore",
    "DamagedRecord",
    "FileCursorStore",
    "FlushResult",
    "Opener",
    "RecoveryReport",
    "StoreFile",
    "StoreOptions",
]

_INITIAL_MARK_DELETE = Position(0, -1)
_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOptions:
    """When a flush rolls the log into a new generation (Pulsar rolls its cursor ledger by entry count)."""

    compact_min_dead_bytes: int = 4 * _MiB
    """Dead bytes (superseded records and markers) below which the log is never compacted."""
    compact_dead_ratio: float = 1.0
    """Compact once dead bytes exceed both this multiple of the live bytes and the minimum above."""
    sync: bool = True
    """fsync what a flush writes before it returns. False only for a store its writer makes durable
    as a whole afterwards (a rebuild's staged output, synced once before its commit)."""

    def __post_init__(self) -> None:
        dead: object = self.compact_min_dead_bytes
        ratio: object = self.compact_dead_ratio
        if isinstance(dead, bool) or not isinstance(dead, int) or dead < 0:
            raise InvalidArgument(f"compact_min_dead_bytes must be a non-negative int, got {dead!r}")
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio >= 0:
            raise InvalidArgument(f"compact_dead_ratio must be a number >= 0, got {ratio!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryReport:
    """What :meth:`FileCursorStore.open` found: the marker it used and any damage it stepped over."""

    log_file: str
    generation: int
    marker_offset: int
    """Byte offset of the checkpoint marker the state was rebuilt from."""
    marker_sequence: int
    """Flush number of that marker (0: the empty marker written by ``create``)."""
    records_scanned: int
    """Intact records read from the log."""
    ledgers: int
    """Ledger records the marker references."""
    log_bytes: int
    torn_tail_bytes: int = 0
    """Bytes of an incomplete record at the end of the log (a write cut short by a crash)."""
    unused_tail_bytes: int = 0
    """Bytes after the marker used (an unfinished flush, torn tail included); dropped on the next flush."""
    corrupt_records: tuple[DamagedRecord, ...] = ()
    fallbacks: tuple[DamagedRecord, ...] = ()
    """Markers (and logs) passed over for an older one, newest first, with the reason."""
    unfinished_flush_records: int = 0
    """Whole records after the marker used: a flush cut at a record boundary before its marker
    (its state is not recovered, and this says so)."""
    meta_error: str | None = None
    """Why ``store.meta`` was unusable (the log generation was then found by scanning the directory)."""
    stale_files_removed: tuple[str, ...] = ()

    @property
    def damaged(self) -> bool:
        """Whether anything was torn, corrupt or passed over."""
        return bool(
            self.torn_tail_bytes
            or self.unfinished_flush_records
            or self.corrupt_records
            or self.fallbacks
            or self.meta_error is not None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushResult:
    """One :meth:`FileCursorStore.flush`: what it wrote (nothing when ``skipped``)."""

    skipped: bool
    """Nothing changed since the last flush, so nothing was written."""
    bytes_written: int
    ledgers_written: int
    ledgers_dropped: int
    """Ledgers emptied since the last flush: dropped from the marker's index."""
    marker_bytes: int
    compacted: bool
    """The flush rolled the log into a new generation (all live ledgers written)."""
    generation: int
    sequence: int
    """Flush number of the marker now current."""
    duration_s: float


class _Switched(Exception):
    """The metadata file was renamed into place but the directory fsync failed."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _datasync(fd: int) -> None:
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


def _file_options(options: dict[str, Any]) -> tuple[StoreOptions | None, Opener | None]:
    """The file store's keyword arguments (``options``, ``opener``); anything else is refused."""
    unknown = sorted(set(options) - {"options", "opener"})
    if unknown:
        raise InvalidArgument(f"a file cursor store takes options= and opener=, not {', '.join(unknown)}")
    store_options = options.get("options")
    if store_options is not None and not isinstance(store_options, StoreOptions):
        raise InvalidArgument(f"options must be StoreOptions, got {type(store_options).__name__}")
    opener = options.get("opener")
    if opener is not None and not callable(opener):
        raise InvalidArgument(f"opener must be callable, got {type(opener).__name__}")
    return store_options, opener


class FileCursorStore(CursorStore):
    """A durable home for one cursor's ack state in a local directory: incremental flushes, crash recovery.

    ``CursorStore.create(path)`` makes one, ``CursorStore.open(path)`` reopens it (recovery happens
    there, with ``options=StoreOptions(...)`` and ``opener=`` as keywords); :meth:`recover` rebuilds the
    cursor, :meth:`flush` persists it. One lock serialises flushes and compactions; the store directory
    is locked (``flock``) against a second opener.
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
        self._file: StoreFile | None = None
        self._generation = 0
        self._next_generation = 1
        self._index: dict[int, tuple[int, int]] = {}
        self._ledger_bytes = 0
        self._preamble_bytes = 0
        self._marker_bytes = 0
        self._log_size = 0
        self._checkpoint = Checkpoint(0, _INITIAL_MARK_DELETE, [], {})
        self._bound: Cursor | None = None
        self._bound_mutations = -1
        self._bitmaps: list[tuple[int, bytes]] | None = None
        self._truncate_to: int | None = None
        self._needs_roll = False
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
        store_options, opener = _file_options(options)
        root = Path(location)
        root.mkdir(parents=True, exist_ok=True)
        if (root / META_FILE).exists() or any(LOG_NAME.fullmatch(p.name) for p in root.iterdir()):
            raise FileExistsError(errno.EEXIST, "a cursor store already exists", str(root))
        store = cls(root, store_options, opener)
        try:
            store._name = name
            with store._lock:
                try:
                    written = store._roll([], store._checkpoint)
                except (OSError, _Switched) as e:
                    raise store._failed(e, "create") from e
            store._report = RecoveryReport(
                log_file=str(store.log_path),
                generation=store._generation,
                marker_offset=store._log_size - store._marker_bytes,
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
        store_options, opener = _file_options(options)
        store = cls(Path(location), store_options, opener)
        try:
            store._load()
        except BaseException:
            store._release()
            raise
        return store

    def _log_files(self) -> dict[int, Path]:
        found: dict[int, Path] = {}
        for p in self._path.iterdir():
            m = LOG_NAME.fullmatch(p.name)
            if m:
                found[int(m.group(1))] = p
        return found

    def _log_for(self, generation: int) -> Path:
        return self._path / f"cursor-{generation:012d}.log"

    def _load(self) -> None:
        meta_path = self._path / META_FILE
        meta, meta_error = read_meta(meta_path)
        logs = self._log_files()
        if meta is not None:
            primary: int | None = meta.generation
            order = [meta.generation, *sorted((g for g in logs if g != meta.generation), reverse=True)]
        else:
            primary = None
            order = sorted(logs, reverse=True)
        passed: list[DamagedRecord] = []
        found: LogRecovery | None = None
        for gen in order:
            path = self._log_for(gen)
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
                self._sync(self._dir_fd)
        else:
            self._needs_roll = True
        self._install(found)
        passed_markers = [*passed, *found.skipped]
        torn_bytes = found.size - found.torn_offset if found.torn_offset is not None else 0
        self._report = RecoveryReport(
            log_file=str(self._log_for(found.generation)),
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
        self._next_generation = max([found.generation, *logs]) + 1
        if found.corrupt or found.skipped:
            self._needs_roll = True
        elif found.marker_end != found.size:
            self._truncate_to = found.marker_end

    def _install(self, found: LogRecovery) -> None:
        self._generation = found.generation
        self._checkpoint = found.checkpoint
        self._index = found.index
        self._ledger_bytes = sum(n for _, n in found.index.values())
        self._preamble_bytes = found.preamble
        self._marker_bytes = found.marker_end - found.marker_offset
        self._log_size = found.size
        self._bitmaps = found.bitmaps

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
    def generation(self) -> int:
        """Current log generation."""
        return self._generation

    @property
    def log_path(self) -> Path:
        """The current log file."""
        return self._log_for(self._generation)

    @property
    def sequence(self) -> int:
        """Flush number of the current marker."""
        return self._checkpoint.sequence

    @property
    def log_bytes(self) -> int:
        """Size of the current log file."""
        return self._log_size

    @property
    def live_bytes(self) -> int:
        """Bytes of the current log that recovery needs: header, live ledger records, last marker."""
        return self._preamble_bytes + self._ledger_bytes + self._marker_bytes

    @property
    def dead_bytes(self) -> int:
        """Bytes of the current log that compaction would drop."""
        return self._log_size - self.live_bytes

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
            cp = self._checkpoint
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
        for lid, (off, length) in sorted(self._index.items()):
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
        return self._needs_roll or self._log_size - live > threshold

    def flush(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> FlushResult:
        """Persists the cursor: its dirty ledgers and a marker, in one write, fsynced before returning.

        Writes every ledger when ``full``, when ``cursor`` is not the one last flushed or recovered,
        or when the log rolls into a new generation (compaction, or after damage). Skips the write
        when nothing changed unless ``force``. A failed write raises ``PersistFailed``, leaves the
        previous flush recoverable and marks the ledgers dirty again.
        """
        return self._flush(cursor, full=full, force=force, roll=False)

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
            for lid, (off, length) in sorted(self._index.items()):
                rec, reason, _ = parse_at(data, off)
                if rec is None or rec.total != length:
                    raise CorruptSnapshot(f"{self.log_path}: ledger {lid} record at byte {off}: {reason}")
                records.append((lid, data[off : off + length]))
            cp = self._checkpoint
            nxt = Checkpoint(cp.sequence + 1, cp.mark_delete, cp.batches, cp.properties)
            try:
                written = self._roll(records, nxt)
            except (OSError, _Switched) as e:
                raise self._failed(e, "compaction") from e
            return FlushResult(
                skipped=False,
                bytes_written=written,
                ledgers_written=len(records),
                ledgers_dropped=0,
                marker_bytes=self._marker_bytes,
                compacted=True,
                generation=self._generation,
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
            cp = self._checkpoint
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
                    generation=self._generation,
                    sequence=cp.sequence,
                    duration_s=time.perf_counter() - started,
                )
            if not whole and not self._index_follows(ledgers, live):
                # The cursor's ledgers are not the store's (its state was replaced): write them all.
                md, ledgers, live, batches, mutations = cursor.flush_state(dirty_only=False, clear_dirty=True)
                whole = True
            touched = {lid for lid, _ in ledgers}
            dropped = len(set(self._index) - set(live))
            if whole:
                touched.update(self._index)
            nxt = Checkpoint(cp.sequence + 1, md, batches, properties)
            records = [(lid, ledger_record(lid, blob)) for lid, blob in ledgers if blob is not None]
            try:
                written = self._roll(records, nxt) if roll else self._append(records, set(live), nxt, whole)
            except (OSError, _Switched) as e:
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
                marker_bytes=self._marker_bytes,
                compacted=roll,
                generation=self._generation,
                sequence=nxt.sequence,
                duration_s=time.perf_counter() - started,
            )

    def _index_follows(self, ledgers: Iterable[tuple[int, bytes | None]], live: list[int]) -> bool:
        keys = set(self._index)
        for lid, blob in ledgers:
            if blob is None:
                keys.discard(lid)
            else:
                keys.add(lid)
        return keys == set(live)

    def _failed(self, e: BaseException, what: str) -> PersistFailed:
        cause = e.cause if isinstance(e, _Switched) else e
        code = cause.errno if isinstance(cause, OSError) and cause.errno is not None else errno.EIO
        return PersistFailed(
            code,
            f"cursor store {self._path}: {what} failed ({cause}); the previous flush is still recoverable",
        )

    def _sync(self, fd: int, *, data_only: bool = False) -> None:
        """Syncs ``fd`` (``fdatasync`` with ``data_only``) unless the options turn syncing off."""
        if self._options.sync:
            (_datasync if data_only else os.fsync)(fd)

    def _writer(self) -> StoreFile:
        """The append handle of the current log, after cutting off any unused tail found at recovery."""
        if self._file is None:
            path = str(self.log_path)
            try:
                f = self._opener(path, "ab")
                if self._truncate_to is not None:
                    f.truncate(self._truncate_to)
                    f.seek(self._truncate_to)
                    self._sync(f.fileno())
                    self._log_size = self._truncate_to
                    self._truncate_to = None
            except OSError:
                self._needs_roll = True
                raise
            self._file = f
        return self._file

    def _append(self, records: list[tuple[int, bytes]], live: set[int], cp: Checkpoint, whole: bool) -> int:
        """Appends ledger records and a marker in one write and fsyncs; undone on failure."""
        f = self._writer()
        start = self._log_size
        index = {} if whole else {lid: ref for lid, ref in self._index.items() if lid in live}
        blob_out, marker = lay_out(records, cp, index, start)
        stage = "write"
        try:
            write_all(f, blob_out)
            stage = "sync"
            self._sync(f.fileno(), data_only=True)
        except OSError:
            self._undo_append(f, start, synced_failed=stage == "sync")
            raise
        self._log_size = start + len(blob_out)
        self._index = index
        self._ledger_bytes = sum(n for _, n in index.values())
        self._marker_bytes = len(marker)
        self._checkpoint = cp
        return len(blob_out)

    def _undo_append(self, f: StoreFile, start: int, *, synced_failed: bool) -> None:
        """Cuts a failed flush off the log; if that fails too (or fsync failed), rolls next time."""
        if synced_failed:
            self._needs_roll = True
        try:
            f.truncate(start)
            f.seek(start)
            self._sync(f.fileno())
        except OSError:
            self._needs_roll = True

    def _roll(self, records: list[tuple[int, bytes]], cp: Checkpoint) -> int:
        """Writes a new generation (live records + marker), switches the metadata, drops the old log."""
        gen = self._next_generation
        self._next_generation += 1
        path = self._log_for(gen)
        head = pb.LogHeader(format_version=FORMAT_VERSION, generation=gen, cursor_name=self.name)
        header = encode_record(KIND_HEADER, head.SerializeToString())
        preamble = len(LOG_MAGIC) + len(header)
        index: dict[int, tuple[int, int]] = {}
        body, marker = lay_out(records, cp, index, preamble)
        data = LOG_MAGIC + header + body
        f: StoreFile | None = None
        try:
            f = self._opener(str(path), "xb")
            write_all(f, data)
            self._sync(f.fileno())
            self._sync(self._dir_fd)
            self._write_meta(gen)
        except OSError:
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            raise
        except _Switched:
            # The metadata now names the new log, durable or not: it is the current one either way.
            self._switch_to(gen, f, data, index, preamble, len(marker), cp)
            self._needs_roll = True
            raise
        self._switch_to(gen, f, data, index, preamble, len(marker), cp)
        self._needs_roll = False
        for other, stale in self._log_files().items():
            if other != gen:
                with contextlib.suppress(OSError):
                    stale.unlink()
        return len(data)

    def _switch_to(
        self,
        gen: int,
        f: StoreFile | None,
        data: bytes,
        index: dict[int, tuple[int, int]],
        preamble: int,
        marker_bytes: int,
        cp: Checkpoint,
    ) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._file = f
        self._generation = gen
        self._index = index
        self._ledger_bytes = sum(n for _, n in index.values())
        self._preamble_bytes = preamble
        self._marker_bytes = marker_bytes
        self._log_size = len(data)
        self._checkpoint = cp
        self._truncate_to = None

    def _write_meta(self, gen: int) -> None:
        payload = pb.StoreMeta(format_version=FORMAT_VERSION, generation=gen, cursor_name=self.name)
        body = payload.SerializeToString()
        head = META_MAGIC + U32.pack(len(body)) + body
        tmp = self._path / META_TMP
        f = self._opener(str(tmp), "wb")
        try:
            write_all(f, head + U32.pack(zlib.crc32(head)))
            self._sync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                f.close()
            tmp.unlink(missing_ok=True)
            raise
        f.close()
        os.replace(tmp, self._path / META_FILE)
        try:
            self._sync(self._dir_fd)
        except OSError as e:
            raise _Switched(e) from e

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the log and unlocks the directory (nothing is flushed: call :meth:`flush` first)."""
        with self._lock:
            if not self._closed:
                self._release()

    def _release(self) -> None:
        self._closed = True
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            os.close(self._dir_fd)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"generation {self._generation}, {self._log_size} bytes"
        return f"FileCursorStore({str(self._path)!r}, name={self.name!r}, {state})"


CursorStore.register("", FileCursorStore)
