"""Per-partition functions of the rebuild job: what each Spark task runs on its Arrow batches.

Each function takes an iterator of ``pyarrow.RecordBatch`` and yields batches of a fixed schema
(``*_SCHEMA``), so Spark's ``mapInArrow`` can run it and tests can call it on plain batches. They fold
a whole partition before yielding: partial results (bitmaps, counts, maxima) whose merge on the driver
is a union, so the answer does not depend on how Spark split or ordered the rows. Problems are not
raised inside executors (a Py4J trace names no column); each partition reports counts and a first
sample row per problem in its ``stats`` row and the driver raises ``InvalidInput``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit import _core
from cursorkit._core import RangeSet
from cursorkit.delayed import snapshot
from cursorkit.pipeline import schema
from cursorkit.pipeline.keyload import SLOT_COUNT, slot_histograms

Int64Array = npt.NDArray[np.int64]

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

ACKS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("subscription", pa.string()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("batch_index", pa.int64()),
        ("batch_size", pa.int64()),
        ("bitmap", pa.binary()),
        ("stats", pa.string()),
    ]
)
"""Folded acks: ``acked`` (sub, ledger, bitmap of whole entries), ``cumulative`` (sub's highest
cumulative ack; batch_index -1 = the whole entry), ``batch`` (sub, position, size, acked-index
bitmap), ``stats`` (counts and samples)."""

BUCKET_ID_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("deliver_at", pa.int64()),
    ]
)
"""Not-yet-due delayed messages tagged with the planned bucket they belong to."""

BUCKETS_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("messages", pa.int64()),
        ("dropped_acked", pa.int64()),
        ("metadata", pa.binary()),
        ("segments", pa.list_(pa.binary())),
        ("first_deliver_at", pa.int64()),
        ("last_deliver_at", pa.int64()),
    ]
)
"""One built bucket: its ``SnapshotMetadata`` bytes and encoded segments."""


# --- problems: counted per partition, a first sample row kept --------------------------------------


@dataclass(slots=True)
class Problems:
    """Counts of each problem seen and the first row that showed it (JSON-ready)."""

    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note(self, name: str, mask: npt.NDArray[np.bool_], batch: pa.RecordBatch) -> None:
        """Counts the rows of ``batch`` where ``mask`` holds, keeping the first as the sample."""
        n = int(np.count_nonzero(mask))
        if not n:
            return
        self.counts[name] = self.counts.get(name, 0) + n
        if name not in self.samples:
            self.samples[name] = sample_row(batch, int(np.flatnonzero(mask)[0]))

    def merge(self, other: Mapping[str, Any]) -> None:
        """Adds another partition's problems (as :meth:`to_json` wrote them)."""
        for k, v in other.get("counts", {}).items():
            self.counts[k] = self.counts.get(k, 0) + int(v)
        for k, v in other.get("samples", {}).items():
            self.samples.setdefault(k, v)

    def to_json(self) -> dict[str, Any]:
        """The JSON form carried in a ``stats`` row."""
        return {"counts": self.counts, "samples": self.samples}


def sample_row(batch: pa.RecordBatch, i: int) -> dict[str, Any]:
    """Row ``i`` of ``batch`` as a dict of JSON-able values."""
    row = batch.slice(i, 1).to_pylist()[0]
    return {
        k: (v if isinstance(v, int | float | str | bool) or v is None else str(v)) for k, v in row.items()
    }


def _ints(batch: pa.RecordBatch, name: str, fill: int = 0) -> Int64Array:
    """An integer column as int64 numpy, nulls replaced by ``fill`` (masks are taken separately)."""
    col = batch.column(name)
    if col.null_count:
        col = pc.fill_null(col, fill)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def _nulls(batch: pa.RecordBatch, name: str) -> npt.NDArray[np.bool_]:
    col = batch.column(name)
    if not col.null_count:
        return np.zeros(batch.num_rows, dtype=np.bool_)
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)


