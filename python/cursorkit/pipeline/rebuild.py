"""``cursorkit rebuild``: a topic's delayed index and cursors rebuilt from its message and ack logs.

Stages (each timed): *index* folds the message log into per-ledger entry bitmaps, checks it and
counts delayed messages; *cursors* folds each subscription's acks (a union, so order-free) into
mark-delete + ranges + partial batches and writes a ``CursorStore`` per subscription; *delayed*
plans PIP-195 buckets at ledger boundaries on the driver and builds them in Rust inside
``mapInArrow``, written through ``FileBucketSnapshotStorage`` with the cursor-properties manifest;
*report* writes the stats tables, ``summary.json`` and ``report.html``. Everything goes to a
temporary sibling directory that is renamed over ``--out`` only at the end, so a failed run leaves
nothing a recovery would read.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cursorkit._core import RangeSet
from cursorkit.ackstate import Cursor
from cursorkit.delayed.bucket import bucket_key
from cursorkit.delayed.properties import FileCursorProperties
from cursorkit.delayed.storage.file import FileBucketSnapshotStorage
from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.fsio import atomic_write, fsync_dir
from cursorkit.pipeline import partitions, schema
from cursorkit.pipeline.cursors import cursor_dir_name, holes_per_ledger, merge_ack_folds, write_cursors
from cursorkit.pipeline.inputs import read_log
from cursorkit.pipeline.load import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION
from cursorkit.pipeline.output import list_files, locked_dir
from cursorkit.pipeline.plan import PlannedBucket, plan_buckets
from cursorkit.pipeline.results import BucketRow, RebuildSummary, StageTiming
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from cursorkit.proto.strict import parse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "RebuildConfig",
    "acks_with_batch_sizes",
    "dense_sizes",
    "duplicate_error",
    "gap_error",
    "merge_index_rows",
    "rebuild",
    "write_buckets",
]

SHARED_CURSOR = "shared-delayed-index"
"""Cursor name recorded in the bucket snapshots of the topic's one shared delayed index."""

