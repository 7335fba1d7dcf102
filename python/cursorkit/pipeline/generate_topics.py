"""Synthetic logs of many topics: ``cursorkit generate --topics N``, for the many-topic rebuild.

Topic sizes follow a Zipf law (exponent 1.1 over the topics' ranks, every topic at least
``MIN_TOPIC_MESSAGES``), so a few topics carry most messages, as on a real cluster. About
``partitioned_fraction`` of the named topics are partitioned into ``partitions`` partitions
(``persistent://tenant-T/ns-N/topic-I-partition-P``, each a topic of its own, sharing their topic's
messages evenly). Each topic is one :func:`generate` log (its own seed; one ledger per ~50,000
messages; ``min_subscriptions`` to ``subscriptions`` subscriptions, so topics differ in their
Failover-style cumulative and Shared-style individual acks), written with a ``topic`` column into
``out/messages`` and ``out/acks``: topics one after another, a new file every ``rows_per_file`` rows
or so (a topic never spans two files), so a cluster of small topics is not thousands of tiny files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cursorkit.errors import InvalidArgument
from cursorkit.pipeline.generate import COMPRESSION, generate

__all__ = ["MIN_TOPIC_MESSAGES", "TopicsGenerated", "generate_topics", "topic_sizes"]

MIN_TOPIC_MESSAGES = 10
"""The fewest messages a generated topic (or partition) holds."""
MESSAGES_PER_LEDGER = 50_000
"""Roughly where a generated topic rolls to its next ledger."""


@dataclass(frozen=True, slots=True)
class TopicsGenerated:
    """What :func:`generate_topics` wrote."""

    messages_path: Path
    acks_path: Path
    topics: dict[str, int]
    """Topic (partitions separately) -> messages."""
    acks: int


def topic_sizes(total: int, topics: int, rng: np.random.Generator) -> list[int]:
    """``total`` messages over ``topics`` topics, Zipf-weighted by a random rank order."""
    if topics < 1 or total < topics * MIN_TOPIC_MESSAGES:
        raise InvalidArgument(
            f"need at least {MIN_TOPIC_MESSAGES} messages per topic: {total} over {topics} topics"
        )
    weights = 1.0 / np.arange(1, topics + 1) ** 1.1
    rng.shuffle(weights)
    extra = total - topics * MIN_TOPIC_MESSAGES
    sizes = np.floor(weights / weights.sum() * extra).astype(np.int64) + MIN_TOPIC_MESSAGES
    sizes[int(np.argmax(weights))] += total - int(sizes.sum())  # the rounding to the largest
    return [int(s) for s in sizes]


def generate_topics(
    out: str | os.PathLike[str],
    *,
    topics: int,
    messages: int,
    keys: int,
    delayed_fraction: float,
    subscriptions: int,
    seed: int,
    partitioned_fraction: float = 0.02,
    partitions: int = 16,
    min_subscriptions: int = 1,
    rows_per_file: int = 2_000_000,
) -> TopicsGenerated:
    """Writes the logs of ``topics`` topics (see the module docstring) under ``out``."""
    root = Path(out)
    messages_path, acks_path = root / "messages", root / "acks"
    for target in (messages_path, acks_path):
        if target.exists():
            raise InvalidArgument(f"{target} already exists; generate writes a new log")
    if not 1 <= min_subscriptions <= subscriptions or partitions < 1 or rows_per_file < 1:
        raise InvalidArgument(
            "need 1 <= min_subscriptions <= subscriptions, positive partitions and rows_per_file"
        )
    if not 0 <= partitioned_fraction <= 1:
        raise InvalidArgument(f"partitioned_fraction must be in [0, 1], got {partitioned_fraction}")
    rng = np.random.default_rng(seed)
    named = topic_sizes(messages, topics, rng)
    partitioned = set(rng.choice(topics, size=round(topics * partitioned_fraction), replace=False).tolist())
    plan: list[tuple[str, int]] = []
    for i, size in enumerate(named):
        name = f"persistent://tenant-{i % 7}/ns-{i % 3}/topic-{i}"
        if i in partitioned and size >= partitions * MIN_TOPIC_MESSAGES:
            share = [size // partitions + (1 if p < size % partitions else 0) for p in range(partitions)]
            plan.extend((f"{name}-partition-{p}", n) for p, n in enumerate(share))
        else:
            plan.append((name, size))
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".generate-topics-", dir=root))
    acks = 0
    spread = subscriptions - min_subscriptions + 1
    try:
        files = {kind: _Rolling(scratch / kind, rows_per_file) for kind in ("messages", "acks")}
        for i, (topic, n) in enumerate(plan):
            one = scratch / "one"
            s = generate(
                one,
                messages=n,
                ledgers=max(1, n // MESSAGES_PER_LEDGER),
                keys=keys,
                delayed_fraction=delayed_fraction,
                subscriptions=min_subscriptions + i % spread,
                seed=seed * 100_003 + i,
                rows_per_file=max(n, 1),
            )
            acks += s.acks
            for kind, rolling in files.items():
                table = pq.read_table(one / kind)
                rolling.write(
                    table.append_column("topic", pa.repeat(pa.scalar(topic, pa.string()), table.num_rows))
                )
            shutil.rmtree(one)
        for rolling in files.values():
            rolling.close()
        os.rename(scratch / "messages", messages_path)
        os.rename(scratch / "acks", acks_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TopicsGenerated(messages_path, acks_path, dict(plan), acks)


class _Rolling:
    """Parquet files ``part-NNNNN.parquet`` in ``root``: tables appended, a new file past ``rows``."""

    def __init__(self, root: Path, rows: int) -> None:
        root.mkdir()
        self.root, self.rows = root, rows
        self.writer: pq.ParquetWriter | None = None
        self.written = 0
        self.files = 0

    def write(self, table: pa.Table) -> None:
        if self.writer is not None and self.written >= self.rows:
            self.close()
        if self.writer is None:
            path = self.root / f"part-{self.files:05d}.parquet"
            self.writer = pq.ParquetWriter(path, table.schema, compression=COMPRESSION)
            self.files += 1
            self.written = 0
        self.writer.write_table(table)
        self.written += table.num_rows

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
