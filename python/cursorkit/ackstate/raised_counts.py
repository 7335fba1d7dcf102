"""Redelivery-count raises a dispatcher journaled, as columns: what a durable store persists.

A dispatcher (``SharedDispatcher``, ``KeySharedDispatcher``) is the one owner of its redelivery
counts; with its journal on, each raise is also written down, and the broker hands them to the
cursor store's ``RedeliveryCounts`` (durable counts, beyond Pulsar) before the messages carrying
them are sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["RaisedCounts"]


class RaisedCounts(NamedTuple):
    """The raises since the last take: a position raised twice appears twice, its later count last."""

    ledger_ids: npt.NDArray[np.int64]
    entry_ids: npt.NDArray[np.int64]
    counts: npt.NDArray[np.uint32]
    """Each position's count after the raise."""

    def __bool__(self) -> bool:
        return bool(len(self.ledger_ids))