# --- stage 1: the message index --------------------------------------------------------------------


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
            nulls = _nulls(batch, name)
            problems.note(f"null_{name}", nulls, batch)
            bad |= nulls
        ledgers = _ints(batch, "ledger_id")
        entries = _ints(batch, "entry_id")
        publish = _ints(batch, "publish_time")
        for name, values in (("ledger_id", ledgers), ("entry_id", entries)):
            neg = (values < 0) & ~bad
            problems.note(f"negative_{name}", neg, batch)
            bad |= neg
        odd = ((publish < 0) | (publish > schema.MAX_PLAUSIBLE_MS)) & ~bad
        problems.note("implausible_publish_time", odd, batch)
        bad |= odd
        if "batch_size" in batch.schema.names:
            sizes = _ints(batch, "batch_size", 1)
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
            at = _ints(batch, "deliver_at", -1)[ok]
            has = ~_nulls(batch, "deliver_at")[ok]
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
    ledgers = _ints(batch, "ledger_id")
    entries = _ints(batch, "entry_id")
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


# --- stage 2: the ack fold -------------------------------------------------------------------------


@dataclass(slots=True)
class _SubFold:
    """One subscription's acks within a partition."""

    acked: RangeSet = field(default_factory=RangeSet)
    cumulative: tuple[int, int, int, int] | None = None
    """Highest cumulative ack (ledger, entry, batch index, batch size; a whole entry's index is 2**31)."""
    batch_keys: list[Int64Array] = field(default_factory=list)
    batch_sizes: list[Int64Array] = field(default_factory=list)
    batch_index: list[Int64Array] = field(default_factory=list)


WHOLE_ENTRY = 2**31
"""Batch index that stands for a whole entry when comparing cumulative acks."""


