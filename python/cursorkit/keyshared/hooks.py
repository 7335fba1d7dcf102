"""What a dispatcher asks of its collaborators: a Key_Shared selector and a delayed-delivery tracker.

Both dispatchers (``KeySharedDispatcher``, ``cursorkit.shared.SharedDispatcher``) take these as
protocols, so any object with the methods qualifies (the library's selectors and trackers do).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["DelayedTracker", "Selector"]


class Selector(Protocol):
    """What the dispatcher needs of a selector (all three in ``cursorkit.keyshared`` qualify)."""

    def add_consumer(self, consumer: Any) -> Any:
        """Adds a consumer; returns the impact (``.removed``: consumer → ranges moved away)."""
        ...

    def remove_consumer(self, consumer: Any) -> Any:
        """Removes a consumer; returns the impact."""
        ...

    def select(self, slot: int) -> Any:
        """The consumer owning ``slot``, or None."""
        ...

    def select_many(self, slots: Any) -> Any:
        """Owner indices of many slots (-1: none), to be read through ``consumers_by_index``."""
        ...

    @property
    def consumers_by_index(self) -> tuple[Any, ...]:
        """Consumer of each index, with a final None for index -1."""
        ...


class DelayedTracker(Protocol):
    """The tracker hook: held messages are never dispatched before their time."""

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """True: the tracker holds it (do not dispatch now)."""
        ...

    def get_scheduled_messages(self, max_messages: int) -> Any:
        """Due messages as (ledger, entry) rows."""
        ...
