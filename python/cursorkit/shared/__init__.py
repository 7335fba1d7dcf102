"""Shared dispatch: Pulsar's round-robin dispatcher of Shared subscriptions, over a Rust core.

* ``SharedDispatcher``: consumers with permits and priority levels, round-robin turns of
  ``round_robin_batch`` messages, the replay queue first, redelivery counts, unacked limits.

Exclusive and Failover subscriptions use it too, with their one active consumer registered.
"""

from __future__ import annotations

from cursorkit.shared.dispatcher import ROUND_ROBIN_BATCH, SharedAckResult, SharedDispatcher, SharedStats

__all__ = ["ROUND_ROBIN_BATCH", "SharedAckResult", "SharedDispatcher", "SharedStats"]
