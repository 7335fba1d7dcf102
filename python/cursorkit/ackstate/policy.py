"""PIP-299: pause dispatching new entries while a cursor's ack state cannot be fully persisted.

Enabled per broker, namespace or topic (topic > namespace > broker, as Pulsar's policies resolve).
Only multi-consumer dispatchers (Shared, Key_Shared) pause, and only reads of *new* entries:
replays keep flowing, so the acks that shrink the state can still arrive. Every check is O(1): it
reads the cursor's range count, batch count or compact-size estimate, all kept incrementally.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from cursorkit.ackstate.cursor import Cursor
from cursorkit.errors import InvalidArgument

SubscriptionType = Literal["Exclusive", "Failover", "Shared", "Key_Shared"]
SUBSCRIPTION_TYPES: tuple[SubscriptionType, ...] = ("Exclusive", "Failover", "Shared", "Key_Shared")
PAUSABLE_TYPES = frozenset({"Shared", "Key_Shared"})
"""Pulsar pauses only its multi-consumer dispatchers; Exclusive and Failover never pause."""

DEFAULT_MAX_ACK_STATE_BYTES = 5 * 1024 * 1024
"""The byte budget PIP-299 first proposed (``maxPerCursorMetadataSizeInBytes``)."""

LimitKind = Literal["ranges", "bytes"]


class DispatchPausePolicy:
    """``dispatcherPauseOnAckStatePersistentEnabled`` and the paused flag of one dispatcher.

    The limit is Pulsar's: ranges beyond the cursor's ``max_unacked_ranges_to_persist`` (partial
    batches beyond ``max_batch_deleted_index_to_persist`` count too). With ``limit="bytes"`` it is
    the compact encoding's estimated size against ``max_ack_state_bytes``, for stores that persist
    the compact form, where the range count no longer decides what fits.
    """

    def __init__(
        self,
        broker: bool = False,
        namespace: bool | None = None,
        topic: bool | None = None,
        *,
        limit: LimitKind = "ranges",
        max_ack_state_bytes: int = DEFAULT_MAX_ACK_STATE_BYTES,
        on_resume: Callable[[], None] | None = None,
    ) -> None:
        if limit not in ("ranges", "bytes"):
            raise InvalidArgument(f"limit must be 'ranges' or 'bytes', got {limit!r}")
        if isinstance(max_ack_state_bytes, bool) or not isinstance(max_ack_state_bytes, int):
            raise InvalidArgument(f"max_ack_state_bytes must be an int, got {max_ack_state_bytes!r}")
        if max_ack_state_bytes <= 0:
            raise InvalidArgument(f"max_ack_state_bytes must be positive, got {max_ack_state_bytes}")
        self._broker = _broker_flag(broker)
        self._namespace = _flag(namespace, "namespace", optional=True)
        self._topic = _flag(topic, "topic", optional=True)
        self.limit: LimitKind = limit
        self.max_ack_state_bytes = max_ack_state_bytes
        self.on_resume = on_resume
        self._paused = False
        self._lock = threading.Lock()
        self.pauses = 0
        """Times dispatch was paused."""
        self.resumes = 0
        """Times dispatch resumed."""
        self.checks_acks = self.enabled
        """Whether an ack, or a read check, needs a look at the cursor: the feature is on or the
        dispatcher is paused. A plain attribute, kept current, so a dispatcher reads it per event
        without a call (Pulsar #22729: no O(ranges) work while the feature is off)."""

    @property
    def enabled(self) -> bool:
        """The effective setting: the topic's if set, else the namespace's, else the broker's."""
        if self._topic is not None:
            return self._topic
        if self._namespace is not None:
            return self._namespace
        return self._broker

    def set_broker(self, enabled: bool) -> None:
        """Sets the broker-wide default (dynamic, as Pulsar's broker.conf entry)."""
        self._broker = _broker_flag(enabled)
        self.checks_acks = self._paused or self.enabled

    def set_namespace(self, enabled: bool | None) -> None:
        """Sets (``None``: removes) the namespace policy."""
        self._namespace = _flag(enabled, "namespace", optional=True)
        self.checks_acks = self._paused or self.enabled

    def set_topic(self, enabled: bool | None) -> None:
        """Sets (``None``: removes) the topic policy."""
        self._topic = _flag(enabled, "topic", optional=True)
        self.checks_acks = self._paused or self.enabled

    @property
    def blocked_on_ack_state_persistent(self) -> bool:
        """True only while the feature is enabled and this dispatcher is paused."""
        return self._paused and self.enabled

    def over_limit(self, cursor: Cursor) -> bool:
        """Whether the cursor's ack state is beyond what this policy lets be persisted (O(1))."""
        if self.limit == "bytes":
            return cursor.compact_size_estimate() > self.max_ack_state_bytes
        return not cursor.is_fully_persistable()

    def should_pause(self, cursor: Cursor, subscription_type: str, *, replay: bool = False) -> bool:
        """Whether a read of new entries must wait; replays and non-shared types never wait."""
        kind = _subscription_type(subscription_type)
        if replay or kind not in PAUSABLE_TYPES:
            return False
        self._update(cursor)
        return self._paused

    def after_ack(self, cursor: Cursor, subscription_type: str) -> bool:
        """Re-checks after an ack, skip, clear-backlog, seek or reset; True when dispatch resumed.

        When the feature is off and the dispatcher is not paused nothing is checked (Pulsar #22729).
        """
        kind = _subscription_type(subscription_type)
        if kind not in PAUSABLE_TYPES or (not self._paused and not self.enabled):
            return False
        return self._update(cursor)

    def _update(self, cursor: Cursor) -> bool:
        """Flips the paused flag to match the cursor; returns True when it resumed."""
        pause = self.enabled and self.over_limit(cursor)
        with self._lock:
            if pause == self._paused:
                return False
            self._paused = pause
            self.checks_acks = pause or self.enabled
            if pause:
                self.pauses += 1
                return False
            self.resumes += 1
        if self.on_resume is not None:
            self.on_resume()
        return True


def _broker_flag(value: bool) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"broker setting must be a bool, got {value!r}")
    return value


def _flag(value: bool | None, name: str, *, optional: bool) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} setting must be a bool or None, got {value!r}")
    return value


def _subscription_type(value: str) -> SubscriptionType:
    for known in SUBSCRIPTION_TYPES:
        if value == known:
            return known
    raise InvalidArgument(
        f"unknown subscription type {value!r}; expected one of {', '.join(SUBSCRIPTION_TYPES)}"
    )
