"""What one client may cost the broker: connections per address, buffered bytes, topic loads, log lines.

Every limit here has a default in :class:`~cursorkit.broker.server.config.BrokerConfig` and a flag of
``cursorkit broker``; the reference guide's "Limits" table lists them. A client past a limit gets
Pulsar's answer for it (``NotAllowedError`` before its CONNECT, ``ServiceNotReady`` for a topic load
it must retry) and the broker logs one line per limit and interval, however often it is hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Admission", "Buffers", "Descriptors", "TokenBucket", "Warnings"]

log = logging.getLogger("cursorkit.broker")


@dataclass(slots=True)
class TokenBucket:
    """``rate`` events a second on average, ``burst`` at once: a load that would exceed it is refused."""

    rate: float
    burst: float
    _tokens: float = field(init=False)
    _at: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = self.burst
        self._at = time.monotonic()

    def take(self) -> bool:
        """Spends one token if there is one (refilled at ``rate`` since the last call)."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class Warnings:
    """One log line per kind of limit and ``interval`` seconds; the lines held back are counted in it."""

    def __init__(self, interval: float = 10.0) -> None:
        self._interval = interval
        self._last: dict[str, float] = {}
        self._held: Counter[str] = Counter()

    def warn(self, kind: str, message: str, *args: object) -> None:
        """Logs ``message`` unless ``kind`` was logged less than ``interval`` seconds ago."""
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._held[kind] += 1
            return
        held = self._held.pop(kind, 0)
        self._last[kind] = now
        suffix = f" ({held} more since the last such line)" if held else ""
        log.warning(message + suffix, *args)


class Admission:
    """Counts connections, in total and per peer address, against ``max_total`` and ``max_per_address``."""

    def __init__(self, max_total: int, max_per_address: int) -> None:
        self.max_total = max_total
        self.max_per_address = max_per_address
        self.total = 0
        self._by_address: Counter[str] = Counter()

    def admit(self, address: str) -> str | None:
        """Counts a new connection from ``address``; or why it is refused (Pulsar's wording), uncounted."""
        if self.max_total and self.total >= self.max_total:
            return f"Reached the maximum number of connections ({self.max_total})"
        if self.max_per_address and self._by_address[address] >= self.max_per_address:
            return f"Reached the maximum number of connections on address {address} ({self.max_per_address})"
        self.total += 1
        self._by_address[address] += 1
        return None

    def release(self, address: str) -> None:
        """A counted connection closed."""
        self.total -= 1
        left = self._by_address[address] - 1
        if left > 0:
            self._by_address[address] = left
        else:
            del self._by_address[address]


class Buffers:
    """Bytes held by every connection's unfinished frame, against ``max_total``.

    A connection whose unfinished frame holds more than ``free`` bytes waits to read more while the
    total is past ``max_total`` (until others finish theirs, or its frame's deadline closes it); one
    holding less always reads, so the total can pass the cap by at most ``free`` per connection.
    """

    def __init__(self, max_total: int, free: int) -> None:
        self.max_total = max_total
        self.free = free
        self.total = 0
        self._freed = asyncio.Event()

    def update(self, before: int, after: int) -> None:
        """A connection's unfinished frame went from ``before`` to ``after`` bytes."""
        self.total += after - before
        if after < before:
            self._freed.set()

    def must_wait(self, held: int) -> bool:
        """Whether a connection holding ``held`` bytes of an unfinished frame waits before reading."""
        return held > self.free and self.total > self.max_total

    async def wait(self, timeout: float) -> None:
        """Until some connection frees bytes, or ``timeout`` seconds."""
        self._freed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._freed.wait(), timeout)


class Descriptors:
    """The process's file descriptors against its limit (raised to the hard limit at start).

    Topics hold two, subscriptions three, connections one: past ``share`` of the limit the broker
    closes idle topics before opening more, and refuses what it cannot make room for.
    """

    def __init__(self) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))

    @property
    def limit(self) -> int:
        """The soft limit in force (read each time: an operator may change it with ``prlimit``)."""
        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])

    def in_use(self) -> int:
        """Descriptors open now (0 where the system does not tell)."""
        try:
            return len(os.listdir("/proc/self/fd"))
        except OSError:
            return 0

    def short(self, share: float) -> bool:
        """Whether more than ``share`` of the limit is in use."""
        return self.in_use() > share * self.limit
