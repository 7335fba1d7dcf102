"""What the admin subscription operations do to a subscription: its cursor moved, its consumers told.

Every move is one of the library cursor's own operations (``skip``, ``clear_backlog``,
``ack_cumulative``, ``reset``, ``ack_batch_set``), each O(ledgers + ack ranges), whatever number a
client sent. A reset is the broker's SEEK: the dispatch forgets what it read, and the
subscription's consumers are closed (CLOSE_CONSUMER) and come back from the new position, as
Pulsar disconnects them on a reset. Skip, clear-backlog and expiry only move mark-delete forward
under the dispatch: consumers stay connected, what was queued or held below it is dropped as
acknowledged. :func:`made_durable` writes the cursors off the loop before a request is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cursorkit import Position
from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import encode_command

if TYPE_CHECKING:
    from cursorkit.broker.log import MessageLog
    from cursorkit.broker.server.broker import Broker
    from cursorkit.broker.server.subscription import Subscription

__all__ = [
    "MINIMUM_BACKLOG_FOR_EXPIRY_CHECK",
    "clear_backlog",
    "expire",
    "expire_to",
    "expiry_refused",
    "made_durable",
    "reset",
    "skip",
]

MINIMUM_BACKLOG_FOR_EXPIRY_CHECK = 1000
"""Pulsar's threshold: a subscription with consumers and a smaller backlog whose oldest message has
not expired is "almost caught up", and an expiry request for it is refused (409)."""


def skip(sub: Subscription, entries: int) -> None:
    """Acknowledges the next ``entries`` unacknowledged entries (a batch is one, as Pulsar skips)."""
    sub.cursor.skip(entries)
    sub.mark_delete_moved()


def clear_backlog(sub: Subscription) -> None:
    """Acknowledges everything up to the last entry; delayed messages are forgotten, as in Pulsar.

    An in-memory delayed tracker is cleared here; a bucket tracker (whose snapshots are files) is
    trimmed below mark-delete by the next flush, off the loop.
    """
    from cursorkit.delayed import InMemoryDelayedDeliveryTracker  # loaded with the subscription's topic

    sub.cursor.clear_backlog()
    if isinstance(sub.delayed, InMemoryDelayedDeliveryTracker):
        sub.delayed.clear()
    sub.mark_delete_moved()


def _before(log: MessageLog, position: Position) -> Position | None:
    """The entry just before ``position`` (None when none is held before it). O(ledgers)."""
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    last = None
    for ledger_id, entries in log.ledger_sizes().items():
        if ledger_id >= position.ledger_id:
            break
        if entries:
            last = Position(ledger_id, entries - 1)
    return last


def _first_kept(log: MessageLog, seconds: int, now_ms: int) -> Position | None:
    """The first entry an expiry of ``seconds`` keeps (published at or after now - seconds).

    None for 0 seconds: Pulsar expires nothing then. The log's running maximum of publish times
    makes every entry before it older than the cutoff.
    """
    if seconds == 0:
        return None
    return log.find_by_time(now_ms - seconds * 1000)


def expiry_refused(sub: Subscription, log: MessageLog, seconds: int, now_ms: int) -> bool:
    """Whether Pulsar refuses this expiry (409): no backlog, or consumers almost caught up.

    Almost caught up: consumers connected, a backlog under :data:`MINIMUM_BACKLOG_FOR_EXPIRY_CHECK`
    entries and its oldest entry not expired.
    """
    backlog = sub.cursor.backlog()
    if backlog == 0:
        return True
    if not sub.consumers or backlog >= MINIMUM_BACKLOG_FOR_EXPIRY_CHECK:
        return False
    kept = _first_kept(log, seconds, now_ms)
    oldest = sub.cursor.next_unacked(limit=1)
    if kept is None or not len(oldest):
        return True
    return not Position(int(oldest[0][0]), int(oldest[0][1])) < kept


def expire(sub: Subscription, log: MessageLog, seconds: int, now_ms: int) -> bool:
    """Mark-delete up to the last entry published more than ``seconds`` ago; whether it moved."""
    kept = _first_kept(log, seconds, now_ms)
    last = None if kept is None else _before(log, kept)
    if last is None or last <= sub.cursor.mark_delete_position:
        return False
    sub.cursor.ack_cumulative(last)
    sub.mark_delete_moved()
    return True


def expire_to(sub: Subscription, log: MessageLog, position: Position, *, excluded: bool) -> bool:
    """Mark-delete through ``position`` (up to the entry before it when ``excluded``); whether it moved.

    ``position`` is an entry the log holds or its end (then everything is expired).
    """
    last = _before(log, position) if excluded or position == log.end_position else position
    if last is None or last <= sub.cursor.mark_delete_position:
        return False
    sub.cursor.ack_cumulative(last)
    sub.mark_delete_moved()
    return True


def reset(
    broker: Broker, sub: Subscription, position: Position, batch: tuple[list[int], int] | None = None
) -> None:
    """The SEEK path: ``position`` is delivered next (with ``batch``, only the indexes it leaves set).

    ``batch`` is ``(ack_set words, batch size)`` of a reset into a batch. The subscription's
    consumers are closed and come back from there.
    """
    sub.seek(position)
    if batch is not None:
        words, size = batch
        sub.cursor.ack_batch_set(position, words, size)
    for c in list(sub.consumers):
        c.send(encode_command(commands.close_consumer(c.consumer_id, 0)))
    broker.reconnect_consumers(sub)


async def made_durable(subs: Sequence[Subscription]) -> None:
    """Writes the subscriptions' cursors to their stores, off the loop (readers' have none)."""

    def write() -> None:
        for sub in subs:
            sub.write_cursor()

    await asyncio.to_thread(write)
