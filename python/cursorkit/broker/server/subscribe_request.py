"""What a SUBSCRIBE asks for, read and checked before anything is made for it.

Durable or not, where a non-durable cursor starts (a message id, Pulsar's earliest or latest
sentinel, a rollback by publish time), and Key_Shared's mode and sticky hash ranges. Anything the
broker would refuse is refused here, so a refused SUBSCRIBE leaves no subscription behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from cursorkit import Position
from cursorkit.ackstate.starts import EARLIEST, LATEST, Start, start_of
from cursorkit.broker.server.names import subscription_name
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["MAX_STICKY_RANGES", "SubscribeRequest"]

MAX_STICKY_RANGES = 1024
"""The most hash ranges one STICKY consumer may claim (each is checked against every other)."""
_MAX_ROLLBACK_S = 100 * 365 * 86_400
"""A rollback longer than a century is read as "from the earliest" (it cannot overflow the clock)."""


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    """One SUBSCRIBE, checked: Pulsar's naming rules, the start of a reader, sticky ranges."""

    name: str
    sub_type: int
    durable: bool
    initial: Start
    """Where a new subscription starts when no start message applies (``initialPosition``)."""
    start: Position | Start | None
    """A non-durable subscription's ``start_message_id`` (None: from ``initial``)."""
    rollback_ms: int
    """``start_message_rollback_duration_sec`` in ms (0: none)."""
    sticky: bool
    ranges: tuple[tuple[int, int], ...]
    """A STICKY consumer's inclusive hash ranges, sorted; empty otherwise."""
    out_of_order: bool

    @classmethod
    def read(cls, q: api.CommandSubscribe) -> SubscribeRequest:
        """Reads and checks ``q``; a refusal raises ``ProtocolError`` with Pulsar's server error."""
        name = subscription_name(q.subscription)
        durable = not q.HasField("durable") or q.durable
        earliest = q.HasField("initialPosition") and q.initialPosition == api.CommandSubscribe.Earliest
        start: Position | Start | None = None
        if not durable and q.HasField("start_message_id"):
            start = start_of(q.start_message_id.ledgerId, q.start_message_id.entryId)
            if isinstance(start, Position) and start.entry_id >= 0:
                # As Pulsar does: the start entry itself is delivered again and the client drops
                # what precedes its start (inclusive or not; batch indexes too).
                start = Position(start.ledger_id, start.entry_id - 1)
        rollback = (
            q.start_message_rollback_duration_sec if q.HasField("start_message_rollback_duration_sec") else 0
        )
        sticky, unordered = False, False
        ranges: tuple[tuple[int, int], ...] = ()
        if q.subType == api.CommandSubscribe.Key_Shared and q.HasField("keySharedMeta"):
            meta = q.keySharedMeta
            sticky = meta.keySharedMode == api.STICKY
            unordered = meta.allowOutOfOrderDelivery
            if sticky:
                ranges = _sticky_ranges(meta)
        return cls(
            name=name,
            sub_type=q.subType,
            durable=durable,
            initial=EARLIEST if earliest else LATEST,
            start=start,
            rollback_ms=min(max(rollback, 0), _MAX_ROLLBACK_S) * 1000,
            sticky=sticky,
            ranges=ranges,
            out_of_order=unordered,
        )


def _sticky_ranges(meta: api.KeySharedMeta) -> tuple[tuple[int, int], ...]:
    """A STICKY consumer's ranges, refused (``ConsumerAssignError``) when none, reversed or overlapping."""
    if not meta.hashRanges:
        raise ProtocolError(
            "a STICKY Key_Shared consumer must name its hash ranges", server_error=api.ConsumerAssignError
        )
    if len(meta.hashRanges) > MAX_STICKY_RANGES:
        raise ProtocolError(
            f"a STICKY consumer may claim at most {MAX_STICKY_RANGES} hash ranges",
            server_error=api.ConsumerAssignError,
        )
    ranges = sorted((r.start, r.end) for r in meta.hashRanges)
    for start, end in ranges:
        # As Pulsar: a range must not be reversed; a part past the hash space is never selected.
        if start < 0 or start > end:
            raise ProtocolError(
                f"hash range [{start}, {end}] is reversed or negative", server_error=api.ConsumerAssignError
            )
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        if start <= end:
            raise ProtocolError(
                f"the consumer's own hash ranges overlap at {start}", server_error=api.ConsumerAssignError
            )
    return tuple(ranges)
