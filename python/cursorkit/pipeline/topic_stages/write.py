"""Stage 5: one topic's output directory (the single-topic layout) written by its task, and its figures."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.pipeline.cursors import holes_per_ledger, write_cursors
from cursorkit.pipeline.partitions.buckets import BUCKETS_SCHEMA
from cursorkit.pipeline.partitions.index import HOUR_MS
from cursorkit.pipeline.results import KeyLoad, RebuildSummary
from cursorkit.pipeline.topic_stages.index import plan_of

__all__ = ["TOPIC_WRITTEN_SCHEMA", "topic_figures", "write_topic"]

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
    from cursorkit.pipeline.rebuild_config import RebuildConfig
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
    redeliveries = {
        n: RedeliveryCounts.decode(blob)
        for n, blob in zip(names, row.get("redeliveries") or [], strict=False)
        if blob
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
    summary.cursors = write_cursors(root / "cursors", cursors, sizes, sync=False, redeliveries=redeliveries)
    summary.holes = {name: holes_per_ledger(c, sizes) for name, c in cursors.items()}
    plan = plan_of(row["plan"])
    delayed_root = root / "delayed"
    delayed_root.mkdir()
    if plan:
        buckets, dropped = write_buckets(
            delayed_root,
            plan,
            built.select([f.name for f in BUCKETS_SCHEMA]),
            topic=topic,
            fsync=False,
        )
    else:
        FileCursorProperties(delayed_root / "cursor.properties").apply({})
        buckets, dropped = [], 0
    summary.buckets = buckets
    summary.rules["delayed_acked"] = dropped
    hours = {int(k): v for k, v in stats["hours"].items()}
    summary.delayed_histogram = sorted((now + h * HOUR_MS, c) for h, c in hours.items())
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