# Problems that make the input unusable: the driver raises on the first it finds.
_ERRORS = {
    "null_ledger_id": ("ledger_id", "is null"),
    "null_entry_id": ("entry_id", "is null"),
    "null_publish_time": ("publish_time", "is null"),
    "negative_ledger_id": ("ledger_id", "is negative"),
    "negative_entry_id": ("entry_id", "is negative"),
    "implausible_publish_time": ("publish_time", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "implausible_deliver_at": ("deliver_at", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "bad_batch_size": ("batch_size", "is below 1 or above 1,048,576"),
    "duplicate_position": ("ledger_id, entry_id", "repeats a position already in the log"),
    "null_topic": ("topic", "is null (a log with a topic column names every row's topic)"),
    "null_subscription": ("subscription", "is null"),
    "null_ack_type": ("ack_type", "is null"),
    "null_ack_time": ("ack_time", "is null"),
    "bad_ack_type": ("ack_type", f"is not one of {', '.join(schema.ACK_TYPES)} (in any case)"),
    "negative_position": ("ledger_id, entry_id", "is negative"),
    "implausible_ack_time": ("ack_time", "is negative or after the year 3000 (µs or ns, not ms?)"),
    "acks_batch_index_out_of_range": ("batch_index", "is outside the entry's batch (see batch_size)"),
}


BROADCAST_BATCH_ENTRIES = 4_000_000
"""Up to this many batch entries (batch_size > 1) are broadcast to the ack fold (~100 MB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuildConfig:
    """Settings of a rebuild (PIP-195's sizes are Pulsar's defaults)."""

    topic: str = "persistent://public/default/topic"
    now_ms: int | None = None
    """The moment the state is rebuilt for; None = the last publish_time of the message log."""
    min_index_count_per_bucket: int = 50_000
    max_time_step_per_segment_ms: int = 300_000
    max_indexes_per_segment: int = 5000
    max_delay_ms: int = 365 * 24 * 3_600_000
    """Deliver-at further than this after now is set aside (rule ``delayed_beyond_max_delay``)."""
    consumers: int = 8
    """Consumers of the Key_Shared hash-load figures."""
    fsync: bool = True
    report: bool = True
    command: str = ""
    """The command line that asked for the rebuild, shown in the report ("" when called as a library)."""


@dataclass(slots=True)
class _Stages:
    """Times the stages and tells a progress callback."""

    on_stage: Callable[[str, str], None] | None
    timings: list[StageTiming] = field(default_factory=list)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.on_stage is not None:
            self.on_stage(name, "start")
        t0 = time.perf_counter()
        yield
        self.timings.append(StageTiming(name, round(time.perf_counter() - t0, 3)))
        if self.on_stage is not None:
            self.on_stage(name, "done")


def _ddl(arrow_schema: pa.Schema) -> Any:
    """The Spark schema of a per-partition function's Arrow output schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def _where(what: str, source: str, topic: str | None) -> str:
    """``message log X`` (one topic) or ``message log X, topic 'T'`` (many) for error messages."""
    return f"{what} log {source}" if topic is None else f"{what} log {source}, topic {topic!r}"


def _raise_problems(problems: partitions.Problems, what: str, source: str, topic: str | None = None) -> None:
    where = _where(what, source, topic)
    for name, count in problems.counts.items():
        if name in _ERRORS:
            column, rule = _ERRORS[name]
            raise InvalidInput(
                f"{where}: {count} row(s) where {column} {rule}",
                source=source,
                column=column,
                row=problems.samples.get(name),
                topic=topic,
            )


def _check_out(out: Path) -> None:
    """Refuses an ``out`` that exists and is not a rebuild's output (nothing else is ever replaced)."""
    if out.exists():
        if not out.is_dir():
            raise InvalidArgument(f"--out {out} exists and is not a directory")
        if any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
            raise InvalidArgument(f"--out {out} is a non-empty directory that is not a rebuild's output")


def _publish(tmp: Path, out: Path) -> None:
    """Renames the finished ``tmp`` over ``out`` (an older output is moved aside, then removed)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        if old is not None:  # put the previous output back
            old.rename(out)
        raise
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def rebuild(
    spark: SparkSession,
    messages: str | os.PathLike[str],
    acks: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    config: RebuildConfig | None = None,
    *,
    on_stage: Callable[[str, str], None] | None = None,
) -> RebuildSummary:
    """Runs the rebuild job and returns what it measured (also written to ``out/summary.json``).

    Raises:
        InvalidInput: an input log is unusable (the message names the column and a sample row).
        InvalidArgument: ``out`` is an existing directory that is not a rebuild's output.
    """
    cfg = config if config is not None else RebuildConfig()
    out_path = Path(out)
    _check_out(out_path)
    stages = _Stages(on_stage)
    with locked_dir(out_path):
        _check_out(out_path)  # again: another run may have finished while this one waited
        tmp = out_path.parent / f".{out_path.name}.rebuild-{uuid.uuid4().hex[:12]}"
        try:
            summary, manifest = _run(
                spark, os.fspath(messages), os.fspath(acks) if acks is not None else None, tmp, cfg, stages
            )
            summary.out_dir = str(out_path)
            summary.stages = stages.timings
            with stages.stage("write report" if cfg.report else "write summary"):
                _write_summary(tmp, summary, manifest, cfg)
            _publish(tmp, out_path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return summary


def _run(
    spark: SparkSession,
    messages_path: str,
    acks_path: str | None,
    tmp: Path,
    cfg: RebuildConfig,
    stages: _Stages,
) -> tuple[RebuildSummary, dict[str, Any]]:
    from pyspark.sql import functions as F

    tmp.mkdir()
    with stages.stage("read"):
        msgs = read_log(spark, messages_path, schema.MESSAGE_COLUMNS, "message")
        ack_df = read_log(spark, acks_path, schema.ACK_COLUMNS, "ack") if acks_path is not None else None
        now = cfg.now_ms
        if now is None:
            row = msgs.agg(F.max("publish_time").alias("t")).first()
            if row is None or row["t"] is None:  # no rows: no moment to rebuild at, rather than 1970
                raise InvalidInput(
                    f"message log {messages_path}: no rows, so no last publish_time to rebuild at "
                    "(give now_ms, --now, to rebuild an empty log)",
                    source=messages_path,
                    column="publish_time",
                )
            now = int(row["t"])
    summary = RebuildSummary(
        topic=cfg.topic,
        now_ms=now,
        out_dir="",
        master=spark.sparkContext.master or "",
        command=cfg.command,
    )
    hidden = ("fsync", "report", "command")
    summary.config = {k: v for k, v in asdict(cfg).items() if k not in hidden} | {"now_ms": now}

    with stages.stage("index messages"):
        index = _index(msgs, now, cfg, messages_path)
    summary.inputs.update(messages=index.rows, ledgers=len(index.sizes))
    summary.ledger_sizes = dict(index.sizes)
    summary.rules.update(delayed_due=index.due, delayed_beyond_max_delay=index.beyond)
    summary.inputs["delayed"] = index.delayed

    with stages.stage("fold acks"):
        cursors, ack_rows, ack_problems = _cursors(msgs, ack_df, now, index, acks_path or "")
    summary.inputs["acks"] = ack_rows
    summary.inputs["subscriptions"] = len(cursors)
    for rule in ("acks_unknown_position", "acks_after_now"):
        summary.rules[rule] = ack_problems.counts.get(rule, 0)

    with stages.stage("write cursors"):
        summary.cursors = write_cursors(tmp / "cursors", cursors, index.sizes)
        summary.holes = {name: holes_per_ledger(c, index.sizes) for name, c in cursors.items()}

    with stages.stage("delayed index"):
        buckets, dropped = _delayed(msgs, now, cfg, index, cursors, tmp)
    summary.buckets = buckets
    summary.rules["delayed_acked"] = dropped
    summary.delayed_histogram = sorted((now + h * partitions.HOUR_MS, c) for h, c in index.hours.items())

    with stages.stage("key load"):
        from cursorkit.pipeline.keyload import key_load

        summary.key_load = key_load(index.range_slots, index.consistent_slots, cfg.consumers)
        manifest = _manifest(cfg, now, cursors, bool(buckets))
    return summary, manifest


@dataclass(slots=True)
class _Index:
    """The message log folded: positions, sizes and counts the later stages need."""

    positions: RangeSet
    sizes: dict[int, int]
    not_yet_due: dict[int, int]
    rows: int
    delayed: int
    due: int
    beyond: int
    hours: dict[int, int]
    range_slots: np.ndarray[Any, np.dtype[np.int64]]
    consistent_slots: np.ndarray[Any, np.dtype[np.int64]]
    batch_entries: int


def _index(msgs: DataFrame, now: int, cfg: RebuildConfig, source: str) -> _Index:

    fn = partial(partitions.index_messages, now_ms=now, max_delay_ms=cfg.max_delay_ms)
    table = msgs.mapInArrow(fn, _ddl(partitions.INDEX_SCHEMA)).toArrow()
    index, problems = merge_index_rows(table.to_pylist())
    _raise_problems(problems, "message", source)
    valid = index.positions.total_cardinality()
    counted = index.rows - sum(problems.counts.values())
    if valid != counted:  # a position repeated across partitions
        raise duplicate_error(msgs, source, counted - valid)
    sizes, gap = dense_sizes(index.positions)
    if gap is not None:
        raise gap_error(source, gap)
    index.sizes = sizes
    return index


def duplicate_error(msgs: DataFrame, source: str, count: int, topic: str | None = None) -> InvalidInput:
    """The error for ``count`` positions repeated across partitions, with a sample row found by Spark.

    For a many-topic log the sample is looked for in ``topic`` only.
    """
    from pyspark.sql import functions as F

    mine = msgs if topic is None else msgs.filter(F.col("topic") == F.lit(topic))
    dup = (
        mine.groupBy("ledger_id", "entry_id")
        .count()
        .filter(F.col("count") > 1)
        .select("ledger_id", "entry_id")
        .limit(1)
        .collect()
    )
    sample = None
    if dup:
        first = (
            mine.filter((F.col("ledger_id") == dup[0][0]) & (F.col("entry_id") == dup[0][1]))
            .limit(1)
            .collect()
        )
        sample = first[0].asDict() if first else None
    return InvalidInput(
        f"{_where('message', source, topic)}: {count} row(s) where ledger_id, entry_id repeats a position "
        "already in the log",
        source=source,
        column="ledger_id, entry_id",
        row=sample,
        topic=topic,
    )


def gap_error(source: str, gap: tuple[int, int, int], topic: str | None = None) -> InvalidInput:
    """The error for a ledger whose entries are not dense (``dense_sizes``' gap)."""
    ledger, n, missing = gap
    return InvalidInput(
        f"{_where('message', source, topic)}: ledger {ledger} has {n} entries but not 0..{n - 1} "
        f"(entry {missing} is missing); a ledger's entries are dense",
        source=source,
        column="entry_id",
        row={"ledger_id": ledger, "entry_id": missing},
        topic=topic,
    )


def merge_index_rows(parts: Iterable[Mapping[str, Any]]) -> tuple[_Index, partitions.Problems]:
    """Merges ``index_messages`` rows (any partitioning, any order) into one topic's index.

    ``sizes`` is left empty (see :func:`dense_sizes`); rows whose slot histograms are None add none.
    """
    positions = RangeSet()
    nyd: dict[int, int] = {}
    problems = partitions.Problems()
    rows = delayed = due = beyond = batch_entries = 0
    hours: dict[int, int] = {}
    range_slots = np.zeros(partitions.SLOTS, dtype=np.int64)
    consistent_slots = np.zeros(partitions.SLOTS, dtype=np.int64)
    for r in parts:
        if r["ledger_id"] == -1:
            st = json.loads(r["stats"])
            problems.merge(st["problems"])
            rows += st["rows"]
            delayed += st["delayed"]
            due += st["delayed_due"]
            beyond += st["delayed_beyond_max_delay"]
            batch_entries += st["batch_entries"]
            for k, v in st["hours"].items():
                hours[int(k)] = hours.get(int(k), 0) + v
            if r["range_slots"] is not None:
                range_slots += np.frombuffer(r["range_slots"], dtype=np.int64)
                consistent_slots += np.frombuffer(r["consistent_slots"], dtype=np.int64)
            continue
        positions.union_ledger_bytes(r["ledger_id"], r["bitmap"])
        if r["not_yet_due"]:
            nyd[r["ledger_id"]] = nyd.get(r["ledger_id"], 0) + r["not_yet_due"]
    index = _Index(
        positions, {}, nyd, rows, delayed, due, beyond, hours, range_slots, consistent_slots, batch_entries
    )
    return index, problems


def dense_sizes(positions: RangeSet) -> tuple[dict[int, int], tuple[int, int, int] | None]:
    """Entries per ledger, or the first ledger whose entries are not ``0..n-1``: (ledger, n, missing)."""
    sizes: dict[int, int] = {}
    for ledger in positions.ledgers():
        n = positions.cardinality(ledger, -1, ledger, 2**31)
        if positions.cardinality(ledger, -1, ledger, n - 1) != n:
            return sizes, (ledger, n, _first_missing(positions, ledger))
        sizes[ledger] = n
    return sizes, None


def _first_missing(positions: RangeSet, ledger: int) -> int:
    """The lowest entry id of ``ledger`` below its highest that the log does not hold."""
    expect = 0
    for lo_ledger, lo_entry, _, hi_entry in positions.ranges():
        if lo_ledger == ledger:
            if lo_entry + 1 != expect:
                return expect
            expect = hi_entry + 1
    return expect


# --- cursors ---------------------------------------------------------------------------------------


def _cursors(
    msgs: DataFrame,
    acks: DataFrame | None,
    now: int,
    index: _Index,
    source: str,
) -> tuple[dict[str, Cursor], int, partitions.Problems]:

    problems = partitions.Problems()
    if acks is None:
        return {}, 0, problems
    both = acks_with_batch_sizes(msgs, acks, index.batch_entries, [])
    fn = partial(partitions.fold_acks, now_ms=now, positions=index.positions.to_bytes())
    table = both.mapInArrow(fn, _ddl(partitions.ACKS_SCHEMA)).toArrow()
    cursors, rows, problems = merge_ack_folds(table.to_pylist(), index.sizes)
    _raise_problems(problems, "ack", source)
    return cursors, rows, problems


def acks_with_batch_sizes(msgs: DataFrame, acks: DataFrame, batch_entries: int, keys: list[str]) -> DataFrame:
    """The acks with their entry's ``batch_size`` (null: not a batch entry, or not in the log).

    Batch-index acks need it. Few batch entries: one scan of the acks with the batch entries
    broadcast (measured 3 s faster at 16M); many: join only the batch-index acks. ``keys`` are
    join columns before the position (``["topic"]`` for a many-topic log).
    """
    from pyspark.sql import functions as F

    on = [*keys, "ledger_id", "entry_id"]
    if batch_entries <= BROADCAST_BATCH_ENTRIES:
        entries = msgs.filter(F.col("batch_size") > 1).select(
            *on, F.col("batch_size").cast("long").alias("batch_size")
        )
        return acks.join(F.broadcast(entries), on, "left")
    plain = acks.filter(F.col("batch_index").isNull()).withColumn("batch_size", F.lit(None).cast("long"))
    sizes = msgs.select(*on, F.coalesce(F.col("batch_size"), F.lit(1)).cast("long").alias("batch_size"))
    batched = acks.filter(F.col("batch_index").isNotNull()).join(sizes, on, "left")
    return plain.unionByName(batched)


# --- delayed index ---------------------------------------------------------------------------------


def _delayed(
    msgs: DataFrame, now: int, cfg: RebuildConfig, index: _Index, cursors: Mapping[str, Cursor], tmp: Path
) -> tuple[list[BucketRow], int]:
    from pyspark.sql import functions as F

    plan = plan_buckets(index.not_yet_due, cfg.min_index_count_per_bucket)
    root = tmp / "delayed"
    root.mkdir()
    if not plan:
        FileCursorProperties(root / "cursor.properties").apply({})
        return [], 0
    nyd = msgs.filter(
        F.col("deliver_at").isNotNull()
        & (F.col("deliver_at") > F.col("publish_time"))
        & (F.col("deliver_at") > F.lit(now))
        & (F.col("deliver_at") <= F.lit(now + cfg.max_delay_ms))
    ).select("ledger_id", "entry_id", "deliver_at")
    tag = partial(partitions.tag_buckets, starts=[b.start_ledger_id for b in plan])
    build = partial(
        partitions.build_buckets,
        max_time_step_ms=cfg.max_time_step_per_segment_ms,
        max_indexes_per_segment=cfg.max_indexes_per_segment,
        cursors={name: pickle.dumps(c) for name, c in cursors.items()},
    )
    parts = max(1, min(len(plan), int(msgs.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)))
    built = (
        nyd.mapInArrow(tag, _ddl(partitions.BUCKET_ID_SCHEMA))
        .repartition(parts, "bucket")
        .mapInArrow(build, _ddl(partitions.BUCKETS_SCHEMA))
        .toArrow()
    )
    return write_buckets(root, plan, built, topic=cfg.topic, fsync=cfg.fsync)


def write_buckets(
    root: Path, plan: list[PlannedBucket], built: pa.Table, *, topic: str, fsync: bool = True
) -> tuple[list[BucketRow], int]:
    """Writes built buckets (``BUCKETS_SCHEMA`` rows) as snapshots under ``root/buckets``.

    Snapshots are written in plan order, then recorded all at once in ``root/cursor.properties``
    (one atomic write), so a crash before the end leaves only unrecorded snapshots.

    Returns the bucket rows of the report and how many indexes were dropped as acked everywhere.
    """
    rows: list[BucketRow] = []
    dropped = 0
    found = sorted(built.to_pylist(), key=lambda r: r["bucket"])
    storage = FileBucketSnapshotStorage(root / "buckets", fsync=fsync)
    storage.start()
    keys: dict[str, str] = {}
    try:
        for r in found:
            dropped += r["dropped_acked"]
            if not r["messages"]:
                continue
            planned = plan[r["bucket"]]
            meta = parse(SnapshotMetadata, r["metadata"])
            key = bucket_key(planned.start_ledger_id, planned.end_ledger_id)
            bucket_id = storage.create_bucket_snapshot(meta, r["segments"], key, topic, SHARED_CURSOR)
            keys[key] = str(bucket_id)
            rows.append(
                BucketRow(
                    bucket_id=bucket_id,
                    start_ledger_id=planned.start_ledger_id,
                    end_ledger_id=planned.end_ledger_id,
                    messages=r["messages"],
                    segments=len(r["segments"]),
                    snapshot_bytes=storage.get_bucket_snapshot_length(bucket_id),
                    first_deliver_at=r["first_deliver_at"],
                    last_deliver_at=r["last_deliver_at"],
                )
            )
    finally:
        storage.close()
    FileCursorProperties(root / "cursor.properties").apply(keys)
    return rows, dropped


# --- outputs ---------------------------------------------------------------------------------------


def _manifest(cfg: RebuildConfig, now: int, cursors: Mapping[str, Cursor], delayed: bool) -> dict[str, Any]:
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "topic": cfg.topic,
        "now_ms": now,
        "delayed": {
            "storage": "delayed/buckets",
            "properties": "delayed/cursor.properties",
            "topic": cfg.topic,
            "cursor": SHARED_CURSOR,
        }
        if delayed
        else None,
        "subscriptions": {name: f"cursors/{cursor_dir_name(name)}" for name in cursors},
        "segments": {
            "min_index_count_per_bucket": cfg.min_index_count_per_bucket,
            "max_time_step_per_segment_ms": cfg.max_time_step_per_segment_ms,
            "max_indexes_per_segment": cfg.max_indexes_per_segment,
        },
    }
    return manifest


def _write_summary(tmp: Path, summary: RebuildSummary, manifest: dict[str, Any], cfg: RebuildConfig) -> None:
    stats = tmp / "stats"
    stats.mkdir(exist_ok=True)
    if summary.cursors:
        pq.write_table(pa.Table.from_pylist([asdict(c) for c in summary.cursors]), stats / "cursors.parquet")
    if summary.buckets:
        pq.write_table(pa.Table.from_pylist([asdict(b) for b in summary.buckets]), stats / "buckets.parquet")
    atomic_write(tmp / "summary.json", json.dumps(summary.to_json(), indent=1).encode(), sync=cfg.fsync)
    if cfg.report:
        from cursorkit.pipeline.report import write_report

        write_report(summary, tmp / "report.html")
    # Last: the files the output vouches for (every file but the manifest), then the manifest itself.
    manifest = manifest | {"files": list_files(tmp)}
    atomic_write(tmp / MANIFEST_FILE, json.dumps(manifest, indent=1).encode(), sync=cfg.fsync)
    fsync_dir(tmp)
