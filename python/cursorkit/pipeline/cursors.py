"""Cursors from folded acks: merged, assembled per subscription, written and measured.

The per-partition folds (``fold_acks``) are unions, so merging them in any order gives
the same cursor; each is written as a ``CursorStore`` and measured (holes, encodings, exposure to
redelivery under Pulsar's truncation and ours).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cursorkit._core import Position, RangeSet, RedeliveryCounts
from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store import CursorStore, StoreOptions
from cursorkit.errors import InvalidInput
from cursorkit.pipeline.partitions.acks import WHOLE_ENTRY, batch_bits
from cursorkit.pipeline.partitions.problems import Problems
from cursorkit.pipeline.results import CursorRow

__all__ = ["assemble_cursor", "cursor_dir_name", "holes_per_ledger", "merge_ack_folds", "write_cursors"]

Words = np.ndarray[Any, np.dtype[np.uint64]]


def merge_ack_folds(
    rows_in: Iterable[Mapping[str, Any]], sizes: Mapping[int, int]
) -> tuple[dict[str, Cursor], int, Problems, dict[str, RedeliveryCounts]]:
    """Merges ``fold_acks`` output rows (any partitioning, any order) into one cursor per subscription.

    Returns the cursors, the ack rows read, the problems counted (the caller raises on errors) and,
    for the subscriptions whose log has ``nack`` rows, the redelivery counts of what is still
    unacknowledged (beyond Pulsar).
    """
    problems = Problems()
    nacks: dict[str, list[np.ndarray[Any, np.dtype[np.int64]]]] = {}
    acked: dict[str, RangeSet] = {}
    cumulative: dict[str, tuple[int, int, int, int]] = {}
    batches: dict[str, dict[tuple[int, int], tuple[int, np.ndarray[Any, np.dtype[np.uint64]]]]] = {}
    rows = 0
    subs: set[str] = set()
    for r in rows_in:
        kind, sub = r["kind"], r["subscription"]
        if kind == "stats":
            st = json.loads(r["stats"])
            rows += st["rows"]
            problems.merge(st["problems"])
            continue
        subs.add(sub)
        if kind == "nacks":
            nacks.setdefault(sub, []).append(np.frombuffer(r["bitmap"], dtype="<i8").reshape(-1, 3))
        elif kind == "acked":
            acked.setdefault(sub, RangeSet()).union_ledger_bytes(r["ledger_id"], r["bitmap"])
        elif kind == "cumulative":
            idx = WHOLE_ENTRY if r["batch_index"] == -1 else r["batch_index"]
            cand = (r["ledger_id"], r["entry_id"], idx, r["batch_size"])
            if sub not in cumulative or cand[:3] > cumulative[sub][:3]:
                cumulative[sub] = cand
        else:
            words = np.frombuffer(r["bitmap"], dtype="<u8").astype(np.uint64)
            key = (r["ledger_id"], r["entry_id"])
            mine = batches.setdefault(sub, {})
            if key in mine:
                size, old = mine[key]
                mine[key] = (size, _or_words(old, words))
            else:
                mine[key] = (r["batch_size"], words)
    first = min(sizes) if sizes else 0
    cursors: dict[str, Cursor] = {}
    for sub in sorted(subs):
        cursors[sub] = assemble_cursor(
            sub, sizes, first, acked.get(sub, RangeSet()), cumulative.get(sub), batches.get(sub, {})
        )
    counts = {sub: redelivery_counts(parts, cursors[sub]) for sub, parts in sorted(nacks.items())}
    return cursors, rows, problems, counts


def redelivery_counts(parts: list[np.ndarray[Any, np.dtype[np.int64]]], cursor: Cursor) -> RedeliveryCounts:
    """The counts of ``nack_rows`` parts summed by position, less what ``cursor`` acknowledged."""
    rows = np.concatenate(parts)
    keys, where = np.unique(rows[:, :2], axis=0, return_inverse=True)
    sums = np.bincount(where.ravel(), weights=rows[:, 2], minlength=len(keys)).astype(np.int64)
    counts = RedeliveryCounts()
    counts.set_many(keys[:, 0].copy(), keys[:, 1].copy(), np.minimum(sums, 2**32 - 1))
    counts.prune(cursor)
    counts.take_delta()
    return counts


_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_DIR_NAME = 200
"""Longest directory name written (bytes); file systems allow 255."""


def cursor_dir_name(subscription: str) -> str:
    """A file-system-safe, collision-free directory name for a subscription.

    Lower-case ASCII letters, digits, ``-`` and ``_`` stay; every other UTF-8 byte becomes ``%XX``
    (upper case letters too, so names differing only in case stay apart on case-insensitive file
    systems). That is injective. A name whose form would pass ``MAX_DIR_NAME`` bytes is cut and
    given ``~`` and 32 hex digits of its SHA-256 (``~`` never appears otherwise).
    """
    if not subscription:
        raise InvalidInput(
            f"subscription name {subscription!r} must be a non-empty string", column="subscription"
        )
    try:
        raw = subscription.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput(
            f"subscription name {subscription!r} is not valid UTF-8", column="subscription"
        ) from e
    safe = "".join(chr(b) if chr(b) in _KEPT else f"%{b:02X}" for b in raw)
    if len(safe) <= MAX_DIR_NAME:
        return safe
    digest = hashlib.sha256(raw).hexdigest()[:32]
    return f"{safe[: MAX_DIR_NAME - 33]}~{digest}"


def assemble_cursor(
    name: str,
    sizes: Mapping[int, int],
    first_ledger: int,
    acked: RangeSet,
    cumulative: tuple[int, int, int, int] | None,
    batches: Mapping[tuple[int, int], tuple[int, np.ndarray[Any, np.dtype[np.uint64]]]],
) -> Cursor:
    """A subscription's cursor from its folded acks: the union of what every ack acknowledged.

    ``cumulative`` is the highest cumulative ack (ledger, entry, batch index, batch size; index
    ``WHOLE_ENTRY`` for a whole entry); ``batches`` maps a batch entry to (size, acked-index
    words). A batch whose every index is acked counts as an acked entry.
    """
    md = Position(first_ledger, -1)
    rows: list[tuple[int, int, int, bytes]] = []
    extra: dict[tuple[int, int], tuple[int, np.ndarray[Any, np.dtype[np.uint64]]]] = dict(batches)
    if cumulative is not None:
        ledger, entry, index, size = cumulative
        if index == WHOLE_ENTRY:
            md = max(md, Position(ledger, entry))
        elif Position(ledger, entry) > md:
            md = max(md, Position(ledger, entry - 1))
            words = _acked_words(range(index + 1))
            if (ledger, entry) in extra:
                words = _or_words(extra[(ledger, entry)][1], words)
            extra[(ledger, entry)] = (size, words)
    acked = acked.copy()
    for (ledger, entry), (size, words) in sorted(extra.items()):
        full = _full_words(size)
        acked_words = np.zeros(len(full), dtype=np.uint64)
        acked_words[: min(len(full), len(words))] = words[: len(full)]
        unacked = full & ~acked_words
        if not unacked.any():
            acked.add(ledger, entry)
            continue
        rows.append((ledger, entry, size, unacked.astype("<u8").tobytes()))
    cursor = Cursor(Position(first_ledger, -1), name=name, ledger_sizes=dict(sizes))
    cursor.restore(md, acked, rows)
    return cursor


def _or_words(a: Words, b: Words) -> Words:
    """Bitwise OR of two word arrays of possibly different lengths."""
    out = np.zeros(max(len(a), len(b)), dtype=np.uint64)
    out[: len(a)] |= a
    out[: len(b)] |= b
    return out


def _acked_words(indexes: range) -> np.ndarray[Any, np.dtype[np.uint64]]:
    ix = np.asarray(list(indexes), dtype=np.int64)
    return np.frombuffer(batch_bits(ix), dtype="<u8").astype(np.uint64)


def _full_words(size: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    words = np.full((size + 63) // 64, np.uint64(2**64 - 1), dtype=np.uint64)
    if size % 64:
        words[-1] = np.uint64((1 << (size % 64)) - 1)
    return words


def holes_per_ledger(cursor: Cursor, sizes: Mapping[int, int]) -> dict[int, int]:
    """Per ledger: unacked entries between mark-delete and the last individually acked entry."""
    acked = cursor.individually_deleted
    last = acked.last_range()
    if last is None:
        return {}
    md = cursor.mark_delete_position
    end = last[1]
    out: dict[int, int] = {}
    for ledger in sorted(sizes):
        if ledger < md.ledger_id or ledger > end.ledger_id:
            continue
        lo = md.entry_id if ledger == md.ledger_id else -1
        hi = end.entry_id if ledger == end.ledger_id else sizes[ledger] - 1
        if hi <= lo:
            continue
        holes = (hi - lo) - acked.cardinality(ledger, lo, ledger, hi)
        if holes:
            out[ledger] = holes
    return out


def write_cursors(
    root: Path,
    cursors: Mapping[str, Cursor],
    sizes: Mapping[int, int],
    *,
    sync: bool = True,
    redeliveries: Mapping[str, RedeliveryCounts] | None = None,
) -> list[CursorRow]:
    """Writes each cursor as a ``CursorStore`` under ``root`` and measures it (one ``CursorRow`` each).

    ``sync=False`` leaves the stores unsynced, for a caller that syncs the whole tree afterwards.
    A subscription in ``redeliveries`` gets those counts in its store (its redelivery journal).
    """
    root.mkdir()
    options = StoreOptions(sync=sync)
    rows: list[CursorRow] = []
    for name, cursor in cursors.items():
        path = root / cursor_dir_name(name)
        store = CursorStore.create(path, name=name, options=options)
        try:
            counts = (redeliveries or {}).get(name)
            if counts is not None and len(counts):
                store.redelivery_counts.apply(counts.encode())
            store.flush(cursor, full=True, force=True)
        finally:
            store.close()
        reopened = CursorStore.open(path, options=options)
        try:
            back = reopened.recover(ledger_sizes=dict(sizes))
        finally:
            reopened.close()
        backlog = cursor.backlog()
        pulsar = cursor.persist("message_range")
        as_pulsar = Cursor.decode(pulsar.data, "message_range", ledger_sizes=dict(sizes))
        st = cursor.stats()
        rows.append(
            CursorRow(
                subscription=name,
                mark_delete=str(cursor.mark_delete_position),
                ranges=st.non_contiguous_deleted_ranges,
                individually_acked=st.individually_acked_entries,
                partial_batches=st.partial_batches,
                backlog=backlog,
                compact_bytes=st.compact_bytes,
                message_range_bytes=cursor.individually_deleted.message_range_wire_size(),
                long_list_map_bytes=st.long_list_map_bytes,
                persistable_pulsar=not pulsar.truncated,
                redeliver_pulsar=as_pulsar.backlog() - backlog,
                redeliver_ours=back.backlog() - backlog,
                store_bytes=sum(p.stat().st_size for p in path.iterdir() if p.is_file()),
            )
        )
    return rows