def fold_acks(
    batches: Iterable[pa.RecordBatch], *, now_ms: int, positions: bytes | None
) -> Iterator[pa.RecordBatch]:
    """Folds a partition of the ack log into per-subscription acked bitmaps, batches and maxima.

    ``positions`` is the pickled-bytes form (``RangeSet.to_bytes``) of every position of the message
    log; None means the batches carry a ``ledger_size`` column instead (joined from the dense
    ledgers of the message log; null = a ledger the log does not have). Acks of positions absent
    from the log, and acks after ``now_ms``, are counted and skipped (the documented rules
    ``acks_unknown_position`` and ``acks_after_now``). Batch-index acks need the column
    ``batch_size`` (joined from the message log by the driver; null = unknown position).
    """
    known = RangeSet.from_bytes(positions) if positions is not None else None
    problems = Problems()
    subs: dict[str, _SubFold] = {}
    rows = 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        rows += n
        bad = np.zeros(n, dtype=np.bool_)
        for name in ("subscription", "ledger_id", "entry_id", "ack_type", "ack_time"):
            nulls = _nulls(batch, name)
            problems.note(f"null_{name}", nulls & ~bad, batch)
            bad |= nulls
        types = pc.utf8_lower(batch.column("ack_type"))  # Pulsar's "Individual" is "individual"
        is_cum = np.asarray(
            pc.equal(types, schema.ACK_CUMULATIVE).fill_null(False).to_numpy(zero_copy_only=False)
        )
        is_ind = np.asarray(
            pc.equal(types, schema.ACK_INDIVIDUAL).fill_null(False).to_numpy(zero_copy_only=False)
        )
        unknown_type = ~(is_cum | is_ind) & ~bad
        problems.note("bad_ack_type", unknown_type, batch)
        bad |= unknown_type
        ledgers = _ints(batch, "ledger_id")
        entries = _ints(batch, "entry_id")
        times = _ints(batch, "ack_time")
        neg = ((ledgers < 0) | (entries < 0)) & ~bad
        problems.note("negative_position", neg, batch)
        bad |= neg
        odd = ((times < 0) | (times > schema.MAX_PLAUSIBLE_MS)) & ~bad
        problems.note("implausible_ack_time", odd, batch)
        bad |= odd
        late = (times > now_ms) & ~bad
        problems.note("acks_after_now", late, batch)
        bad |= late
        ok = ~bad
        unknown = np.zeros(n, dtype=np.bool_)
        if known is not None:
            unknown[ok] = ~known.contains_many(ledgers[ok], entries[ok])
        else:  # the log's ledgers are dense: a position is known when its entry is below the size
            unknown[ok] = (entries >= _ints(batch, "ledger_size", 0))[ok]
        problems.note("acks_unknown_position", unknown, batch)
        ok &= ~unknown
        has_index = (
            ~_nulls(batch, "batch_index") if "batch_index" in batch.schema.names else np.zeros(n, bool)
        )
        index = _ints(batch, "batch_index", -1) if "batch_index" in batch.schema.names else None
        sizes = _ints(batch, "batch_size", 1) if "batch_size" in batch.schema.names else None
        if index is not None:
            if sizes is None:
                sizes = np.zeros(n, dtype=np.int64)
            out_of_range = ok & has_index & ((index < 0) | (index >= np.maximum(sizes, 1)))
            problems.note("acks_batch_index_out_of_range", out_of_range, batch)
            ok &= ~out_of_range
        names = batch.column("subscription")
        encoded = (
            pc.dictionary_encode(names).combine_chunks()
            if isinstance(names, pa.ChunkedArray)
            else pc.dictionary_encode(names)
        )
        codes = np.asarray(encoded.indices.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        for code, name in enumerate(encoded.dictionary.to_pylist()):
            mine = ok & (codes == code)
            if not mine.any():
                continue
            fold = subs.setdefault(name, _SubFold())
            whole_ind = mine & is_ind & ~has_index
            if whole_ind.any():
                fold.acked.add_many(ledgers[whole_ind], entries[whole_ind])
            whole_cum = mine & is_cum & ~has_index
            if whole_cum.any():
                _raise_cumulative(fold, ledgers[whole_cum], entries[whole_cum], None, None)
            if index is not None and sizes is not None:
                part_cum = mine & is_cum & has_index
                if part_cum.any():
                    full = index[part_cum] + 1 >= sizes[part_cum]
                    _raise_cumulative(
                        fold,
                        ledgers[part_cum],
                        entries[part_cum],
                        np.where(full, WHOLE_ENTRY, index[part_cum]),
                        sizes[part_cum],
                    )
                part_ind = mine & is_ind & has_index
                if part_ind.any():
                    fold.batch_keys.append(np.stack([ledgers[part_ind], entries[part_ind]]))
                    fold.batch_sizes.append(sizes[part_ind])
                    fold.batch_index.append(index[part_ind])
    out: dict[str, list[Any]] = {f.name: [] for f in ACKS_SCHEMA}

    def emit(
        kind: str, sub: str | None, lg: int, e: int, i: int, s: int, bm: bytes | None, st: str | None
    ) -> None:
        for k, v in zip(out, (kind, sub, lg, e, i, s, bm, st), strict=True):
            out[k].append(v)

    for name, fold in subs.items():
        for ledger in fold.acked.ledgers():
            emit("acked", name, ledger, -1, -1, 0, fold.acked.ledger_to_bytes(ledger), None)
        if fold.cumulative is not None:
            lg, e, i, s = fold.cumulative
            emit("cumulative", name, lg, e, -1 if i == WHOLE_ENTRY else i, s, None, None)
        if fold.batch_keys:
            for lg, e, s, bm in _fold_batches(fold):
                emit("batch", name, lg, e, -1, s, bm, None)
    emit("stats", None, -1, -1, -1, 0, None, json.dumps({"rows": rows, "problems": problems.to_json()}))
    yield pa.RecordBatch.from_pydict(out, schema=ACKS_SCHEMA)


def _raise_cumulative(
    fold: _SubFold,
    ledgers: Int64Array,
    entries: Int64Array,
    index: Int64Array | None,
    sizes: Int64Array | None,
) -> None:
    """Keeps the highest (ledger, entry, index) cumulative ack of a subscription, with its batch size."""
    idx = np.full(len(ledgers), WHOLE_ENTRY, dtype=np.int64) if index is None else index
    top = np.lexsort((idx, entries, ledgers))[-1]
    size = 0 if sizes is None else int(sizes[top])
    cand = (int(ledgers[top]), int(entries[top]), int(idx[top]), size)
    if fold.cumulative is None or cand[:3] > fold.cumulative[:3]:
        fold.cumulative = cand


def _fold_batches(fold: _SubFold) -> Iterator[tuple[int, int, int, bytes]]:
    """(ledger, entry, batch size, acked-index words) per batch entry with index acks."""
    keys = np.concatenate(fold.batch_keys, axis=1)
    sizes = np.concatenate(fold.batch_sizes)
    index = np.concatenate(fold.batch_index)
    order = np.lexsort((index, keys[1], keys[0]))
    ls, es, ss, ix = keys[0][order], keys[1][order], sizes[order], index[order]
    starts = np.flatnonzero(np.r_[True, (ls[1:] != ls[:-1]) | (es[1:] != es[:-1])])
    ends = np.r_[starts[1:], len(ls)]
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(ls[a]), int(es[a]), int(ss[a]), batch_bits(ix[a:b])


def batch_bits(indexes: Int64Array) -> bytes:
    """Acked batch indexes as little-endian u64 words, bit ``i`` of word ``i // 64`` = index ``i``."""
    ix = np.asarray(indexes, dtype=np.int64)
    words = np.zeros(int(ix.max()) // 64 + 1 if len(ix) else 0, dtype=np.uint64)
    np.bitwise_or.at(words, ix // 64, np.left_shift(np.uint64(1), (ix % 64).astype(np.uint64)))
    return words.astype("<u8").tobytes()


# --- stage 3: the delayed index --------------------------------------------------------------------


def tag_buckets(batches: Iterable[pa.RecordBatch], *, starts: list[int]) -> Iterator[pa.RecordBatch]:
    """Tags each (ledger, entry, deliver_at) row with its planned bucket (``starts``: first ledgers)."""
    first = np.asarray(starts, dtype=np.int64)
    for batch in batches:
        if not batch.num_rows:
            continue
        ledgers = _ints(batch, "ledger_id")
        bucket = np.searchsorted(first, ledgers, side="right") - 1
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(bucket.astype(np.int32)),
                batch.column("ledger_id"),
                batch.column("entry_id"),
                batch.column("deliver_at"),
            ],
            schema=BUCKET_ID_SCHEMA,
        )


def build_buckets(
    batches: Iterable[pa.RecordBatch],
    *,
    max_time_step_ms: int,
    max_indexes_per_segment: int,
    cursors: Mapping[str, bytes],
) -> Iterator[pa.RecordBatch]:
    """Builds every bucket of a partition: sort, drop acked, cut into segments, encode (all Rust).

    ``cursors`` are the subscriptions' pickled cursors; a message acked by every one of them is
    dropped (rule ``delayed_acked``). With no subscription nothing is dropped.
    """
    import pickle

    loaded = [pickle.loads(c) for c in cursors.values()]
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return
    table = pa.Table.from_batches(parts, schema=BUCKET_ID_SCHEMA)
    bucket = np.asarray(table.column("bucket").to_numpy(), dtype=np.int64)
    ledgers = np.asarray(table.column("ledger_id").to_numpy(), dtype=np.int64)
    entries = np.asarray(table.column("entry_id").to_numpy(), dtype=np.int64)
    at = np.asarray(table.column("deliver_at").to_numpy(), dtype=np.int64)
    order = np.argsort(bucket, kind="stable")
    bucket, ledgers, entries, at = bucket[order], ledgers[order], entries[order], at[order]
    cuts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[cuts[1:], len(bucket)]
    out: dict[str, list[Any]] = {f.name: [] for f in BUCKETS_SCHEMA}
    for a, b in zip(cuts.tolist(), ends.tolist(), strict=True):
        ts, ls, es = _core.sort_indexes(at[a:b], ledgers[a:b], entries[a:b])
        dropped = 0
        if loaded:
            acked = np.ones(len(ls), dtype=np.bool_)
            for cursor in loaded:
                acked &= cursor.is_acked_many(ls, es)
            dropped = int(np.count_nonzero(acked))
            if dropped:
                keep = ~acked
                ts, ls, es = ts[keep], ls[keep], es[keep]
        meta, blobs = (
            (None, [])
            if not len(ts)
            else snapshot.encode(
                snapshot.cut(
                    ts,
                    ls,
                    es,
                    max_time_step_ms=max_time_step_ms,
                    max_indexes_per_segment=max_indexes_per_segment,
                )
            )
        )
        out["bucket"].append(int(bucket[a]))
        out["messages"].append(int(len(ts)))
        out["dropped_acked"].append(dropped)
        out["metadata"].append(meta.SerializeToString(deterministic=True) if meta is not None else b"")
        out["segments"].append(blobs)
        out["first_deliver_at"].append(int(ts[0]) if len(ts) else -1)
        out["last_deliver_at"].append(int(ts[-1]) if len(ts) else -1)
    yield pa.RecordBatch.from_pydict(out, schema=BUCKETS_SCHEMA)
