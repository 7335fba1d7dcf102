"""The subscription's dispatch models, one class each behind :class:`DispatchModel`.

Exclusive and Failover: one active consumer (:class:`SingleActive`); Shared: round-robin over
permits (:class:`SharedModel`); Key_Shared: each key to one consumer (:class:`KeySharedModel`).
A subscription holds one model while it has consumers; a new type or option touches one file.
"""

from __future__ import annotations

from cursorkit.broker.server.dispatch.choice import model_for
from cursorkit.broker.server.dispatch.key_shared import KeySharedModel
from cursorkit.broker.server.dispatch.model import DispatchModel, Feed
from cursorkit.broker.server.dispatch.shared import SharedModel
from cursorkit.broker.server.dispatch.single_active import SingleActive

__all__ = ["DispatchModel", "Feed", "KeySharedModel", "SharedModel", "SingleActive", "model_for"]
