"""Inspecting a cursor store (opened as a copy when opening would delete files)."""

from __future__ import annotations

import fnmatch
import tempfile
from pathlib import Path

import numpy as np

from cursorkit import _core
from cursorkit.ackstate.store import FileCursorStore
from cursorkit.ackstate.store.file.log import META_FILE
from cursorkit.errors import (
    CorruptSnapshot,
)
from cursorkit.fsio import read_regular
from cursorkit.pipeline.inspector.summaries import (
    CURSOR_LOG,
    BatchSummary,
    CursorStoreSummary,
    RangeSummary,
    retarget,
)

# -- cursor stores -------------------------------------------------------------------------------------


def inspect_cursor_store(root: Path, *, sample: int) -> CursorStoreSummary:
    """Opens a cursor store (or a copy of it, when opening would delete files) and recovers its cursor."""
    names = [p.name for p in root.iterdir()]
    logs = fnmatch.filter(names, CURSOR_LOG)
    if set(names) <= {META_FILE, *logs} and len(logs) <= 1:
        # Open writes nothing here: it only deletes other generations and a metadata temp file.
        return _summarise_store(root, root, sample=sample, copy=False)
    with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
        copy = Path(tmp) / "store"
        copy.mkdir()
        try:
            for name in names:
                if name == META_FILE or name.startswith(META_FILE + ".") or name in logs:
                    (copy / name).write_bytes(read_regular(root / name))  # never through a link
        except OSError as e:
            return CursorStoreSummary(path=str(root), error=f"{name}: {e.strerror or e}", inspected_copy=True)
        summary = _summarise_store(copy, root, sample=sample, copy=True)
    return retarget(summary, str(copy), str(root))


def _summarise_store(where: Path, root: Path, *, sample: int, copy: bool) -> CursorStoreSummary:
    try:
        store = FileCursorStore.open(where)
    except (CorruptSnapshot, OSError) as e:
        return CursorStoreSummary(path=str(root), error=str(e), inspected_copy=copy)
    with store:
        try:
            cursor = store.recover()
        except CorruptSnapshot as e:
            return CursorStoreSummary(
                path=str(root), error=str(e), recovery=store.report, inspected_copy=copy
            )
        acked = cursor.individually_deleted
        ranges = tuple(
            RangeSummary(
                lower=_core.Position(int(r[0]), int(r[1])), upper=_core.Position(int(r[2]), int(r[3]))
            )
            for r in acked.ranges_array(sample)
        )
        batches = tuple(_batch_summary(row) for row in cursor.batches()[:sample])
        return CursorStoreSummary(
            path=str(root),
            name=store.name,
            generation=store.generation,
            sequence=store.sequence,
            log_bytes=store.log_bytes,
            live_bytes=store.live_bytes,
            dead_bytes=store.dead_bytes,
            recovery=store.report,
            stats=cursor.stats(),
            acked_ledgers=len(acked.ledgers()),
            ranges=ranges,
            batches=batches,
            properties=dict(cursor.properties),
            inspected_copy=copy,
        )


def _batch_summary(row: tuple[int, int, int, bytes]) -> BatchSummary:
    ledger, entry, size, words = row
    bits = np.unpackbits(np.frombuffer(words, dtype=np.uint8), bitorder="little")[:size]
    return BatchSummary(position=_core.Position(ledger, entry), batch_size=size, acked=size - int(bits.sum()))
