"""Key_Shared stats: Pulsar 4's figures, why each hash is blocked, and the beyond-Pulsar figures.

Per subscription and consumer, plus key-ordered nacks and stuck-consumer isolation;
``subscription_stats`` reads them all from a dispatcher's Rust core in one pass.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cursorkit._core import DispatchCore, Position

Mode = Literal["draining", "last-sent", "out-of-order"]


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why a hash could not be dispatched at the last attempt (beyond Pulsar's stats)."""

    reason: Literal[
        "no-consumer",
        "no-permits",
        "draining",
        "recently-joined",
        "replay-order",
        "look-ahead",
        "key-unacked-limit",
        "key-order",
        "spilled",
    ]
    """``key-unacked-limit``: the key has ``max_unacked_per_key`` messages unacknowledged;
    ``key-order`` (key-ordered nacks): the consumer has yet to answer an earlier message of the key
    (a later one's ack waits for it) or copies of the key taken back from it at a nack; ``spilled``
    (stuck-consumer isolation): the key's entries are dropped from memory until they are re-read."""
    consumer: str | None = None
    """The target consumer's name."""
    owner: str | None = None
    """For ``draining``: the consumer the hash is draining on."""
    position: Position | None = None
    """The first position held back."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerStats:
    """One consumer's figures, named after Pulsar 4's consumer stats."""

    name: str
    available_permits: int
    unacked_messages: int
    msg_out_counter: int
    draining_hashes_count: int
    draining_hashes_cleared_total: int
    draining_hashes_unacked_messages: int
    draining_hashes: list[tuple[int, int, int]]
    """``(hash, unacked messages, blocked attempts)`` per hash draining on this consumer."""
    last_sent_position_when_joining: str | None
    key_hash_ranges: list[tuple[int, int]]
    """Pulsar's ``keyHashRangeArrays``: the merged inclusive slot ranges this consumer owns."""
    stuck: bool = False
    """Marked stuck by stuck-consumer isolation (beyond Pulsar)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionStats:
    """The subscription's Key_Shared figures plus why each blocked hash is blocked."""

    mode: Mode
    consumers: list[ConsumerStats]
    replay_size: int
    look_ahead_limit: int
    last_sent_position: str | None
    individually_sent_positions: str
    consumers_after_mark_delete_position: dict[str, str]
    blocked_on_ack_state_persistent: bool
    blocked: dict[int, Blocked]
    """Per hash held back at the last dispatch: why, and on whom."""
    read_blocked: str | None
    """Why the last ``should_read()`` said no: ``paused``, ``look-ahead`` or ``no-permits`` (None: yes)."""
    unblocked_events: int
    replay_dropped_acked: int = 0
    """Positions dropped on their way to or from the replay queue because the cursor had acknowledged
    them (Pulsar drops them when adding to replay at or below mark-delete, and when a replay read
    returns them); such a position is never sent again, whichever way it came back."""
    draining_hashes_count: int = 0
    """Sum over the consumers, as Pulsar's subscription stats add them up (likewise the next two)."""
    draining_hashes_cleared_total: int = 0
    draining_hashes_unacked_messages: int = 0
    key_order: KeyOrderStats | None = None
    """Key-ordered nacks' figures (None: off, as in Pulsar)."""
    isolation: IsolationStats | None = None
    """Stuck-consumer isolation's figures (None: off, as in Pulsar)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IsolationStats:
    """Stuck-consumer isolation (beyond Pulsar): who is stuck, what is spilled, and totals."""

    stuck_consumers: list[str]
    spilled_keys: int
    """Sticky-key slots whose entries are spilled (shown as ``spilled`` in ``blocked``)."""
    span: tuple[Position, Position] | None
    """Positions to read again for them (first, last), or None."""
    spilled: int
    """Entries dropped from memory, in total."""
    brought_back: int
    """Entries brought back by re-reads, in total."""
    read_back: int
    """Spilled entries re-reads found, in total: at most one per spill."""
    memory_bytes: int
    """Heap bytes isolation holds: a slot bitmap and two positions per spilled slot."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyOrderStats:
    """Key-ordered nacks (beyond Pulsar): what waits now, and totals."""

    parked_acks: int
    """Acks waiting for an earlier message of their key."""
    held_keys: int
    """(consumer, key) pairs held (shown as ``key-order`` in ``blocked``)."""
    unanswered_copies: int
    """Copies taken back at a nack that their consumer has not answered yet."""
    taken_back: int
    """Messages taken back behind a nacked message of their key, in total."""
    stale_answers: int
    """Answers to taken-back copies dropped, in total."""
    parked_dropped: int
    """Parked acks dropped because the earlier message was nacked, in total."""


