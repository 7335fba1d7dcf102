"""Who may produce on a topic: Pulsar's producer access modes and the topic epoch.

Shared producers share the topic. An Exclusive one holds it alone and is refused (ProducerFenced)
while anyone else produces or waits. WaitForExclusive ones queue, first come first served, while
the topic is held, and the first of them gets it once every producer has left. An
ExclusiveWithFencing one takes it at once: the producers holding it are closed and those waiting are
refused. Each exclusive grant moves the topic's epoch on (to the epoch a returning producer brings
back, else one past the last); a producer bringing back an epoch older than the topic's was
superseded while it was away, and gets ProducerFenced. A Shared producer meets ProducerBusy while the
topic is held or awaited exclusively.

Bookkeeping only, no I/O: :meth:`ProducerAccess.decide` weighs a request without changing anything
(so a refused one leaves no trace), :meth:`ProducerAccess.apply` commits it, and
:meth:`ProducerAccess.leave` says which waiter, if any, takes the topic next. The epoch lives in
memory: a topic reopened (after a restart, an idle close or a move to another broker) starts
without one, and the first exclusive producer sets it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["Decision", "Handover", "ProducerAccess"]

K = TypeVar("K", bound=Hashable)

SHARED = api.Shared
EXCLUSIVE = api.Exclusive
WAIT_FOR_EXCLUSIVE = api.WaitForExclusive
EXCLUSIVE_WITH_FENCING = api.ExclusiveWithFencing


@dataclass(frozen=True, slots=True)
class Decision(Generic[K]):
    """What admitting one producer does: join now, or queue; and whom it fences."""

    key: K
    mode: int
    queued: bool
    """Whether it waits for the topic (its first answer says ``producer_ready=false``)."""
    epoch: int | None
    """The topic's epoch once applied (the one to answer with when not queued)."""
    requested_epoch: int | None
    """The epoch the producer brought back, kept while it waits."""
    fenced: tuple[K, ...] = ()
    """Producers on the topic that must be closed (ExclusiveWithFencing)."""
    fenced_waiting: tuple[K, ...] = ()
    """Waiters whose request must be refused with ProducerFenced (ExclusiveWithFencing)."""


@dataclass(frozen=True, slots=True)
class Handover(Generic[K]):
    """Who takes the topic after a producer left: at most one waiter, and the waiters fenced on the way."""

    granted: tuple[K, int] | None = None
    """The waiter now holding the topic, and the topic's new epoch."""
    fenced: tuple[K, ...] = ()
    """Waiters skipped because the epoch they brought back is older than the topic's."""


def _fenced_epoch(current: int | None, requested: int | None) -> ProtocolError | None:
    """ProducerFenced when ``requested`` is older than the topic's epoch (its holder was superseded)."""
    if requested is not None and current is not None and requested < current:
        return ProtocolError(
            f"the topic's epoch moved on to {current} since this producer's ({requested})",
            server_error=api.ProducerFenced,
        )
    return None


