"""Stage 1: a partition of the message log folded into per-ledger entry bitmaps and counts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorkit import _core
from cursorkit._core import RangeSet
from cursorkit.pipeline import schema
from cursorkit.pipeline.keyload import SLOT_COUNT, slot_histograms
from cursorkit.pipeline.partitions.columns import Int64Array, int_column, null_mask
from cursorkit.pipeline.partitions.problems import Problems, sample_row

__all__ = ["HOUR_MS", "INDEX_SCHEMA", "SLOTS", "index_messages"]

HOUR_MS = 3_600_000
"""Width of one bin of the delayed-messages-over-time histogram."""
SLOTS = SLOT_COUNT
"""Key_Shared slots of the default hash range."""

INDEX_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("bitmap", pa.binary()),
        ("rows", pa.int64()),
        ("not_yet_due", pa.int64()),
        ("stats", pa.string()),
        ("range_slots", pa.binary()),
        ("consistent_slots", pa.binary()),
    ]
)
"""Per ledger of a partition: its entries (portable roaring bitmap), rows and not-yet-due delayed
messages; one extra row (ledger -1) carries the partition's stats JSON and slot histograms."""


def index_messages(
    batches: Iterable[pa.RecordBatch], *, now_ms: int, max_delay_ms: int
) -> Iterator[pa.RecordBatch]:
    """Folds a partition of the message log into per-ledger entry bitmaps and counts.

    Also counts what the driver checks (null or negative ids, implausible times, bad batch sizes,
    duplicates within the partition), classifies delayed messages (due at ``now_ms``, beyond
    ``max_delay_ms``, not yet due) with an hourly histogram of the not-yet-due, and builds the
    Key_Shared slot histograms of the key column.
    """
    positions = RangeSet()
    problems = Problems()
    rows = 0
    nyd_ledgers: list[Int64Array] = []
    hours: dict[int, int] = {}
    range_slots = np.zeros(SLOTS, dtype=np.int64)
    consistent_slots = np.zeros(SLOTS, dtype=np.int64)
    delayed = due = beyond = batch_entries = 0
    max_publish = -1
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        rows += n
        bad = np.zeros(n, dtype=np.bool_)
        for name in ("ledger_id", "entry_id", "publish_time"):
            nulls = null_mask(batch, name)
            problems.note(f"null_{name}", nulls, batch)
            bad |= nulls
        ledgers = int_column(batch, "ledger_id")
        entries = int_column(batch, "entry_id")
        publish = int_column(batch, "publish_time")
        for name, values in (("ledger_id", ledgers), ("entry_id", entries)):
            neg = (values < 0) & ~bad
            problems.note(f"negative_{name}", neg, batch)
            bad |= neg
        odd = ((publish < 0) | (publish > schema.MAX_PLAUSIBLE_MS)) & ~bad
        problems.note("implausible_publish_time", odd, batch)
        bad |= odd
        if "batch_size" in batch.schema.names:
            sizes = int_column(batch, "batch_size", 1)
            wrong = ((sizes < 1) | (sizes > 1 << 20)) & ~bad
            problems.note("bad_batch_size", wrong, batch)
            bad |= wrong
            batch_entries += int(np.count_nonzero((sizes > 1) & ~bad))
        ok = ~bad
        if not ok.all():
            ledgers, entries, publish = ledgers[ok], entries[ok], publish[ok]
        if len(publish):
            max_publish = max(max_publish, int(publish.max()))
        added = positions.add_many(ledgers, entries)
        if added != len(ledgers):
            _note_duplicates(problems, batch, ok, len(ledgers) - added)
        if "deliver_at" in batch.schema.names:
            at = int_column(batch, "deliver_at", -1)[ok]
            has = ~null_mask(batch, "deliver_at")[ok]
            odd_at = has & ((at < 0) | (at > schema.MAX_PLAUSIBLE_MS))
            if odd_at.any():
                problems.note("implausible_deliver_at", _expand(ok, odd_at), batch)
                has &= ~odd_at
            is_delayed = has & (at > publish)
            delayed += int(np.count_nonzero(is_delayed))
            is_due = is_delayed & (at <= now_ms)
            is_beyond = is_delayed & (at > now_ms + max_delay_ms)
            due += int(np.count_nonzero(is_due))
            beyond += int(np.count_nonzero(is_beyond))
            nyd = is_delayed & ~is_due & ~is_beyond
            if nyd.any():
                nyd_ledgers.append(ledgers[nyd])
                bins, per_bin = np.unique((at[nyd] - now_ms) // HOUR_MS, return_counts=True)
                for b, c in zip(bins.tolist(), per_bin.tolist(), strict=True):
                    hours[b] = hours.get(b, 0) + c
        keys = batch.column("key") if "key" in batch.schema.names else pa.nulls(n, pa.string())
        r, c = slot_histograms(keys if ok.all() else keys.filter(pa.array(ok)))
        range_slots += r
        consistent_slots += c
    nyd_all = np.concatenate(nyd_ledgers) if nyd_ledgers else np.empty(0, dtype=np.int64)
    nyd_ids, nyd_counts = np.unique(nyd_all, return_counts=True)
    nyd_of = dict(zip(nyd_ids.tolist(), nyd_counts.tolist(), strict=True))
    out_ledgers: list[int] = []
    bitmaps: list[bytes] = []
    counts: list[int] = []
    nyds: list[int] = []
    for ledger in positions.ledgers():
        bitmap = positions.ledger_to_bytes(ledger)
        assert bitmap is not None
        out_ledgers.append(ledger)
        bitmaps.append(bitmap)
        counts.append(_core.bitmap_cardinality(bitmap))
        nyds.append(nyd_of.get(ledger, 0))
    stats = {
        "rows": rows,
        "delayed": delayed,
        "delayed_due": due,
        "delayed_beyond_max_delay": beyond,
        "batch_entries": batch_entries,
        "max_publish_time": max_publish,
        "hours": {str(k): v for k, v in hours.items()},
        "problems": problems.to_json(),
    }
    out_ledgers.append(-1)
    bitmaps.append(b"")
    counts.append(rows)
    nyds.append(int(len(nyd_all)))
    n_out = len(out_ledgers)
    slot_col: list[bytes | None] = [None] * (n_out - 1)
    yield pa.RecordBatch.from_arrays(
        [
            pa.array(out_ledgers, pa.int64()),
            pa.array(bitmaps, pa.binary()),
            pa.array(counts, pa.int64()),
            pa.array(nyds, pa.int64()),
            pa.array([None] * (n_out - 1) + [json.dumps(stats)], pa.string()),
            pa.array([*slot_col, range_slots.tobytes()], pa.binary()),
            pa.array([*slot_col, consistent_slots.tobytes()], pa.binary()),
        ],
        schema=INDEX_SCHEMA,
    )


def _expand(ok: npt.NDArray[np.bool_], sub: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """A mask over the whole batch from a mask over its ``ok`` rows."""
    full = np.zeros(len(ok), dtype=np.bool_)
    full[np.flatnonzero(ok)[sub]] = True
    return full


def _note_duplicates(problems: Problems, batch: pa.RecordBatch, ok: npt.NDArray[np.bool_], n: int) -> None:
    """Finds a sample of a duplicate position in ``batch`` (or notes it was seen in an earlier batch)."""
    ledgers = int_column(batch, "ledger_id")
    entries = int_column(batch, "entry_id")
    idx = np.flatnonzero(ok)
    order = np.lexsort((entries[idx], ledgers[idx]))
    ls, es = ledgers[idx][order], entries[idx][order]
    same = (ls[1:] == ls[:-1]) & (es[1:] == es[:-1])
    mask = np.zeros(batch.num_rows, dtype=np.bool_)
    if same.any():
        mask[idx[order[1:][same][0]]] = True
    else:  # the first copy was in an earlier batch of this partition
        mask[idx[0]] = True
    problems.counts["duplicate_position"] = problems.counts.get("duplicate_position", 0) + n
    if "duplicate_position" not in problems.samples:
        problems.samples["duplicate_position"] = sample_row(batch, int(np.flatnonzero(mask)[0]))
