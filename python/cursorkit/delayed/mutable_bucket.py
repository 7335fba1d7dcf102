"""``MutableBucket``: the tail bucket, where new indexes of the newest ledgers wait until it is sealed."""

from __future__ import annotations

from cursorkit._core import DelayQueue


class MutableBucket:
    """The tail's queue and the ledger range it covers (``start`` and ``end`` are -1 while empty)."""

    def __init__(self) -> None:
        self.queue = DelayQueue()
        self.start = -1
        self.end = -1

    def take(self, ledger_id: int) -> DelayQueue:
        """Stretches the range to ``ledger_id`` (the newest ledger so far); returns the queue."""
        if self.start < 0:
            self.start = ledger_id
        self.end = ledger_id
        return self.queue

    def reset(self) -> None:
        """Empties the range (the queue was drained or cleared)."""
        self.start = self.end = -1

    @property
    def range(self) -> tuple[int, int]:
        """``(start, end)`` ledgers; (-1, -1) when empty."""
        return self.start, self.end

    @property
    def key(self) -> str:
        """The bucket key of a persisted tail."""
        return f"mutable_{self.start}_{self.end}"

    def __len__(self) -> int:
        return len(self.queue)
