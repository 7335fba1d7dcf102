"""Who may produce on a topic (``producer_access.py``), without a broker.

Pulsar's rules, one case each: Shared while exclusive access is held or awaited is ProducerBusy;
Exclusive beside anyone, or with an epoch older than the topic's, is ProducerFenced; WaitForExclusive
queues first come first served and takes the topic once it is free; ExclusiveWithFencing takes it
from everyone. Each exclusive grant moves the epoch on. Then a Hypothesis state machine against the
rules written plainly, checking that a refusal changes nothing.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursorkit.broker.server.producer_access import (
    EXCLUSIVE,
    EXCLUSIVE_WITH_FENCING,
    SHARED,
    WAIT_FOR_EXCLUSIVE,
    Handover,
    ProducerAccess,
)
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api


def admit(access: ProducerAccess[str], key: str, mode: int, epoch: int | None = None) -> int | None:
    """Decides and applies; the epoch answered (None while queued)."""
    decision = access.decide(key, mode, epoch)
    access.apply(decision)
    return None if decision.queued else decision.epoch


def refused(access: ProducerAccess[str], key: str, mode: int, epoch: int | None = None) -> int:
    """The server error ``key`` is refused with; checks that the refusal changed nothing."""
    before = copy.deepcopy(access)
    with pytest.raises(ProtocolError) as e:
        access.decide(key, mode, epoch)
    assert access == before
    assert e.value.server_error is not None
    return e.value.server_error


def test_shared_producers_share_and_leave_no_epoch() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    assert admit(access, "a", SHARED) is None
    assert admit(access, "b", SHARED) is None
    assert sorted(access.holders()) == ["a", "b"]
    assert access.leave("a") == Handover()
    assert access.holders() == ["b"]


def test_exclusive_holds_the_topic_alone() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    assert admit(access, "x", EXCLUSIVE) == 0
    assert refused(access, "s", SHARED) == api.ProducerBusy
    assert refused(access, "y", EXCLUSIVE) == api.ProducerFenced
    access.leave("x")
    assert admit(access, "s", SHARED) == 0  # a Shared producer is told the topic's epoch
    access.leave("s")
    assert admit(access, "y", EXCLUSIVE) == 1


def test_exclusive_is_fenced_beside_shared_producers() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "s", SHARED)
    assert refused(access, "x", EXCLUSIVE) == api.ProducerFenced


def test_an_older_epoch_is_fenced_and_a_returning_one_keeps_its_own() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "a", EXCLUSIVE)
    access.leave("a")
    admit(access, "b", EXCLUSIVE)
    access.leave("b")
    assert access.epoch == 1
    for mode in (EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING):
        assert refused(access, "a", mode, epoch=0) == api.ProducerFenced
    assert admit(access, "b", EXCLUSIVE, epoch=1) == 1
    access.leave("b")
    assert admit(access, "c", EXCLUSIVE, epoch=7) == 7  # a reopened topic learns its epoch back


def test_waiters_queue_in_order_and_take_the_topic_once_it_is_free() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "x", EXCLUSIVE)
    assert admit(access, "w1", WAIT_FOR_EXCLUSIVE) is None
    assert admit(access, "w2", WAIT_FOR_EXCLUSIVE) is None
    assert access.waiting == ["w1", "w2"]
    assert refused(access, "s", SHARED) == api.ProducerBusy
    assert access.leave("x") == Handover(("w1", 1))
    assert access.exclusive == "w1"
    assert access.leave("w1") == Handover(("w2", 2))
    assert access.leave("w2") == Handover()
    assert admit(access, "s", SHARED) == 2


def test_a_waiter_that_gives_up_leaves_no_trace() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "x", EXCLUSIVE)
    admit(access, "w", WAIT_FOR_EXCLUSIVE)
    assert access.leave("w") == Handover()
    assert access.leave("x") == Handover()
    assert access.holders() == []
    assert admit(access, "s", SHARED) == 0


def test_a_waiter_behind_shared_producers_gets_the_topic_when_the_last_leaves() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "s1", SHARED)
    admit(access, "s2", SHARED)
    admit(access, "w", WAIT_FOR_EXCLUSIVE)
    assert refused(access, "s3", SHARED) == api.ProducerBusy
    assert refused(access, "x", EXCLUSIVE) == api.ProducerFenced
    assert access.leave("s1") == Handover()
    assert access.leave("s2") == Handover(("w", 0))


def test_a_waiter_whose_epoch_fell_behind_is_fenced_when_its_turn_comes() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "x", EXCLUSIVE)  # epoch 0
    admit(access, "old", WAIT_FOR_EXCLUSIVE, epoch=0)
    admit(access, "w", WAIT_FOR_EXCLUSIVE)
    access.leave("x")  # "old" came back with epoch 0: still current, so it takes the topic
    assert access.exclusive == "old"
    assert access.epoch == 0
    admit(access, "late", WAIT_FOR_EXCLUSIVE, epoch=0)
    assert access.leave("old") == Handover(("w", 1))
    assert access.leave("w") == Handover(None, ("late",))  # epoch 0 < 1: superseded while it waited


def test_fencing_takes_the_topic_from_holders_and_waiters() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "x", EXCLUSIVE)
    admit(access, "w", WAIT_FOR_EXCLUSIVE)
    decision = access.decide("f", EXCLUSIVE_WITH_FENCING)
    assert (decision.fenced, decision.fenced_waiting, decision.epoch) == (("x",), ("w",), 1)
    access.apply(decision)
    assert access.holders() == ["f"]
    assert access.waiting == []
    assert access.leave("x") == Handover()  # the fenced one's close, arriving later, changes nothing
    assert access.exclusive == "f"


def test_fencing_shared_producers() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "s1", SHARED)
    admit(access, "s2", SHARED)
    decision = access.decide("f", EXCLUSIVE_WITH_FENCING)
    assert sorted(decision.fenced) == ["s1", "s2"]
    access.apply(decision)
    assert access.holders() == ["f"]


def test_a_key_cannot_ask_twice_and_an_unknown_mode_is_refused() -> None:
    access: ProducerAccess[str] = ProducerAccess()
    admit(access, "a", SHARED)
    assert refused(access, "a", SHARED) == api.ProducerBusy
    assert refused(access, "b", 9) == api.NotAllowedError


_KEYS = st.sampled_from("abcdef")
_MODES = st.sampled_from([SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING])
_EPOCHS = st.none() | st.integers(0, 6)


class AccessMachine(RuleBasedStateMachine):
    """Requests and leaves in any order against the rules written plainly."""

    def __init__(self) -> None:
        super().__init__()
        self.access: ProducerAccess[str] = ProducerAccess()
        self.shared: set[str] = set()
        self.exclusive: str | None = None
        self.waiting: list[tuple[str, int | None]] = []
        self.epoch: int | None = None

    def _older(self, epoch: int | None) -> bool:
        return epoch is not None and self.epoch is not None and epoch < self.epoch

    def _grant(self, key: str, epoch: int | None) -> int:
        self.exclusive = key
        self.epoch = epoch if epoch is not None else (0 if self.epoch is None else self.epoch + 1)
        return self.epoch

    def _expected(self, key: str, mode: int, epoch: int | None) -> tuple[str, int | None]:
        """The model's answer: ("refused", code), ("queued", None) or ("granted", epoch)."""
        if key in self.shared or key == self.exclusive or key in [k for k, _ in self.waiting]:
            return "refused", api.ProducerBusy
        held = bool(self.shared) or self.exclusive is not None
        if mode == SHARED:
            if self.exclusive is not None or self.waiting:
                return "refused", api.ProducerBusy
            self.shared.add(key)
            return "granted", self.epoch
        if self._older(epoch):
            return "refused", api.ProducerFenced
        if mode == EXCLUSIVE:
            if held or self.waiting:
                return "refused", api.ProducerFenced
            return "granted", self._grant(key, epoch)
        if mode == WAIT_FOR_EXCLUSIVE:
            if held:
                self.waiting.append((key, epoch))
                return "queued", None
            return "granted", self._grant(key, epoch)
        self.shared.clear()
        self.waiting.clear()
        return "granted", self._grant(key, epoch)

    @rule(key=_KEYS, mode=_MODES, epoch=_EPOCHS)
    def ask(self, key: str, mode: int, epoch: int | None) -> None:
        outcome, value = self._expected(key, mode, epoch)
        if outcome == "refused":
            assert refused(self.access, key, mode, epoch) == value
        else:
            assert admit(self.access, key, mode, epoch) == value

    @rule(key=_KEYS)
    def leave(self, key: str) -> None:
        handover = self.access.leave(key)
        waiting = [k for k, _ in self.waiting]
        if key in waiting:
            self.waiting.pop(waiting.index(key))
            assert handover == Handover()
            return
        self.shared.discard(key)
        if self.exclusive == key:
            self.exclusive = None
        if self.shared or self.exclusive is not None:
            assert handover == Handover()
            return
        fenced = []
        while self.waiting:
            first, epoch = self.waiting.pop(0)
            if self._older(epoch):
                fenced.append(first)
                continue
            assert handover == Handover((first, self._grant(first, epoch)), tuple(fenced))
            return
        assert handover == Handover(None, tuple(fenced))

    @invariant()
    def same_state(self) -> None:
        assert sorted(self.access.holders()) == sorted(
            self.shared | ({self.exclusive} if self.exclusive else set())
        )
        assert self.access.exclusive == self.exclusive
        assert self.access.waiting == [k for k, _ in self.waiting]
        assert self.access.epoch == self.epoch

    @invariant()
    def exclusive_means_alone_and_waiters_mean_held(self) -> None:
        held = self.access.holders()
        assert self.access.exclusive is None or held == [self.access.exclusive]
        assert not self.access.waiting or held


TestAccessMachine = AccessMachine.TestCase
