"""Stage 3: acks folded per topic of a partition, then one topic's cursors assembled."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa

from cursorkit.pipeline.cursors import merge_ack_folds
from cursorkit.pipeline.partitions.acks import ACKS_SCHEMA, fold_acks
from cursorkit.pipeline.topic_stages.passes import LedgerSizes, with_ledger_sizes
from cursorkit.pipeline.topic_stages.split import grouped_by_topic, null_topic_stats, with_topic

__all__ = ["TOPIC_ACKS_SCHEMA", "TOPIC_CURSORS_SCHEMA", "assemble_topic_cursors", "fold_topic_acks"]

TOPIC_ACKS_SCHEMA = pa.schema([pa.field("topic", pa.string()), *ACKS_SCHEMA])
"""``fold_acks`` rows of one topic of a partition."""

TOPIC_CURSORS_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("names", pa.list_(pa.string())),
        ("cursors", pa.list_(pa.binary())),
        ("redeliveries", pa.list_(pa.binary())),
        ("stats", pa.string()),
    ]
)
"""One topic's cursors (pickled, by subscription), their redelivery counts (encoded; empty: none)
and its ack stats (rows, problems)."""


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
    for topic, parts in grouped_by_topic(batches).items():
        if topic is None:
            stats = null_topic_stats(parts)
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
        for out in fold_acks(parts, now_ms=now_ms.get(topic, latest), positions=None):
            yield with_topic(topic, out, TOPIC_ACKS_SCHEMA)


def assemble_topic_cursors(acks: pa.Table, state: pa.Table) -> pa.Table:
    """One topic's cursors from its folded acks (and its ledger sizes), pickled by subscription."""
    topic = (state if state.num_rows else acks).column("topic")[0].as_py()
    sizes = _sizes(state)
    cursors, rows, problems, counts = (
        merge_ack_folds(acks.to_pylist(), sizes) if acks.num_rows else ({}, 0, None, {})
    )
    stats = {"rows": rows, "problems": problems.to_json() if problems is not None else {}}
    return pa.Table.from_pydict(
        {
            "topic": [topic],
            "names": [list(cursors)],
            "cursors": [[pickle.dumps(c) for c in cursors.values()]],
            "redeliveries": [[counts[n].encode() if n in counts else b"" for n in cursors]],
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
