"""Stage 2: a partition of the ack log folded into per-subscription acked bitmaps, batches and maxima."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit._core import RangeSet
from cursorkit.pipeline import schema
from cursorkit.pipeline.partitions.columns import Int64Array, int_column, null_mask
from cursorkit.pipeline.partitions.problems import Problems

__all__ = ["ACKS_SCHEMA", "WHOLE_ENTRY", "batch_bits", "fold_acks", "nack_rows"]

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
bitmap), ``nacks`` (sub; bitmap: little-endian int64 rows (ledger, entry, nack rows) of the
partition), ``stats`` (counts and samples)."""


@dataclass(slots=True)
class _SubFold:
    """One subscription's acks within a partition."""

    acked: RangeSet = field(default_factory=RangeSet)
    cumulative: tuple[int, int, int, int] | None = None
    """Highest cumulative ack (ledger, entry, batch index, batch size; a whole entry's index is 2**31)."""
    batch_keys: list[Int64Array] = field(default_factory=list)
    batch_sizes: list[Int64Array] = field(default_factory=list)
    batch_index: list[Int64Array] = field(default_factory=list)
    nacks: list[Int64Array] = field(default_factory=list)
    """(2, n) ledger / entry rows of ``nack`` rows: one redelivery each."""


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
            nulls = null_mask(batch, name)
            problems.note(f"null_{name}", nulls & ~bad, batch)
            bad |= nulls
        types = pc.utf8_lower(batch.column("ack_type"))  # Pulsar's "Individual" is "individual"
        is_cum = np.asarray(
            pc.equal(types, schema.ACK_CUMULATIVE).fill_null(False).to_numpy(zero_copy_only=False)
        )
        is_ind = np.asarray(
            pc.equal(types, schema.ACK_INDIVIDUAL).fill_null(False).to_numpy(zero_copy_only=False)
        )
        is_nack = np.asarray(pc.equal(types, schema.ACK_NACK).fill_null(False).to_numpy(zero_copy_only=False))
        unknown_type = ~(is_cum | is_ind | is_nack) & ~bad
        problems.note("bad_ack_type", unknown_type, batch)
        bad |= unknown_type
        ledgers = int_column(batch, "ledger_id")
        entries = int_column(batch, "entry_id")
        times = int_column(batch, "ack_time")
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
            unknown[ok] = (entries >= int_column(batch, "ledger_size", 0))[ok]
        problems.note("acks_unknown_position", unknown, batch)
        ok &= ~unknown
        has_index = (
            ~null_mask(batch, "batch_index") if "batch_index" in batch.schema.names else np.zeros(n, bool)
        )
        index = int_column(batch, "batch_index", -1) if "batch_index" in batch.schema.names else None
        sizes = int_column(batch, "batch_size", 1) if "batch_size" in batch.schema.names else None
        if index is not None:
            if sizes is None:
                sizes = np.zeros(n, dtype=np.int64)
            # (a nack's batch index is ignored: the entry is redelivered whole)
            out_of_range = ok & has_index & ~is_nack & ((index < 0) | (index >= np.maximum(sizes, 1)))
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
            nacked = mine & is_nack
            if nacked.any():
                fold.nacks.append(np.stack([ledgers[nacked], entries[nacked]]))
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
        if fold.nacks:
            emit("nacks", name, -1, -1, -1, 0, nack_rows(np.concatenate(fold.nacks, axis=1)), None)
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


def nack_rows(positions: Int64Array) -> bytes:
    """(2, n) nacked positions as little-endian int64 rows (ledger, entry, how many times), sorted."""
    keys, counts = np.unique(positions.T, axis=0, return_counts=True)
    rows = np.column_stack([keys, counts]).astype("<i8")
    return rows.tobytes()


def batch_bits(indexes: Int64Array) -> bytes:
    """Acked batch indexes as little-endian u64 words, bit ``i`` of word ``i // 64`` = index ``i``."""
    ix = np.asarray(indexes, dtype=np.int64)
    words = np.zeros(int(ix.max()) // 64 + 1 if len(ix) else 0, dtype=np.uint64)
    np.bitwise_or.at(words, ix // 64, np.left_shift(np.uint64(1), (ix % 64).astype(np.uint64)))
    return words.astype("<u8").tobytes()
