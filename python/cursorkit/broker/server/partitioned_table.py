"""The broker's partitioned topics and their partition counts, kept in ``<data>/partitioned.json``.

Declared at start (``--partitioned-topic``) or changed at run time (the admin REST paths). A change
is written first, off the event loop, then seen: one whose write fails changes nothing, and
changes are made one at a time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cursorkit.broker.server.names import TopicName
from cursorkit.errors import InvalidArgument
from cursorkit.fsio import atomic_write

__all__ = ["MAX_PARTITIONS", "PartitionedTable"]

MAX_PARTITIONS = 10_000
"""The most partitions a partitioned topic may have."""


def check_partitions(name: TopicName, partitions: int) -> None:
    """InvalidArgument unless ``partitions`` is an int in 1..MAX_PARTITIONS and ``name`` no partition."""
    given: object = partitions
    if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= MAX_PARTITIONS:
        raise InvalidArgument(f"partitions must be an int in 1..{MAX_PARTITIONS}, got {partitions!r}")
    if name.partition is not None:
        raise InvalidArgument(f"{name.full} is a partition, not a topic")


class PartitionedTable:
    """Full topic name → partition count, as the file holds it."""

    def __init__(self, root: Path, *, sync: bool) -> None:
        self._path = root / "partitioned.json"
        self._sync = sync
        self._counts: dict[str, int] = {}
        if self._path.exists():
            data = json.loads(self._path.read_text())
            self._counts = {str(k): int(v) for k, v in data.items()}
        self._turn = asyncio.Lock()
        """Held while the file is written (one change at a time)."""

    def count(self, name: TopicName) -> int:
        """The topic's partition count (0: not partitioned, or a partition itself)."""
        return self._counts.get(name.full, 0) if name.partition is None else 0

    def copy(self) -> dict[str, int]:
        """Every partitioned topic (full name) and its count."""
        return dict(self._counts)

    def declare(self, name: TopicName, partitions: int) -> None:
        """Declares it on the calling thread (the broker's start, off the loop)."""
        check_partitions(name, partitions)
        self._counts[name.full] = partitions
        atomic_write(self._path, self._encode(self._counts))

    async def change(self, name: TopicName, partitions: int | None) -> None:
        """Declares ``name`` partitioned (None: no longer), written off the loop before it is seen."""
        if partitions is not None:
            check_partitions(name, partitions)
        async with self._turn:
            table = dict(self._counts)
            if partitions is None:
                table.pop(name.full, None)
            else:
                table[name.full] = partitions
            await asyncio.to_thread(atomic_write, self._path, self._encode(table), sync=self._sync)
            self._counts = table

    @staticmethod
    def _encode(table: dict[str, int]) -> bytes:
        return json.dumps(table, sort_keys=True).encode()
