"""``cursorkit rebuild``: a topic's delayed index and cursors rebuilt from its message and ack logs.

Stages (each timed): *index* folds the message log into per-ledger entry bitmaps, checks it and
counts delayed messages; *cursors* folds each subscription's acks (a union, so order-free) into
mark-delete + ranges + partial batches and writes a ``CursorStore`` per subscription; *delayed*
plans PIP-195 buckets at ledger boundaries on the driver and builds them in Rust inside
``mapInArrow``, written through ``FileBucketSnapshotStorage`` with the cursor-properties manifest;
*report* writes the stats tables, ``summary.json`` and ``report.html``. Everything goes to a
temporary sibling directory that is renamed over ``--out`` only at the end, so a failed run leaves
nothing a recovery would read. This module orders the stages; each stage has its own module
(``message_index``, ``ack_fold``, ``delayed_buckets``, ``rebuild_output``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cursorkit.errors import InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.ack_fold import fold_ack_log
from cursorkit.pipeline.cursors import holes_per_ledger, write_cursors
from cursorkit.pipeline.delayed_buckets import build_delayed_index
from cursorkit.pipeline.inputs import read_log
from cursorkit.pipeline.message_index import fold_message_log
from cursorkit.pipeline.output import locked_dir
from cursorkit.pipeline.partitions.index import HOUR_MS
from cursorkit.pipeline.rebuild_config import RebuildConfig
from cursorkit.pipeline.rebuild_output import check_out, replace_output, topic_manifest, write_summary
from cursorkit.pipeline.results import RebuildSummary
from cursorkit.pipeline.stages import StageTimer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["RebuildConfig", "rebuild"]


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
    check_out(out_path)
    stages = StageTimer(on_stage)
    with locked_dir(out_path):
        check_out(out_path)  # again: another run may have finished while this one waited
        tmp = out_path.parent / f".{out_path.name}.rebuild-{uuid.uuid4().hex[:12]}"
        try:
            summary, manifest = _run(
                spark, os.fspath(messages), os.fspath(acks) if acks is not None else None, tmp, cfg, stages
            )
            summary.out_dir = str(out_path)
            summary.stages = stages.timings
            with stages.stage("write report" if cfg.report else "write summary"):
                write_summary(tmp, summary, manifest, cfg)
            replace_output(tmp, out_path)
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
    stages: StageTimer,
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
        index = fold_message_log(msgs, now, cfg, messages_path)
    summary.inputs.update(messages=index.rows, ledgers=len(index.sizes))
    summary.ledger_sizes = dict(index.sizes)
    summary.rules.update(delayed_due=index.due, delayed_beyond_max_delay=index.beyond)
    summary.inputs["delayed"] = index.delayed

    with stages.stage("fold acks"):
        cursors, ack_rows, ack_problems, redeliveries = fold_ack_log(
            msgs, ack_df, now, index, acks_path or ""
        )
    summary.inputs["acks"] = ack_rows
    summary.inputs["subscriptions"] = len(cursors)
    for rule in ("acks_unknown_position", "acks_after_now"):
        summary.rules[rule] = ack_problems.counts.get(rule, 0)

    with stages.stage("write cursors"):
        summary.cursors = write_cursors(tmp / "cursors", cursors, index.sizes, redeliveries=redeliveries)
        summary.holes = {name: holes_per_ledger(c, index.sizes) for name, c in cursors.items()}

    with stages.stage("delayed index"):
        buckets, dropped = build_delayed_index(msgs, now, cfg, index, cursors, tmp)
    summary.buckets = buckets
    summary.rules["delayed_acked"] = dropped
    summary.delayed_histogram = sorted((now + h * HOUR_MS, c) for h, c in index.hours.items())

    with stages.stage("key load"):
        from cursorkit.pipeline.keyload import key_load

        summary.key_load = key_load(index.range_slots, index.consistent_slots, cfg.consumers)
        manifest = topic_manifest(cfg, now, cursors, bool(buckets))
    return summary, manifest