@dataclass(slots=True)
class ProducerAccess(Generic[K]):
    """The access state of one topic: its producers, its exclusive holder, its waiters, its epoch."""

    epoch: int | None = None
    """The epoch of the last exclusive grant (None: never held exclusively since the topic opened)."""
    _shared: set[K] = field(default_factory=set)
    _exclusive: K | None = None
    _waiting: dict[K, int | None] = field(default_factory=dict)
    """Waiters in arrival order, each with the epoch it brought back."""

    @property
    def exclusive(self) -> K | None:
        """The producer holding the topic exclusively, if any."""
        return self._exclusive

    @property
    def waiting(self) -> list[K]:
        """The waiters, first to be granted first."""
        return list(self._waiting)

    @property
    def waiting_count(self) -> int:
        """How many producers wait for the topic."""
        return len(self._waiting)

    def holders(self) -> list[K]:
        """Every producer on the topic (the waiters are not on it yet)."""
        held = list(self._shared)
        if self._exclusive is not None:
            held.append(self._exclusive)
        return held

    def holds(self, key: K) -> bool:
        """Whether ``key`` is on the topic."""
        return key == self._exclusive or key in self._shared

    def decide(self, key: K, mode: int, epoch: int | None = None) -> Decision[K]:
        """Weighs a producer asking for the topic in ``mode``; changes nothing.

        Raises ProtocolError with ProducerBusy (Shared while exclusive access is held or awaited) or
        ProducerFenced (Exclusive while the topic has producers or waiters; an epoch older than the
        topic's).
        """
        if key in self._waiting or self.holds(key):
            raise ProtocolError(
                f"producer {key!r} already asked for this topic", server_error=api.ProducerBusy
            )
        held = bool(self._shared) or self._exclusive is not None
        if mode == SHARED:
            if self._exclusive is not None or self._waiting:
                raise ProtocolError(
                    "the topic has an exclusive producer, or one waiting for it",
                    server_error=api.ProducerBusy,
                )
            return Decision(key, mode, queued=False, epoch=self.epoch, requested_epoch=epoch)
        stale = _fenced_epoch(self.epoch, epoch)
        if mode == EXCLUSIVE:
            if self._exclusive is not None or self._waiting:
                raise ProtocolError("the topic has an exclusive producer", server_error=api.ProducerFenced)
            if held:
                raise ProtocolError("the topic has shared producers", server_error=api.ProducerFenced)
            if stale is not None:
                raise stale
            return Decision(key, mode, queued=False, epoch=self._next(epoch), requested_epoch=epoch)
        if mode == WAIT_FOR_EXCLUSIVE:
            if stale is not None:
                raise stale
            if held:
                return Decision(key, mode, queued=True, epoch=self.epoch, requested_epoch=epoch)
            return Decision(key, mode, queued=False, epoch=self._next(epoch), requested_epoch=epoch)
        if mode == EXCLUSIVE_WITH_FENCING:
            if stale is not None:  # refused before fencing anyone: a stale producer takes nothing
                raise stale
            return Decision(
                key,
                mode,
                queued=False,
                epoch=self._next(epoch),
                requested_epoch=epoch,
                fenced=tuple(self.holders()),
                fenced_waiting=tuple(self._waiting),
            )
        raise ProtocolError(f"unknown producer access mode {mode}", server_error=api.NotAllowedError)

    def _next(self, requested: int | None) -> int:
        """The epoch of a new exclusive grant: the one brought back, else one past the topic's."""
        if requested is not None:
            return requested
        return 0 if self.epoch is None else self.epoch + 1

    def apply(self, decision: Decision[K]) -> None:
        """Commits what :meth:`decide` weighed (the fenced are gone; the producer joins or queues)."""
        key = decision.key
        for gone in decision.fenced:
            self._shared.discard(gone)
            if self._exclusive == gone:
                self._exclusive = None
        for gone in decision.fenced_waiting:
            self._waiting.pop(gone, None)
        if decision.queued:
            self._waiting[key] = decision.requested_epoch
        elif decision.mode == SHARED:
            self._shared.add(key)
        else:
            self._exclusive = key
            self.epoch = decision.epoch

    def leave(self, key: K) -> Handover[K]:
        """``key`` left (a producer closed, or a waiter gave up); a free topic goes to its first waiter."""
        if key in self._waiting:
            del self._waiting[key]
            return Handover()
        if self._exclusive == key:
            self._exclusive = None
        else:
            self._shared.discard(key)
        if self._shared or self._exclusive is not None:
            return Handover()
        fenced = []
        while self._waiting:
            first, requested = next(iter(self._waiting.items()))
            del self._waiting[first]
            if _fenced_epoch(self.epoch, requested) is not None:
                fenced.append(first)
                continue
            self._exclusive = first
            self.epoch = self._next(requested)
            return Handover((first, self.epoch), tuple(fenced))
        return Handover(None, tuple(fenced))