def subscription_stats(
    core: DispatchCore,
    selector: Any,
    consumers: Sequence[tuple[Hashable, str, int]],
    *,
    mode: Mode,
    look_ahead_limit: int,
    blocked_on_ack_state_persistent: bool,
    read_blocked: str | None,
    isolating: bool,
) -> SubscriptionStats:
    """The stats of a subscription whose consumers are ``(consumer, name, core id)``."""
    ranges_of = getattr(selector, "consumer_key_hash_ranges", None)
    ranges: dict[Any, list[tuple[int, int]]] = ranges_of() if callable(ranges_of) else {}
    cleared = core.draining_cleared()
    per: dict[int, list[tuple[int, int, int]]] = {}
    for h, owner, refs, blocked in core.draining_hashes().tolist():
        per.setdefault(owner, []).append((h, refs, blocked))
    figures = []
    for consumer, name, cid in consumers:
        permits, unacked, delivered, joined, _, stuck = core.consumer_figures(cid)
        mine = per.get(cid, [])
        figures.append(
            ConsumerStats(
                name=name,
                available_permits=permits,
                unacked_messages=unacked,
                msg_out_counter=delivered,
                draining_hashes_count=len(mine),
                draining_hashes_cleared_total=cleared.get(cid, 0),
                draining_hashes_unacked_messages=sum(r for _, r, _ in mine),
                draining_hashes=sorted(mine),
                last_sent_position_when_joining=str(joined) if joined is not None else None,
                key_hash_ranges=list(ranges.get(consumer, [])),
                stuck=stuck,
            )
        )
    name_of = {cid: name for _, name, cid in consumers}
    last_sent = core.last_sent_position()
    return SubscriptionStats(
        mode=mode,
        consumers=figures,
        replay_size=core.replay_len(),
        look_ahead_limit=look_ahead_limit,
        last_sent_position=str(last_sent) if last_sent is not None else None,
        individually_sent_positions=core.individually_sent(),
        consumers_after_mark_delete_position={
            name_of[c]: str(j) for c, j in core.recently_joined() if c in name_of
        },
        blocked_on_ack_state_persistent=blocked_on_ack_state_persistent,
        blocked={
            slot: Blocked(
                reason,  # type: ignore[arg-type]
                consumer=name_of.get(c) if c is not None else None,
                owner=name_of.get(o) if o is not None else None,
                position=pos,
            )
            for slot, reason, c, o, pos in core.blocked()
        },
        read_blocked=read_blocked,
        unblocked_events=core.unblocked_events(),
        replay_dropped_acked=core.replay_dropped_acked(),
        draining_hashes_count=sum(c.draining_hashes_count for c in figures),
        draining_hashes_cleared_total=sum(c.draining_hashes_cleared_total for c in figures),
        draining_hashes_unacked_messages=sum(c.draining_hashes_unacked_messages for c in figures),
        key_order=_key_order_stats(core) if core.key_ordered_nacks() else None,
        isolation=_isolation_stats(core, figures) if isolating else None,
    )


def _isolation_stats(core: DispatchCore, consumers: list[ConsumerStats]) -> IsolationStats:
    _, slots, span, spilled, back, read_back, memory = core.isolation_figures()
    return IsolationStats(
        stuck_consumers=[c.name for c in consumers if c.stuck],
        spilled_keys=slots,
        span=span,
        spilled=spilled,
        brought_back=back,
        read_back=read_back,
        memory_bytes=memory,
    )


def _key_order_stats(core: DispatchCore) -> KeyOrderStats:
    parked, held, unanswered, taken_back, stale, dropped = core.key_order_figures()
    return KeyOrderStats(
        parked_acks=parked,
        held_keys=held,
        unanswered_copies=unanswered,
        taken_back=taken_back,
        stale_answers=stale,
        parked_dropped=dropped,
    )
