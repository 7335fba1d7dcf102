"""The message counts of the batches a subscription sent, for the batch-index ACKs that name them.

A batch-index ACK's ``ack_set`` is bounded by the entry's real batch size (the log's count, not
the client's). Reading it from the log would be a disk read on the event loop, so the sizes of the
batch entries sent are kept here until they are acked whole or passed by mark-delete; a partly
acked batch's size is also the cursor's. Only an entry known to neither is read, off the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import attrgetter

import numpy as np

from cursorkit import Cursor, Position

__all__ = ["BATCH_SIZES_KEPT", "BatchSizes"]

BATCH_SIZES_KEPT = 10_000
"""Batch entries (more than one message) whose message counts a subscription remembers from its
sends: about 90 bytes each, 1 MB at most (a flush's prune of a full table takes about 1 ms). Past
it (by one send at most), a batch sent is not remembered until a flush forgets the acked ones; a
batch-index ACK of an entry not remembered reads its count off the event loop."""

_LEDGER = attrgetter("ledger_id")
_ENTRY = attrgetter("entry_id")


class BatchSizes:
    """The sizes of the batch entries sent and not yet seen acked (at most :data:`BATCH_SIZES_KEPT`)."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self._sizes: dict[Position, int] = {}
        self._pruned = cursor.mutations
        """The cursor's mutations when the table was last pruned."""

    def __len__(self) -> int:
        return len(self._sizes)

    def size_of(self, position: Position) -> int | None:
        """The message count of a batch entry sent or held partly acked by the cursor, else None."""
        size = self._sizes.get(position)
        if size is None:
            partial = self.cursor.batch(position)
            if partial is not None and partial[0]:  # 0: a size the store did not know
                size = partial[0]
        return size

    def remember(self, positions: Sequence[Position], sizes: Sequence[int]) -> None:
        """Keeps the counts of the batch entries among those sent (one-message ones filtered at C level)."""
        if len(self._sizes) < BATCH_SIZES_KEPT:
            self._sizes.update(compress(zip(positions, sizes, strict=True), map((1).__lt__, sizes)))

    def prune(self) -> None:
        """Forgets the batches acked whole or passed by mark-delete (once per flush, one cursor call)."""
        kept = self._sizes
        mutations = self.cursor.mutations
        if not kept or mutations == self._pruned:
            return
        self._pruned = mutations
        positions = list(kept)
        n = len(positions)
        acked = self.cursor.is_acked_many(
            np.fromiter(map(_LEDGER, positions), np.int64, n),
            np.fromiter(map(_ENTRY, positions), np.int64, n),
        )
        for position in compress(positions, acked.tolist()):
            del kept[position]
