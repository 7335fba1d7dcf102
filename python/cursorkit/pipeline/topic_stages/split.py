"""A partition's rows split by their ``topic`` column, and the column put back on a stage's output."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cursorkit.pipeline.partitions.problems import Problems

__all__ = [
    "RUNS_TO_SLICE",
    "grouped_by_topic",
    "null_topic_stats",
    "split_by_topic",
    "topic_column",
    "with_topic",
]


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


def grouped_by_topic(batches: Iterable[pa.RecordBatch]) -> dict[str | None, list[pa.RecordBatch]]:
    """The non-empty batches' rows, grouped by topic (``split_by_topic``) across the batches."""
    groups: dict[str | None, list[pa.RecordBatch]] = {}
    for batch in batches:
        if batch.num_rows:
            for topic, part in split_by_topic(batch):
                groups.setdefault(topic, []).append(part)
    return groups


def null_topic_stats(parts: list[pa.RecordBatch]) -> dict[str, Any]:
    """The stats of rows without a topic: every one a ``null_topic`` problem."""
    problems = Problems()
    for part in parts:
        problems.note("null_topic", np.ones(part.num_rows, dtype=np.bool_), part)
    return {"rows": sum(p.num_rows for p in parts), "problems": problems.to_json()}


def topic_column(topic: str | None, rows: int) -> pa.Array:
    """A string column of ``rows`` times ``topic``, built by Arrow (no Python list per row)."""
    return pa.repeat(pa.scalar(topic, pa.string()), rows)


def with_topic(topic: str | None, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with a first ``topic`` column of ``topic``, as ``schema``."""
    return pa.RecordBatch.from_arrays([topic_column(topic, batch.num_rows), *batch.columns], schema=schema)
