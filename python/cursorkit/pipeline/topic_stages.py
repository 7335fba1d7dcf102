"""The executor side of a many-topic rebuild: each stage's function, run per partition or per topic.

Every function here runs inside a Spark task (``mapInArrow`` on partitions, ``applyInArrow`` on a
topic's group) and reuses the single-topic job's folds, so a topic's result is the one the
single-topic rebuild gives on its logs alone. Partitions hold rows of many topics: they are split
by the ``topic`` column and folded per topic; the folds are unions, merged per topic on executors.
Nothing here raises on bad input: problems travel as counts and samples in ``stats`` JSON, and
the driver raises ``InvalidInput`` naming the topic.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit.ackstate import Cursor
from cursorkit.delayed.properties import FileCursorProperties
from cursorkit.pipeline import partitions
from cursorkit.pipeline.cursors import holes_per_ledger, merge_ack_folds, write_cursors
from cursorkit.pipeline.keyload import key_load
from cursorkit.pipeline.plan import PlannedBucket, plan_buckets
from cursorkit.pipeline.results import KeyLoad, RebuildSummary

Int64Array = npt.NDArray[np.int64]

TOPIC_INDEX_SCHEMA = pa.schema([pa.field("topic", pa.string()), *partitions.INDEX_SCHEMA])
"""``index_messages`` rows of one topic of a partition; slot histograms are sparse
(``sparse_slots``) so a small topic's row stays small."""

TOPIC_STATE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("now_ms", pa.int64()),
        ("ledgers", pa.list_(pa.int64())),
        ("sizes", pa.list_(pa.int64())),
        ("not_yet_due", pa.list_(pa.int64())),
        ("bucket_of_ledger", pa.list_(pa.int32())),
        ("plan", pa.list_(pa.int64())),
        ("stats", pa.string()),
    ]
)
"""One topic's merged index: its dense ledgers and sizes, not-yet-due counts, the bucket plan
(start, end, messages per bucket, flattened) and each ledger's bucket (-1: none), and a JSON
``stats`` of counts, problems, the hours histogram, key load and a structural error if any."""

TOPIC_ACKS_SCHEMA = pa.schema([pa.field("topic", pa.string()), *partitions.ACKS_SCHEMA])
"""``fold_acks`` rows of one topic of a partition."""

TOPIC_CURSORS_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("names", pa.list_(pa.string())),
        ("cursors", pa.list_(pa.binary())),
        ("stats", pa.string()),
    ]
)
"""One topic's cursors (pickled, by subscription) and its ack stats (rows, problems)."""

TOPIC_BUCKETS_SCHEMA = pa.schema([pa.field("topic", pa.string()), *partitions.BUCKETS_SCHEMA])
"""``build_buckets`` rows of one topic."""

TOPIC_WRITTEN_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("dir", pa.string()),
        ("files", pa.string()),
        ("figures", pa.string()),
    ]
)
"""What one task wrote for a topic: its directory (relative to the output), the files with sizes
and SHA-256 (JSON), and the topic's figures for the cluster report (JSON)."""


# --- splitting a partition by topic ----------------------------------------------------------------


def split_by_topic(batch: pa.RecordBatch) -> Iterator[tuple[str | None, pa.RecordBatch]]:
    """The batch's rows grouped by ``topic`` (None for rows whose topic is null), row order kept.

    Logs are usually written topic after topic, so a batch is a few runs of one topic each: those
    are found in one pass (run-end encoding) and sliced without copying. A batch of many short runs
    (interleaved topics) is grouped through a dictionary encoding and filtered instead.
    """
    col = batch.column("topic")
    if not col.null_count:
        runs = pc.run_end_encode(col)
        ends = runs.run_ends.to_numpy()
        if len(ends) <= RUNS_TO_SLICE:
            values = runs.values.to_pylist()
            if len(set(values)) == len(values):  # each topic one run: slices in batch order
                start = 0
                for name, end in zip(values, ends.tolist(), strict=True):
                    yield name, batch.slice(start, end - start)
                    start = end
                return
    encoded = pc.dictionary_encode(col)
    codes = encoded.indices
    names = encoded.dictionary.to_pylist()
    if len(names) == 1 and not codes.null_count:
        yield names[0], batch
        return
    for code, name in enumerate(names):
        yield name, batch.filter(pc.equal(codes, code))
    if codes.null_count:
        yield None, batch.filter(pc.is_null(codes))


