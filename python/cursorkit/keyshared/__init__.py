"""Key_Shared dispatch: Pulsar-compatible sticky-key hashing, hash-range selectors, ordered dispatch.

* ``sticky_key_hash`` / ``hash_many`` / ``sticky_key``: Murmur3 x86_32 (seed 0, 31 bits), as Pulsar;
  ``slots``: a selector's slot of each hash.
* ``AutoSplitSelector`` (PIP-34), ``ConsistentHashingSelector`` (Pulsar 4 ring), ``ExclusiveRangeSelector``.
* ``KeySharedDispatcher``: draining hashes (PIP-379), last sent position (PIP-282), out-of-order.
* ``Simulation``: a seeded broker/producer/consumer world with an ordering checker.
"""

from __future__ import annotations

from cursorkit.keyshared.dispatcher import AckResult, Entry, KeySharedDispatcher
from cursorkit.keyshared.hashing import hash_many, slots, sticky_key, sticky_key_hash
from cursorkit.keyshared.hooks import Selector
from cursorkit.keyshared.selectors import (
    AutoSplitSelector,
    ConsistentHashingSelector,
    ExclusiveRangeSelector,
    Impact,
)
from cursorkit.keyshared.sim import OrderingChecker, Simulation
from cursorkit.keyshared.stats import Blocked, IsolationStats, KeyOrderStats, SubscriptionStats

__all__ = [
    "AckResult",
    "AutoSplitSelector",
    "Blocked",
    "ConsistentHashingSelector",
    "Entry",
    "ExclusiveRangeSelector",
    "Impact",
    "IsolationStats",
    "KeyOrderStats",
    "KeySharedDispatcher",
    "OrderingChecker",
    "Selector",
    "Simulation",
    "SubscriptionStats",
    "hash_many",
    "slots",
    "sticky_key",
    "sticky_key_hash",
]
