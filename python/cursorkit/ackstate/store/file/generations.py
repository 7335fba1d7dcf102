"""The log files of one file cursor store: the current generation, its index, and how it is written.

A flush appends to the current log (one write, then ``fdatasync``) and is cut off again when it
fails; a roll writes the live records into a new generation, switches ``store.meta`` to it
(temp file, fsync, rename, fsync of the directory) and drops the older logs.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path

from cursorkit._core import Position
from cursorkit.ackstate.store.file.log import (
    FORMAT_VERSION,
    KIND_HEADER,
    LOG_MAGIC,
    LOG_NAME,
    META_FILE,
    META_MAGIC,
    META_TMP,
    U32,
    Checkpoint,
    LogRecovery,
    encode_record,
    lay_out,
)
from cursorkit.fsio import Opener, StoreFile, datasync, write_all
from cursorkit.proto import cursor_store_pb2 as pb

__all__ = ["LogFiles", "Switched"]

_INITIAL_MARK_DELETE = Position(0, -1)


class Switched(Exception):
    """The metadata file was renamed into place but the directory fsync failed."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class LogFiles:
    """The store directory's logs: which generation is current, its index of live records, its sizes.

    ``needs_roll`` says the next flush must write a new generation (damage found, or a failed write
    whose undo could not be made durable); ``truncate_to`` is an unused tail recovery found, cut off
    before the first append.
    """

    def __init__(self, path: Path, dir_fd: int, opener: Opener, *, sync: bool) -> None:
        self.path = path
        self.dir_fd = dir_fd
        self.generation = 0
        self.next_generation = 1
        self.index: dict[int, tuple[int, int]] = {}
        self.ledger_bytes = 0
        self.preamble_bytes = 0
        self.marker_bytes = 0
        self.size = 0
        self.checkpoint = Checkpoint(0, _INITIAL_MARK_DELETE, [], {})
        self.truncate_to: int | None = None
        self.needs_roll = False
        self._opener = opener
        self._sync_on = sync
        self._file: StoreFile | None = None

    @property
    def live_bytes(self) -> int:
        """Bytes of the current log that recovery needs: header, live ledger records, last marker."""
        return self.preamble_bytes + self.ledger_bytes + self.marker_bytes

    def log_for(self, generation: int) -> Path:
        """The log file of ``generation``."""
        return self.path / f"cursor-{generation:012d}.log"

    def found(self) -> dict[int, Path]:
        """Every log file in the directory, by generation."""
        found: dict[int, Path] = {}
        for p in self.path.iterdir():
            m = LOG_NAME.fullmatch(p.name)
            if m:
                found[int(m.group(1))] = p
        return found

    def install(self, found: LogRecovery) -> None:
        """Makes the log recovery found the current generation."""
        self.generation = found.generation
        self.checkpoint = found.checkpoint
        self.index = found.index
        self.ledger_bytes = sum(n for _, n in found.index.values())
        self.preamble_bytes = found.preamble
        self.marker_bytes = found.marker_end - found.marker_offset
        self.size = found.size

    def sync(self, fd: int, *, data_only: bool = False) -> None:
        """Syncs ``fd`` (``fdatasync`` with ``data_only``) unless the store's options turn syncing off."""
        if self._sync_on:
            (datasync if data_only else os.fsync)(fd)

    def _writer(self) -> StoreFile:
        """The append handle of the current log, after cutting off any unused tail found at recovery."""
        if self._file is None:
            path = str(self.log_for(self.generation))
            try:
                f = self._opener(path, "ab")
                if self.truncate_to is not None:
                    f.truncate(self.truncate_to)
                    f.seek(self.truncate_to)
                    self.sync(f.fileno())
                    self.size = self.truncate_to
                    self.truncate_to = None
            except OSError:
                self.needs_roll = True
                raise
            self._file = f
        return self._file

    def append(self, records: list[tuple[int, bytes]], live: set[int], cp: Checkpoint, whole: bool) -> int:
        """Appends ledger records and a marker in one write and fsyncs; undone on failure."""
        f = self._writer()
        start = self.size
        index = {} if whole else {lid: ref for lid, ref in self.index.items() if lid in live}
        blob_out, marker = lay_out(records, cp, index, start)
        stage = "write"
        try:
            write_all(f, blob_out)
            stage = "sync"
            self.sync(f.fileno(), data_only=True)
        except OSError:
            self._undo_append(f, start, synced_failed=stage == "sync")
            raise
        self.size = start + len(blob_out)
        self.index = index
        self.ledger_bytes = sum(n for _, n in index.values())
        self.marker_bytes = len(marker)
        self.checkpoint = cp
        return len(blob_out)

    def _undo_append(self, f: StoreFile, start: int, *, synced_failed: bool) -> None:
        """Cuts a failed flush off the log; if that fails too (or fsync failed), rolls next time."""
        if synced_failed:
            self.needs_roll = True
        try:
            f.truncate(start)
            f.seek(start)
            self.sync(f.fileno())
        except OSError:
            self.needs_roll = True

    def roll(self, records: list[tuple[int, bytes]], cp: Checkpoint, name: str) -> int:
        """Writes a new generation (live records + marker), switches the metadata, drops the old log."""
        gen = self.next_generation
        self.next_generation += 1
        path = self.log_for(gen)
        head = pb.LogHeader(format_version=FORMAT_VERSION, generation=gen, cursor_name=name)
        header = encode_record(KIND_HEADER, head.SerializeToString())
        preamble = len(LOG_MAGIC) + len(header)
        index: dict[int, tuple[int, int]] = {}
        body, marker = lay_out(records, cp, index, preamble)
        data = LOG_MAGIC + header + body
        f: StoreFile | None = None
        try:
            f = self._opener(str(path), "xb")
            write_all(f, data)
            self.sync(f.fileno())
            self.sync(self.dir_fd)
            self._write_meta(gen, name)
        except OSError:
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            raise
        except Switched:
            # The metadata now names the new log, durable or not: it is the current one either way.
            self._switch_to(gen, f, data, index, preamble, len(marker), cp)
            self.needs_roll = True
            raise
        self._switch_to(gen, f, data, index, preamble, len(marker), cp)
        self.needs_roll = False
        for other, stale in self.found().items():
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
        self.close()
        self._file = f
        self.generation = gen
        self.index = index
        self.ledger_bytes = sum(n for _, n in index.values())
        self.preamble_bytes = preamble
        self.marker_bytes = marker_bytes
        self.size = len(data)
        self.checkpoint = cp
        self.truncate_to = None

    def _write_meta(self, gen: int, name: str) -> None:
        payload = pb.StoreMeta(format_version=FORMAT_VERSION, generation=gen, cursor_name=name)
        body = payload.SerializeToString()
        head = META_MAGIC + U32.pack(len(body)) + body
        tmp = self.path / META_TMP
        f = self._opener(str(tmp), "wb")
        try:
            write_all(f, head + U32.pack(zlib.crc32(head)))
            self.sync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                f.close()
            tmp.unlink(missing_ok=True)
            raise
        f.close()
        os.replace(tmp, self.path / META_FILE)
        try:
            self.sync(self.dir_fd)
        except OSError as e:
            raise Switched(e) from e

    def close(self) -> None:
        """Closes the append handle, if open."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
