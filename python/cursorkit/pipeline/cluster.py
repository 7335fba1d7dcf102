"""``cursorkit rebuild`` over many topics in one Spark job, executors doing the work and the writing.

Logs with a ``topic`` column hold many topics (a partition of a partitioned topic is a topic of its
own). Every stage runs on executors, per partition and then per topic (or per topic and bucket):

1. *index*: each partition folds its rows per topic; the folds of a topic merge in one task into
   its dense ledgers, its bucket plan and its figures;
2. *acks*: each partition folds its acks per topic (positions checked against the joined ledger
   sizes); a topic's folds merge into its cursors;
3. *buckets*: each planned bucket of each topic is built in its own task;
4. *write*: one task per topic writes the topic's directory, the single-topic layout, into this
   run's staging prefix under a directory named for the task attempt.

The driver gathers per-topic stats (problems, small figures): O(topics), never O(messages). It
writes the run's summary and report and then ``manifest.json`` at the output's root, listing every
topic's directory and files with their SHA-256: that write is the commit. Readers follow the
manifest only, so a retried or speculative attempt's directory is never read, and a killed run
leaves the previous manifest and everything it names untouched; the next run removes what no
manifest names.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cursorkit.errors import CorruptSnapshot, InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.input_problems import duplicate_error, gap_error, raise_problems
from cursorkit.pipeline.inputs import ddl, read_log
from cursorkit.pipeline.manifest import (
    load_json,
)
from cursorkit.pipeline.output import RUNS_DIR, Output, open_output
from cursorkit.pipeline.partitions.problems import Problems
from cursorkit.pipeline.rebuild_config import RebuildConfig
from cursorkit.pipeline.results import TopicsSummary
from cursorkit.pipeline.scan import Log, open_log, plan_scan, scannable
from cursorkit.pipeline.stages import StageTimer, spark_schema
from cursorkit.pipeline.topic_risk import FIGURES
from cursorkit.pipeline.topic_stages.acks import (
    TOPIC_ACKS_SCHEMA,
    TOPIC_CURSORS_SCHEMA,
    assemble_topic_cursors,
    fold_topic_acks,
)
from cursorkit.pipeline.topic_stages.buckets import TOPIC_BUCKETS_SCHEMA, build_topic_buckets
from cursorkit.pipeline.topic_stages.index import (
    TOPIC_INDEX_SCHEMA,
    TOPIC_STATE_SCHEMA,
    index_topics,
    merge_topic_index,
)
from cursorkit.pipeline.topic_stages.passes import (
    BATCH_ENTRY_SCHEMA,
    LATEST_SCHEMA,
    NOT_YET_DUE_SCHEMA,
    LedgerSizes,
    acks_by_batch_index,
    batch_entries,
    latest_publish,
    not_yet_due,
)
from cursorkit.pipeline.topic_stages.write import TOPIC_WRITTEN_SCHEMA, write_topic
from cursorkit.pipeline.topics_output import check_out, commit_run, remove_unreferenced

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["has_topic_column", "read_topic_figures", "rebuild_topics"]


def _per_group(fn: Callable[[pa.Table], pa.Table]) -> Callable[[pa.Table], pa.Table]:
    """``fn`` as a plain function for ``GroupedData.applyInArrow``.

    PySpark 4.1+ inspects the function's type hints to choose between its table and batch-iterator
    forms, and fails on a ``functools.partial``; a function without hints gets the table form.
    """

    def run(table: pa.Table) -> pa.Table:
        return fn(table)

    run.__annotations__ = {}
    return run


def rebuild_topics(
    spark: SparkSession,
    messages: str | os.PathLike[str],
    acks: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    config: RebuildConfig | None = None,
    *,
    on_stage: Callable[[str, str], None] | None = None,
) -> TopicsSummary:
    """Rebuilds every topic of logs with a ``topic`` column into ``out`` (see the module docstring).

    Raises:
        InvalidInput: an input log is unusable; the message names the topic, column and a sample row.
        InvalidArgument: ``out`` is an existing directory that is not a rebuild's output.
    """
    cfg = config if config is not None else RebuildConfig()
    output = open_output(out)
    check_out(output)
    stages = StageTimer(on_stage)
    run = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    with output.locked(run) as still_ours:
        check_out(output)
        remove_unreferenced(output, keep=None)  # a killed run's staging
        try:
            summary = _run(
                spark,
                os.fspath(messages),
                os.fspath(acks) if acks is not None else None,
                output,
                run,
                cfg,
                stages,
            )
            summary.stages = [(s.name, s.seconds) for s in stages.timings]
            still_ours()
            commit_run(output, run, summary, cfg)
        except BaseException:
            output.remove(f"{RUNS_DIR}/{run}")
            raise
        remove_unreferenced(output, keep=summary)
    return summary


def _run(
    spark: SparkSession,
    messages_path: str,
    acks_path: str | None,
    out: Output,
    run: str,
    cfg: RebuildConfig,
    stages: StageTimer,
) -> TopicsSummary:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    with stages.stage("read"):
        msgs = open_log(spark, messages_path, schema.MESSAGE_COLUMNS, "message")
        acks = open_log(spark, acks_path, schema.ACK_COLUMNS, "ack") if acks_path else None
        if not msgs.has_topic:
            raise InvalidInput(
                f"message log {messages_path}: no topic column (a one-topic log: use rebuild)",
                source=messages_path,
                column="topic",
            )
        if acks is not None and not acks.has_topic:
            raise InvalidInput(
                f"ack log {acks_path}: no topic column, but the message log has one",
                source=acks_path or "",
                column="topic",
            )
        latest = (
            msgs.map(latest_publish, spark_schema(LATEST_SCHEMA))
            .groupBy("topic")
            .agg(F.max("latest").alias("t"))
            .collect()
        )
        nows = {r["topic"]: (cfg.now_ms if cfg.now_ms is not None else int(r["t"])) for r in latest}

    with stages.stage("index messages"):
        parts = msgs.map(
            partial(index_topics, now_ms=nows, max_delay_ms=cfg.max_delay_ms),
            spark_schema(TOPIC_INDEX_SCHEMA),
        )
        state = (
            parts.groupBy("topic")
            .applyInArrow(
                _per_group(
                    partial(
                        merge_topic_index,
                        now_ms=nows,
                        min_index_count_per_bucket=cfg.min_index_count_per_bucket,
                        consumers=cfg.consumers,
                    )
                ),
                spark_schema(TOPIC_STATE_SCHEMA),
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        index_stats = {r["topic"]: json.loads(r["stats"]) for r in state.select("topic", "stats").collect()}
        _check_index(index_stats, msgs, messages_path)
    # The ledgers of every topic (a few per million messages) travel to the tasks with their code.
    sizes = {
        r["topic"]: (np.asarray(r["ledgers"], dtype=np.int64), np.asarray(r["sizes"], dtype=np.int64))
        for r in state.select("topic", "ledgers", "sizes").collect()
        if r["topic"] is not None
    }
    ledgers = state.select(
        "topic", F.explode(F.arrays_zip("ledgers", "sizes", "bucket_of_ledger")).alias("z")
    ).select(
        "topic",
        F.col("z.ledgers").alias("ledger_id"),
        F.col("z.sizes").alias("ledger_size"),
        F.col("z.bucket_of_ledger").alias("bucket"),
    )

    with stages.stage("fold acks"):
        if acks is not None:
            cursors = _cursors(msgs, acks, state, nows, sizes).persist(StorageLevel.MEMORY_AND_DISK)
            ack_stats = {
                r["topic"]: json.loads(r["stats"]) for r in cursors.select("topic", "stats").collect()
            }
            for topic in sorted(ack_stats, key=lambda t: (t is not None, t or "")):
                problems = Problems()
                problems.merge(ack_stats[topic]["problems"])
                raise_problems(problems, "ack", acks_path or "", topic)
        else:
            cursors = spark.createDataFrame([], spark_schema(TOPIC_CURSORS_SCHEMA))

    with stages.stage("delayed index"):
        nyd = (
            msgs.map(
                partial(not_yet_due, now_ms=nows, max_delay_ms=cfg.max_delay_ms),
                spark_schema(NOT_YET_DUE_SCHEMA),
            )
            .join(F.broadcast(ledgers.filter(F.col("bucket") >= 0)), ["topic", "ledger_id"])
            .select(
                "topic", F.col("bucket").cast("int").alias("bucket"), "ledger_id", "entry_id", "deliver_at"
            )
        )
        planned = state.filter(F.size("plan") > 0).select(
            "topic", F.explode(F.sequence(F.lit(0), (F.size("plan") / 3 - 1).cast("int"))).alias("bucket")
        )
        with_cursors = planned.join(cursors.select("topic", "names", "cursors"), "topic", "left").select(
            "topic", F.col("bucket").cast("int").alias("bucket"), "names", "cursors"
        )
        built = (
            nyd.groupBy("topic", "bucket")
            .cogroup(with_cursors.groupBy("topic", "bucket"))
            .applyInArrow(
                partial(
                    build_topic_buckets,
                    max_time_step_ms=cfg.max_time_step_per_segment_ms,
                    max_indexes_per_segment=cfg.max_indexes_per_segment,
                ),
                spark_schema(TOPIC_BUCKETS_SCHEMA),
            )
        )

    with stages.stage("write topics"):
        topic_state = state.join(
            cursors.select("topic", "names", "cursors", "redeliveries", F.col("stats").alias("ack_stats")),
            "topic",
            "left",
        )
        config = {k: v for k, v in asdict(cfg).items() if k not in ("topic", "now_ms", "report", "command")}
        written = (
            built.groupBy("topic")
            .cogroup(topic_state.groupBy("topic"))
            .applyInArrow(
                partial(
                    write_topic,
                    config=config,
                    destination=out.staging(run, cfg.fsync),
                ),
                spark_schema(TOPIC_WRITTEN_SCHEMA),
            )
            .collect()
        )
    state.unpersist()
    if acks is not None:
        cursors.unpersist()
    summary = TopicsSummary(
        run=run, out_dir=out.uri, master=spark.sparkContext.master or "", command=cfg.command
    )
    for r in written:
        figures = json.loads(r["figures"])
        summary.topics[r["topic"]] = figures | {"dir": r["dir"], "files": json.loads(r["files"])}
    return summary


def _check_index(stats: Mapping[str | None, Mapping[str, Any]], msgs: Log, source: str) -> None:
    """Raises the first problem of the message log, topic by topic in name order (null first)."""
    for topic in sorted(stats, key=lambda t: (t is not None, t or "")):
        st = stats[topic]
        problems = Problems()
        problems.merge(st["problems"])
        raise_problems(problems, "message", source, topic)
        if st["duplicates_across_partitions"]:
            raise duplicate_error(msgs.rows(), source, st["duplicates_across_partitions"], topic)
        if st["gap"] is not None:
            ledger, n, missing = st["gap"]
            raise gap_error(source, (ledger, n, missing), topic)


def _cursors(
    msgs: Log,
    acks: Log,
    state: DataFrame,
    nows: Mapping[str, int],
    sizes: LedgerSizes,
) -> DataFrame:
    """Per topic: its cursors, folded on executors (the single-topic job's rules, per topic).

    Acks without a batch index (nearly all) fold where they are read. Only batch-index acks need
    their entry's batch size: they are joined with the message log's batch entries first.
    """
    from pyspark.sql import functions as F

    fold = partial(fold_topic_acks, now_ms=nows, ledgers=sizes)
    plain = acks.map(
        lambda it: fold(acks_by_batch_index(it, indexed=False)),
        spark_schema(TOPIC_ACKS_SCHEMA),
    )
    entries = msgs.map(batch_entries, spark_schema(BATCH_ENTRY_SCHEMA))
    indexed = (
        acks.map(partial(acks_by_batch_index, indexed=True), ddl(acks.columns))
        .join(entries, ["topic", "ledger_id", "entry_id"], "left")
        .withColumn("batch_size", F.col("batch_size").cast("long"))
        .mapInArrow(fold, spark_schema(TOPIC_ACKS_SCHEMA))
    )
    return (
        plain.unionByName(indexed)
        .groupBy("topic")
        .cogroup(state.groupBy("topic"))
        .applyInArrow(assemble_topic_cursors, spark_schema(TOPIC_CURSORS_SCHEMA))
    )


def has_topic_column(spark: SparkSession, messages: str | os.PathLike[str]) -> bool:
    """Whether the message log has a ``topic`` column (a many-topic log); reads the schema only."""
    path = os.fspath(messages)
    if scannable(path):
        return "topic" in plan_scan(path, schema.MESSAGE_COLUMNS, "message", topic=True).present
    df = read_log(spark, path, schema.MESSAGE_COLUMNS, "message", topic=True)
    return "topic" in df.columns


def read_topic_figures(out: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The per-topic figures of a committed many-topic output (from its run's ``summary.json``).

    Raises ``InvalidArgument`` when ``out`` holds no manifest, ``CorruptSnapshot`` (or
    ``UnsupportedVersion``) when the manifest or the summary it names does not check out.
    """
    from cursorkit.pipeline.load import open_topics

    output, doc = open_topics(out)
    where = f"{output.uri}/{doc.summary}"
    summary_raw = output.read(doc.summary)
    if summary_raw is None:
        raise CorruptSnapshot(f"{where}: the summary the manifest names is not there")
    summary = load_json(summary_raw, where, "a many-topic run's summary")
    topics = summary.get("topics") if isinstance(summary, dict) else None
    if not isinstance(topics, dict) or not all(isinstance(f, dict) for f in topics.values()):
        raise CorruptSnapshot(f"{where}: no topics object of per-topic figures")
    figures: dict[str, dict[str, Any]] = {}
    for topic in doc.topics:
        f = topics.get(topic)
        if f is None:
            raise CorruptSnapshot(f"{where}: no figures for topic {topic!r} that the manifest names")
        bad = [k for k in FIGURES if isinstance(f.get(k), bool) or not isinstance(f.get(k), int)]
        if bad:
            raise CorruptSnapshot(f"{where}: topic {topic!r} has no integer {', '.join(bad)}")
        figures[topic] = f
    return figures