RUNS_TO_SLICE = 64
"""Most runs of topics in a batch that ``split_by_topic`` slices rather than filters."""


def _grouped(batches: Iterable[pa.RecordBatch]) -> dict[str | None, list[pa.RecordBatch]]:
    groups: dict[str | None, list[pa.RecordBatch]] = {}
    for batch in batches:
        if batch.num_rows:
            for topic, part in split_by_topic(batch):
                groups.setdefault(topic, []).append(part)
    return groups


def _null_topic_stats(parts: list[pa.RecordBatch]) -> dict[str, Any]:
    problems = partitions.Problems()
    for part in parts:
        problems.note("null_topic", np.ones(part.num_rows, dtype=np.bool_), part)
    return {"rows": sum(p.num_rows for p in parts), "problems": problems.to_json()}


def topic_column(topic: str | None, rows: int) -> pa.Array:
    """A string column of ``rows`` times ``topic``, built by Arrow (no Python list per row)."""
    return pa.repeat(pa.scalar(topic, pa.string()), rows)


def _with_topic(topic: str | None, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([topic_column(topic, batch.num_rows), *batch.columns], schema=schema)


# --- columns a pass hands to Spark ----------------------------------------------------------------

LATEST_SCHEMA = pa.schema([("topic", pa.string()), ("latest", pa.int64())])
"""Per topic of a partition: its latest ``publish_time`` (the topic's ``now`` unless given)."""

BATCH_ENTRY_SCHEMA = pa.schema(
    [("topic", pa.string()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()), ("batch_size", pa.int64())]
)
"""The batch entries of the message log (``batch_size`` > 1), for the batch-index acks."""

NOT_YET_DUE_SCHEMA = pa.schema(
    [("topic", pa.string()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()), ("deliver_at", pa.int64())]
)
"""The delayed messages not yet due at their topic's ``now`` and within ``max_delay_ms``."""


def latest_publish(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each topic's latest ``publish_time`` in a partition (rows with a null topic are skipped)."""
    latest: dict[str, int] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch.select(["topic", "publish_time"])])
        agg = table.group_by("topic").aggregate([("publish_time", "max")])
        for t, v in zip(
            agg.column("topic").to_pylist(), agg.column("publish_time_max").to_pylist(), strict=True
        ):
            if t is not None and v is not None:
                latest[t] = max(latest.get(t, v), v)
    yield pa.RecordBatch.from_pydict(
        {"topic": list(latest), "latest": list(latest.values())}, schema=LATEST_SCHEMA
    )


def batch_entries(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The rows of batch entries (``batch_size`` > 1) with their size."""
    for batch in batches:
        keep = pc.fill_null(pc.greater(batch.column("batch_size"), 1), False)
        part = batch.filter(keep)
        if part.num_rows:
            yield pa.RecordBatch.from_arrays(
                [
                    part.column("topic"),
                    part.column("ledger_id"),
                    part.column("entry_id"),
                    pc.cast(part.column("batch_size"), pa.int64()),
                ],
                schema=BATCH_ENTRY_SCHEMA,
            )


def not_yet_due(
    batches: Iterable[pa.RecordBatch], *, now_ms: Mapping[str, int], max_delay_ms: int
) -> Iterator[pa.RecordBatch]:
    """The delayed messages each topic's delayed index holds (the single-topic job's filter)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        for topic, part in split_by_topic(batch):
            if topic is None or topic not in now_ms:
                continue
            now = now_ms[topic]
            at = part.column("deliver_at")
            keep = pc.and_(
                pc.and_(pc.greater(at, part.column("publish_time")), pc.greater(at, now)),
                pc.less_equal(at, now + max_delay_ms),
            )
            rows = part.filter(pc.fill_null(keep, False))
            if rows.num_rows:
                yield pa.RecordBatch.from_arrays(
                    [
                        topic_column(topic, rows.num_rows),
                        rows.column("ledger_id"),
                        rows.column("entry_id"),
                        rows.column("deliver_at"),
                    ],
                    schema=NOT_YET_DUE_SCHEMA,
                )


