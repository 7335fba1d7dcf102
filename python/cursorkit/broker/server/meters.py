"""What the broker counts for its stats: messages and bytes in and out, and who its clients are.

A :class:`Meter` is a few integers bumped once per group of entries (a group commit, a dispatch
round's frames to one consumer): no Python runs per message. Its rates are worked out when someone
asks (``/stats``, ``/metrics``), from the counts at the reading before last: Pulsar recomputes its
rates every stats interval; here a rate covers the time since the reading before last, at least
:data:`RATE_WINDOW_S` (or since the meter was made, when that is shorter), and costs nothing while
nobody reads it. :class:`Peer` and :class:`Publisher` hold what Pulsar's stats show of a client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

__all__ = ["RATE_WINDOW_S", "Meter", "Peer", "Publisher", "iso_time"]

RATE_WINDOW_S = 1.0
"""The shortest time a rate is averaged over (a reading sooner than this reuses the last window)."""

_DATA = itemgetter(0)
_MESSAGES = itemgetter(2)


def iso_time(epoch_ms: float) -> str:
    """Pulsar's timestamp strings (Java's ISO instant, UTC): ``2025-10-25T09:03:39.018Z``.

    The fraction is written in groups of three digits, as far as it is not zero (none at all for a
    whole second, as in ``1970-01-01T00:00:00Z``).
    """
    at = datetime.fromtimestamp(epoch_ms / 1000.0, UTC)
    micro = at.microsecond
    fraction = "" if not micro else f".{micro // 1000:03d}" if not micro % 1000 else f".{micro:06d}"
    return at.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


class Meter:
    """Messages, entries and bytes counted on one path, with the last time something was counted."""

    __slots__ = ("bytes", "entries", "last_ms", "messages", "_marks")

    def __init__(self) -> None:
        self.messages = 0
        self.entries = 0
        self.bytes = 0
        self.last_ms = 0
        """Wall-clock time (ms) of the last count; 0 before the first."""
        now = time.monotonic()
        self._marks = ((now, 0, 0), (now, 0, 0))
        """``(time, messages, bytes)`` at the reading before last and at the last one."""

    def add(self, messages: int, entries: int, size: int) -> None:
        """Counts one group: ``messages`` in ``entries`` entries of ``size`` bytes."""
        self.messages += messages
        self.entries += entries
        self.bytes += size
        self.last_ms = time.time_ns() // 1_000_000

    def add_rows(self, rows: Sequence[tuple[bytes, int, int]]) -> None:
        """Counts stored rows ``(data, publish time, messages)``: the sums run at C level."""
        self.add(sum(map(_MESSAGES, rows)), len(rows), sum(map(len, map(_DATA, rows))))

    def rates(self, now: float | None = None) -> tuple[float, float]:
        """Messages and bytes per second since the reading before last (``now``: ``time.monotonic()``)."""
        now = time.monotonic() if now is None else now
        older, newer = self._marks
        if now - newer[0] >= RATE_WINDOW_S:
            older, newer = newer, (now, self.messages, self.bytes)
            self._marks = (older, newer)
        span = now - older[0]
        if span <= 0:
            return 0.0, 0.0
        return (self.messages - older[1]) / span, (self.bytes - older[2]) / span


@dataclass(frozen=True, slots=True)
class Peer:
    """A producer's or consumer's client, as Pulsar's stats show it."""

    address: str = ""
    """``/host:port`` of its connection."""
    client_version: str = ""
    connected_since: str = ""
    """When the producer or consumer was made (:func:`iso_time`)."""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def now(cls, address: str, client_version: str, pairs: Iterable[Any] = ()) -> Peer:
        """A peer made now; ``pairs``: the command's ``KeyValue`` metadata (bounded by the command's size)."""
        metadata = {str(p.key): str(p.value) for p in pairs}
        return cls(address, client_version, iso_time(time.time_ns() / 1_000_000), metadata)


@dataclass(slots=True, eq=False)
class Publisher:
    """One producer on a topic: its id on its connection, name, access mode, client and what it sent."""

    producer_id: int
    name: str
    access_mode: str
    """Pulsar's name of its access mode (``Shared``, ``Exclusive``, ``WaitForExclusive``...)."""
    peer: Peer
    meter: Meter = field(default_factory=Meter)