def acks_by_batch_index(batches: Iterable[pa.RecordBatch], *, indexed: bool) -> Iterator[pa.RecordBatch]:
    """The ack rows with (``indexed``) or without a ``batch_index``: only the former need batch sizes."""
    for batch in batches:
        nulls = batch.column("batch_index").is_null()
        part = batch.filter(pc.invert(nulls) if indexed else nulls)
        if part.num_rows:
            yield part


LedgerSizes = Mapping[str, tuple[Int64Array, Int64Array]]
"""Topic -> its ledgers (sorted) and their entry counts."""


def with_ledger_sizes(batch: pa.RecordBatch, topic: str, ledgers: LedgerSizes) -> pa.RecordBatch:
    """``batch`` with a ``ledger_size`` column: the entry count of each row's ledger (null: unknown)."""
    ids, sizes = ledgers.get(topic, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    col = batch.column("ledger_id")
    lg = np.asarray(pc.fill_null(col, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    at = np.searchsorted(ids, lg)
    found = at < len(ids)
    found[found] = ids[at[found]] == lg[found]
    values = np.where(found, sizes[np.minimum(at, max(len(ids) - 1, 0))] if len(ids) else 0, 0)
    return batch.append_column("ledger_size", pa.array(values, pa.int64(), mask=~found))


# --- stage 1: per-partition message index, per topic ------------------------------------------------


def sparse_slots(dense: bytes) -> bytes:
    """A 65,536-slot int64 histogram as (slot, count) int64 pairs of its non-zero slots."""
    h = np.frombuffer(dense, dtype=np.int64)
    nz = np.flatnonzero(h)
    return np.stack([nz.astype(np.int64), h[nz]]).T.astype("<i8").tobytes()


def dense_slots(pairs: Iterable[bytes]) -> Int64Array:
    """The sum of sparse histograms (``sparse_slots``) as a dense 65,536-slot histogram."""
    out = np.zeros(partitions.SLOTS, dtype=np.int64)
    for raw in pairs:
        p = np.frombuffer(raw, dtype="<i8").reshape(-1, 2)
        np.add.at(out, p[:, 0], p[:, 1])
    return out


def index_topics(
    batches: Iterable[pa.RecordBatch], *, now_ms: Mapping[str, int], max_delay_ms: int
) -> Iterator[pa.RecordBatch]:
    """``index_messages`` per topic of a partition (each topic at its own ``now_ms``)."""
    for topic, parts in _grouped(batches).items():
        if topic is None:
            stats = _null_topic_stats(parts)
            yield _index_stats_only(None, stats)
            continue
        for out in partitions.index_messages(parts, now_ms=now_ms[topic], max_delay_ms=max_delay_ms):
            for name in ("range_slots", "consistent_slots"):  # only the last (stats) row holds one
                i = out.schema.get_field_index(name)
                slots = out.column(i).to_pylist()
                slots[-1] = sparse_slots(slots[-1])
                out = out.set_column(i, name, pa.array(slots, pa.binary()))
            yield _with_topic(topic, out, TOPIC_INDEX_SCHEMA)


def _index_stats_only(topic: str | None, problems_stats: Mapping[str, Any]) -> pa.RecordBatch:
    stats = {
        "rows": problems_stats["rows"],
        "delayed": 0,
        "delayed_due": 0,
        "delayed_beyond_max_delay": 0,
        "batch_entries": 0,
        "max_publish_time": -1,
        "hours": {},
        "problems": problems_stats["problems"],
    }
    return pa.RecordBatch.from_pydict(
        {
            "topic": [topic],
            "ledger_id": [-1],
            "bitmap": [b""],
            "rows": [problems_stats["rows"]],
            "not_yet_due": [0],
            "stats": [json.dumps(stats)],
            "range_slots": [b""],
            "consistent_slots": [b""],
        },
        schema=TOPIC_INDEX_SCHEMA,
    )


# --- stage 2: one topic's index, merged --------------------------------------------------------------


def merge_topic_index(
    table: pa.Table, *, now_ms: Mapping[str, int], min_index_count_per_bucket: int, consumers: int
) -> pa.Table:
    """Merges one topic's partial index rows: dense ledger sizes, the bucket plan and the figures."""
    from cursorkit.pipeline.message_index import dense_sizes, merge_index_rows

    rows = table.to_pylist()
    topic = rows[0]["topic"]
    range_raw = [r["range_slots"] for r in rows if r["ledger_id"] == -1]
    consistent_raw = [r["consistent_slots"] for r in rows if r["ledger_id"] == -1]
    for r in rows:
        r["range_slots"] = r["consistent_slots"] = None
    index, problems = merge_index_rows(rows)
    valid = index.positions.total_cardinality()
    counted = index.rows - sum(problems.counts.values())
    sizes, gap = dense_sizes(index.positions)
    plan = plan_buckets(index.not_yet_due, min_index_count_per_bucket) if gap is None else []
    ledgers = sorted(sizes)
    starts = np.asarray([b.start_ledger_id for b in plan], dtype=np.int64)
    bucket = (np.searchsorted(starts, np.asarray(ledgers, dtype=np.int64), side="right") - 1).astype(np.int32)
    loads = key_load(dense_slots(range_raw), dense_slots(consistent_raw), consumers) if topic else []
    stats = {
        "rows": index.rows,
        "delayed": index.delayed,
        "delayed_due": index.due,
        "delayed_beyond_max_delay": index.beyond,
        "batch_entries": index.batch_entries,
        "hours": {str(k): v for k, v in index.hours.items()},
        "problems": problems.to_json(),
        "duplicates_across_partitions": counted - valid if not problems.counts else 0,
        "gap": list(gap) if gap is not None else None,
        "key_load": [asdict(k) for k in loads],
    }
    return pa.Table.from_pydict(
        {
            "topic": [topic],
            "now_ms": [now_ms.get(topic, 0) if topic is not None else 0],
            "ledgers": [ledgers],
            "sizes": [[sizes[lg] for lg in ledgers]],
            "not_yet_due": [[index.not_yet_due.get(lg, 0) for lg in ledgers]],
            "bucket_of_ledger": [bucket.tolist()],
            "plan": [[v for b in plan for v in (b.start_ledger_id, b.end_ledger_id, b.messages)]],
            "stats": [json.dumps(stats)],
        },
        schema=TOPIC_STATE_SCHEMA,
    )


def plan_of(flat: list[int]) -> list[PlannedBucket]:
    """The bucket plan from ``TOPIC_STATE_SCHEMA.plan``."""
    return [PlannedBucket(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]


# --- stage 3: acks, per partition and per topic ------------------------------------------------------


def fold_topic_acks(
    batches: Iterable[pa.RecordBatch], *, now_ms: Mapping[str, int], ledgers: LedgerSizes | None = None
) -> Iterator[pa.RecordBatch]:
    """``fold_acks`` per topic of a partition; positions are checked against the topic's ledger sizes.

    With ``ledgers`` the sizes come from there, else from a joined ``ledger_size`` column. Rows
    without a ``batch_size`` column get a null one (acks without a batch index need none). Acks of a
    topic the message log does not have fold at ``now_ms`` = the latest of all topics, and every one
    of them is an unknown position.
    """
    latest = max(now_ms.values(), default=0)
    for topic, parts in _grouped(batches).items():
        if topic is None:
            stats = _null_topic_stats(parts)
            yield pa.RecordBatch.from_pydict(
                {
                    "topic": [None],
                    "kind": ["stats"],
                    "subscription": [None],
                    "ledger_id": [-1],
                    "entry_id": [-1],
                    "batch_index": [-1],
                    "batch_size": [0],
                    "bitmap": [None],
                    "stats": [json.dumps(stats)],
                },
                schema=TOPIC_ACKS_SCHEMA,
            )
            continue
        if ledgers is not None:
            parts = [with_ledger_sizes(p, topic, ledgers) for p in parts]
        parts = [
            p
            if "batch_size" in p.schema.names
            else p.append_column("batch_size", pa.nulls(p.num_rows, pa.int64()))
            for p in parts
        ]
        for out in partitions.fold_acks(parts, now_ms=now_ms.get(topic, latest), positions=None):
            yield _with_topic(topic, out, TOPIC_ACKS_SCHEMA)


def assemble_topic_cursors(acks: pa.Table, state: pa.Table) -> pa.Table:
    """One topic's cursors from its folded acks (and its ledger sizes), pickled by subscription."""
    topic = (state if state.num_rows else acks).column("topic")[0].as_py()
    sizes = _sizes(state)
    cursors, rows, problems = merge_ack_folds(acks.to_pylist(), sizes) if acks.num_rows else ({}, 0, None)
    stats = {"rows": rows, "problems": problems.to_json() if problems is not None else {}}
    return pa.Table.from_pydict(
        {
            "topic": [topic],
            "names": [list(cursors)],
            "cursors": [[pickle.dumps(c) for c in cursors.values()]],
            "stats": [json.dumps(stats)],
        },
        schema=TOPIC_CURSORS_SCHEMA,
    )


def _sizes(state: pa.Table) -> dict[int, int]:
    if not state.num_rows:
        return {}
    ledgers = state.column("ledgers")[0].as_py()
    sizes = state.column("sizes")[0].as_py()
    return dict(zip(ledgers, sizes, strict=True))


# --- stage 4: buckets, per (topic, bucket) -----------------------------------------------------------


def build_topic_buckets(
    tagged: pa.Table, cursors: pa.Table, *, max_time_step_ms: int, max_indexes_per_segment: int
) -> pa.Table:
    """Builds one planned bucket of one topic (``build_buckets`` on its rows, its topic's cursors)."""
    if not tagged.num_rows:
        return TOPIC_BUCKETS_SCHEMA.empty_table()
    topic = tagged.column("topic")[0].as_py()
    pickled: dict[str, bytes] = {}
    if cursors.num_rows:
        names = cursors.column("names")[0].as_py()
        blobs = cursors.column("cursors")[0].as_py()
        pickled = dict(zip(names, blobs, strict=True))
    rows = tagged.select([f.name for f in partitions.BUCKET_ID_SCHEMA]).cast(partitions.BUCKET_ID_SCHEMA)
    built = list(
        partitions.build_buckets(
            rows.to_batches(),
            max_time_step_ms=max_time_step_ms,
            max_indexes_per_segment=max_indexes_per_segment,
            cursors=pickled,
        )
    )
    return pa.Table.from_batches(
        [_with_topic(topic, b, TOPIC_BUCKETS_SCHEMA) for b in built], TOPIC_BUCKETS_SCHEMA
    )


# --- stage 5: one topic's stores, written by the task ----------------------------------------------


def write_topic(
    built: pa.Table,
    state: pa.Table,
    *,
    config: Mapping[str, Any],
    destination: Callable[[str], tuple[Path, str, Callable[[], list[dict[str, Any]]]]],
) -> pa.Table:
    """Writes one topic's output directory (the single-topic layout) and returns what it wrote.

    ``state`` is the topic's ``TOPIC_STATE_SCHEMA`` row joined with its ``TOPIC_CURSORS_SCHEMA``
    columns. ``destination(topic)`` gives the local directory to write, its path relative to the
    output, and a function that finishes it (makes it durable or uploads it) and lists the files.
    """
    from cursorkit.pipeline.delayed_buckets import write_buckets
    from cursorkit.pipeline.rebuild import RebuildConfig
    from cursorkit.pipeline.rebuild_output import topic_manifest, write_summary

    row = state.to_pylist()[0]
    topic = row["topic"]
    now = row["now_ms"]
    cfg = RebuildConfig(**{**config, "topic": topic, "now_ms": now, "report": False})
    sizes = dict(zip(row["ledgers"], row["sizes"], strict=True))
    names = row["names"] or []
    cursors: dict[str, Cursor] = {
        n: pickle.loads(c) for n, c in zip(names, row["cursors"] or [], strict=True)
    }
    stats = json.loads(row["stats"])
    ack_stats: dict[str, Any] = (
        json.loads(row["ack_stats"]) if row["ack_stats"] else {"rows": 0, "problems": {}}
    )
    root, rel, finish = destination(topic)
    summary = RebuildSummary(topic=topic, now_ms=now, out_dir=".", master="")  # run-independent
    summary.config = {k: v for k, v in asdict(cfg).items() if k not in ("fsync", "report")} | {"now_ms": now}
    summary.inputs.update(messages=stats["rows"], ledgers=len(sizes), delayed=stats["delayed"])
    summary.ledger_sizes = sizes
    summary.rules.update(
        delayed_due=stats["delayed_due"], delayed_beyond_max_delay=stats["delayed_beyond_max_delay"]
    )
    counts: dict[str, int] = ack_stats.get("problems", {}).get("counts", {})
    summary.inputs["acks"] = int(ack_stats["rows"])
    summary.inputs["subscriptions"] = len(cursors)
    for rule in ("acks_unknown_position", "acks_after_now"):
        summary.rules[rule] = counts.get(rule, 0)
    # Nothing is synced file by file: ``finish`` makes the staged directory durable in one pass.
    summary.cursors = write_cursors(root / "cursors", cursors, sizes, sync=False)
    summary.holes = {name: holes_per_ledger(c, sizes) for name, c in cursors.items()}
    plan = plan_of(row["plan"])
    delayed_root = root / "delayed"
    delayed_root.mkdir()
    if plan:
        buckets, dropped = write_buckets(
            delayed_root,
            plan,
            built.select([f.name for f in partitions.BUCKETS_SCHEMA]),
            topic=topic,
            fsync=False,
        )
    else:
        FileCursorProperties(delayed_root / "cursor.properties").apply({})
        buckets, dropped = [], 0
    summary.buckets = buckets
    summary.rules["delayed_acked"] = dropped
    hours = {int(k): v for k, v in stats["hours"].items()}
    summary.delayed_histogram = sorted((now + h * partitions.HOUR_MS, c) for h, c in hours.items())
    summary.key_load = [KeyLoad(**k) for k in stats["key_load"]]
    manifest = topic_manifest(cfg, now, cursors, bool(buckets))
    write_summary(root, summary, manifest, replace(cfg, fsync=False))
    files = finish()
    figures = topic_figures(summary)
    return pa.Table.from_pydict(
        {"topic": [topic], "dir": [rel], "files": [json.dumps(files)], "figures": [json.dumps(figures)]},
        schema=TOPIC_WRITTEN_SCHEMA,
    )


def topic_figures(summary: RebuildSummary) -> dict[str, Any]:
    """The few figures of one topic that the cluster report and manifest carry.

    The rest stay in the topic's ``summary.json``.
    """
    cursors = summary.cursors
    return {
        "messages": summary.inputs.get("messages", 0),
        "acks": summary.inputs.get("acks", 0),
        "subscriptions": len(cursors),
        "backlog": sum(c.backlog for c in cursors),
        "ranges": sum(c.ranges for c in cursors),
        "max_ranges": max((c.ranges for c in cursors), default=0),
        "redeliver_pulsar": sum(c.redeliver_pulsar for c in cursors),
        "redeliver_ours": sum(c.redeliver_ours for c in cursors),
        "not_persistable_pulsar": sum(1 for c in cursors if not c.persistable_pulsar),
        "delayed": summary.inputs.get("delayed", 0),
        "delayed_pending": sum(b.messages for b in summary.buckets),
        "buckets": len(summary.buckets),
        "ledgers": len(summary.ledger_sizes),
        "rules": dict(summary.rules),
        "now_ms": summary.now_ms,
    }
