"""DispatchPausePolicy (PIP-299): precedence, who pauses, when it resumes, the byte limit, bad input."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import Cursor, DispatchPausePolicy, PersistLimits, Position
from cursorkit.errors import InvalidArgument

PAUSABLE = ("Shared", "Key_Shared")
NEVER_PAUSE = ("Exclusive", "Failover")
LIMIT = 5


def holes_cursor(ranges: int) -> Cursor:
    """Ledger 1 of 100 entries with ``ranges`` acked odd entries 1, 3, 5, … (one range each)."""
    c = Cursor(Position(1, -1), ledger_sizes={1: 100, 2: 10}, max_unacked_ranges_to_persist=LIMIT)
    odd = list(range(1, 2 * ranges, 2))
    c.ack_many([1] * len(odd), odd)
    assert c.non_contiguous_deleted_ranges == ranges
    return c


class Resumes:
    """An on_resume callback that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


class Untouchable:
    """A cursor stand-in that fails the test if the policy reads anything from it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the policy read cursor.{name}")


# ---------------------------------------------------------------------------------------------------
# Precedence: topic > namespace > broker


@pytest.mark.parametrize(
    ("broker", "namespace", "topic", "effective"),
    [
        (False, None, None, False),
        (True, None, None, True),
        (False, True, None, True),
        (True, False, None, False),
        (False, None, True, True),
        (True, True, False, False),
    ],
)
def test_precedence_table(broker: bool, namespace: bool | None, topic: bool | None, effective: bool) -> None:
    """AckStatePausePolicyTest's cases, given at construction and set at runtime."""
    assert DispatchPausePolicy(broker, namespace, topic).enabled is effective
    p = DispatchPausePolicy()
    p.set_broker(broker)
    p.set_namespace(namespace)
    p.set_topic(topic)
    assert p.enabled is effective
    # The effective value decides pausing.
    c = holes_cursor(LIMIT + 1)
    assert p.should_pause(c, "Shared") is effective
    assert p.blocked_on_ack_state_persistent is effective


def test_set_and_remove_at_runtime() -> None:
    p = DispatchPausePolicy()
    assert p.enabled is False  # dispatcherPauseOnAckStatePersistentEnabled defaults to false
    p.set_topic(True)
    assert p.enabled is True
    p.set_namespace(False)
    assert p.enabled is True  # the topic policy still wins
    p.set_topic(None)
    assert p.enabled is False  # removed: the namespace policy applies
    p.set_broker(True)
    assert p.enabled is False
    p.set_namespace(None)
    assert p.enabled is True  # both removed: the broker setting applies
    p.set_topic(False)
    assert p.enabled is False
    p.set_topic(None)
    p.set_broker(False)
    assert p.enabled is False


# ---------------------------------------------------------------------------------------------------
# Who pauses, and when


@pytest.mark.parametrize("kind", PAUSABLE)
def test_shared_types_pause_beyond_the_range_limit(kind: str) -> None:
    p = DispatchPausePolicy(broker=True)
    c = holes_cursor(LIMIT)
    assert c.limits.max_unacked_ranges_to_persist == LIMIT
    assert not p.should_pause(c, kind)  # exactly at the limit: fully persistable
    assert not p.after_ack(c, kind)
    assert not p.blocked_on_ack_state_persistent
    c.ack(Position(1, 2 * LIMIT + 1))  # one more hole
    assert p.should_pause(c, kind)
    assert p.blocked_on_ack_state_persistent
    assert p.should_pause(c, kind)  # stays paused; counted once
    assert (p.pauses, p.resumes) == (1, 0)


@pytest.mark.parametrize("kind", PAUSABLE)
def test_after_ack_pauses_too(kind: str) -> None:
    """Pulsar's afterAckMessages sets the flag as soon as an ack goes over the limit."""
    p = DispatchPausePolicy(broker=True)
    c = holes_cursor(LIMIT + 1)
    assert not p.after_ack(c, kind)  # it paused: not a resume
    assert p.blocked_on_ack_state_persistent and p.pauses == 1


@pytest.mark.parametrize("kind", NEVER_PAUSE)
def test_exclusive_and_failover_never_pause(kind: str) -> None:
    p = DispatchPausePolicy(broker=True, namespace=True, topic=True)
    c = holes_cursor(3 * LIMIT)
    assert not p.should_pause(c, kind)
    assert not p.after_ack(c, kind)
    assert not p.blocked_on_ack_state_persistent and p.pauses == 0


@pytest.mark.parametrize("kind", NEVER_PAUSE)
def test_non_shared_types_do_not_touch_the_cursor(kind: str) -> None:
    p = DispatchPausePolicy(broker=True)
    assert not p.should_pause(Untouchable(), kind)  # type: ignore[arg-type]
    assert not p.after_ack(Untouchable(), kind)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", PAUSABLE)
def test_replay_reads_never_pause(kind: str) -> None:
    p = DispatchPausePolicy(broker=True)
    c = holes_cursor(LIMIT + 3)
    assert not p.should_pause(c, kind, replay=True)
    assert p.should_pause(c, kind)  # a read of new entries waits
    assert not p.should_pause(c, kind, replay=True)  # redeliveries still flow while paused
    assert p.blocked_on_ack_state_persistent


@pytest.mark.parametrize("kind", PAUSABLE)
def test_disabled_never_pauses(kind: str) -> None:
    p = DispatchPausePolicy(broker=False)
    c = holes_cursor(LIMIT + 10)
    assert not p.should_pause(c, kind)
    assert not p.after_ack(c, kind)
    assert not p.blocked_on_ack_state_persistent
    assert p.pauses == 0
    p2 = DispatchPausePolicy(broker=True, topic=False)
    assert not p2.should_pause(c, kind) and not p2.blocked_on_ack_state_persistent


def test_disabled_and_not_paused_after_ack_does_nothing() -> None:
    """Pulsar #22729: with the feature off and no pause the check (O(ranges) there) is skipped."""
    for p in (DispatchPausePolicy(), DispatchPausePolicy(broker=True, namespace=False)):
        for kind in PAUSABLE:
            assert not p.after_ack(Untouchable(), kind)  # type: ignore[arg-type]
        assert (p.pauses, p.resumes) == (0, 0)


def test_partial_batches_beyond_their_limit_pause() -> None:
    """Partial batches that a persist would cut count as not persistable (Pulsar #26499)."""
    c = Cursor(Position(1, -1), limits=PersistLimits(max_batch_deleted_index_to_persist=2))
    for e in (0, 1):
        c.ack_batch_index(Position(1, e), 0, 3)
    p = DispatchPausePolicy(broker=True, on_resume=(resumes := Resumes()))
    assert not p.should_pause(c, "Shared")
    c.ack_batch_index(Position(1, 2), 0, 3)
    assert p.should_pause(c, "Shared")
    c.ack(Position(1, 2))  # the whole entry acked: its batch goes
    assert p.after_ack(c, "Shared") and resumes.calls == 1


# ---------------------------------------------------------------------------------------------------
# Resuming


def _ack_fills_a_hole(c: Cursor) -> None:
    c.ack(Position(1, 2))  # (1:0..1:1] and (1:2..1:3] merge


def _skip(c: Cursor) -> None:
    assert c.skip(1) == 1  # acks 1:0: mark-delete rolls over 1:1


def _clear_backlog(c: Cursor) -> None:
    assert c.clear_backlog()


def _seek(c: Cursor) -> None:
    c.seek(Position(1, 0))


def _reset(c: Cursor) -> None:
    c.reset(Position(2, 0))


def _cumulative(c: Cursor) -> None:
    c.ack_cumulative(Position(1, 4))


@pytest.mark.parametrize("kind", PAUSABLE)
@pytest.mark.parametrize("change", [_ack_fills_a_hole, _skip, _clear_backlog, _seek, _reset, _cumulative])
def test_resumes_when_back_under_the_limit(kind: str, change: Callable[[Cursor], None]) -> None:
    resumes = Resumes()
    p = DispatchPausePolicy(broker=True, on_resume=resumes)
    c = holes_cursor(LIMIT + 1)
    assert p.should_pause(c, kind)
    c.ack(Position(1, 50))  # another hole: still paused, no resume
    assert c.non_contiguous_deleted_ranges == LIMIT + 2
    assert not p.after_ack(c, kind) and resumes.calls == 0
    c.ack(Position(1, 51))  # extends a range, no new one: still over
    assert not p.after_ack(c, kind)
    c.ack(Position(1, 4))  # merges two ranges: fewer, still over
    assert c.non_contiguous_deleted_ranges == LIMIT + 1
    assert not p.after_ack(c, kind) and p.blocked_on_ack_state_persistent
    change(c)
    assert c.non_contiguous_deleted_ranges <= LIMIT
    assert p.after_ack(c, kind)
    assert resumes.calls == 1
    assert not p.blocked_on_ack_state_persistent
    assert not p.after_ack(c, kind)  # already resumed: no second callback
    assert not p.should_pause(c, kind)
    assert resumes.calls == 1 and (p.pauses, p.resumes) == (1, 1)


@pytest.mark.parametrize("recheck", ["after_ack", "should_pause"])
@pytest.mark.parametrize("disable", ["broker", "namespace", "topic"])
def test_disabling_while_paused_resumes_on_next_check(recheck: str, disable: str) -> None:
    resumes = Resumes()
    p = DispatchPausePolicy(broker=True, on_resume=resumes)
    c = holes_cursor(LIMIT + 4)
    assert p.should_pause(c, "Key_Shared")
    getattr(p, f"set_{disable}")(False)
    assert not p.enabled
    assert not p.blocked_on_ack_state_persistent  # the stat is false while the feature is off
    assert resumes.calls == 0  # nothing resumes until the dispatcher checks again
    if recheck == "after_ack":
        assert p.after_ack(c, "Key_Shared")
    else:
        assert not p.should_pause(c, "Key_Shared")
    assert resumes.calls == 1 and p.resumes == 1
    assert not p.after_ack(c, "Key_Shared")
    # Enabled again with the state still over the limit: pauses again.
    getattr(p, f"set_{disable}")(None if disable != "broker" else True)
    assert p.should_pause(c, "Key_Shared") and p.pauses == 2


def test_resume_without_callback_and_counter() -> None:
    p = DispatchPausePolicy(topic=True)
    c = holes_cursor(LIMIT + 1)
    assert p.should_pause(c, "Shared")
    c.ack(Position(1, 0))
    assert p.after_ack(c, "Shared")
    assert (p.pauses, p.resumes) == (1, 1)


# ---------------------------------------------------------------------------------------------------
# limit="bytes"


@pytest.mark.parametrize("kind", PAUSABLE)
def test_byte_limit_pauses_on_the_compact_estimate(kind: str) -> None:
    c = holes_cursor(3 * LIMIT)  # far beyond the range limit: irrelevant with limit="bytes"
    budget = c.compact_size_estimate()
    resumes = Resumes()
    p = DispatchPausePolicy(broker=True, limit="bytes", max_ack_state_bytes=budget, on_resume=resumes)
    assert not p.should_pause(c, kind)  # at the budget: not over it
    c.ack(Position(1, 60))  # one more range
    assert c.compact_size_estimate() > budget
    assert p.should_pause(c, kind) and p.blocked_on_ack_state_persistent
    c.ack(Position(1, 59))  # (1:58..1:60]: still one range more
    assert not p.after_ack(c, kind)
    c.ack(Position(1, 2))  # merges two ranges: back at the budget
    assert c.compact_size_estimate() <= budget
    assert p.after_ack(c, kind) and resumes.calls == 1
    assert not p.should_pause(c, kind)
    # The range policy on the same cursor would pause.
    assert DispatchPausePolicy(broker=True).should_pause(c, kind)


def test_byte_limit_counts_partial_batches() -> None:
    c = Cursor(Position(1, -1))
    p = DispatchPausePolicy(broker=True, limit="bytes", max_ack_state_bytes=c.compact_size_estimate() + 100)
    c.ack_batch_index(Position(1, 5), 0, 2000)  # 2000 indexes: 250 bytes of words
    assert p.should_pause(c, "Shared")
    c.ack(Position(1, 5))
    assert p.after_ack(c, "Shared")


LEDGER_IDS = st.sampled_from([0, 1, 2, 9, 3_000_000]) | st.integers(0, 2**40)
ENTRIES = st.integers(0, 65_535)
BATCH_SIZES = st.sampled_from([2, 3, 8, 9, 64, 65, 100, 1000, 5000])


@st.composite
def estimate_cursors(draw: st.DrawFn) -> Cursor:
    """Cursors over ledgers of fewer than 65,536 entries, in every roaring container shape."""
    ledgers = draw(st.lists(LEDGER_IDS, min_size=1, max_size=6, unique=True))
    start = min(ledgers)
    c = Cursor(Position(start, draw(st.sampled_from([-1, 0, 100]))))
    for ledger in ledgers:
        shape = draw(st.sampled_from(["scattered", "stride", "runs", "dense", "none"]))
        if shape == "scattered":
            es = draw(st.lists(ENTRIES, max_size=300))
        elif shape == "stride":
            first, stride = draw(ENTRIES), draw(st.sampled_from([2, 3, 5, 64, 1000]))
            es = list(range(first, 65_536, stride))[: draw(st.integers(1, 40_000))]
        elif shape == "runs":
            first, run, gap = draw(ENTRIES), draw(st.integers(1, 20)), draw(st.integers(1, 20))
            count = draw(st.integers(1, 3000))
            es = [
                e for k in range(count) for e in range(first + k * (run + gap), first + k * (run + gap) + run)
            ]
            es = [e for e in es if e < 65_536]
        elif shape == "dense":
            first = draw(ENTRIES)
            es = list(range(first, min(65_536, first + draw(st.integers(1, 65_536)))))
        else:
            es = []
        if es:
            c.ack_many(np.full(len(es), ledger, dtype=np.int64), np.array(es, dtype=np.int64))
    for _ in range(draw(st.integers(0, 30))):
        ledger, entry, size = draw(st.sampled_from(ledgers)), draw(ENTRIES), draw(BATCH_SIZES)
        index = draw(st.integers(0, size - 1))
        if (known := c.batch(Position(ledger, entry))) is None or known[0] == size:
            c.ack_batch_index(Position(ledger, entry), index, size)
    if draw(st.booleans()):
        c.ack_cumulative(Position(draw(st.sampled_from(ledgers)), draw(ENTRIES)))
    return c


@given(estimate_cursors())
def test_compact_estimate_bounds_the_encoding(c: Cursor) -> None:
    """compact_size_estimate() is an upper estimate of the compact form for ledgers below 65,536 entries."""
    assert c.compact_size_estimate() >= len(c.encode("compact"))


def test_compact_estimate_bounds_the_encoding_for_huge_ledger_ids() -> None:
    ledger = 2**62
    c = Cursor(Position(ledger, -1))
    for i in range(200):
        c.ack_batch_index(Position(ledger, 60_000 + 2 * i), 0, 2)
    assert c.compact_size_estimate() >= len(c.encode("compact"))


# ---------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("kind", ["shared", "KeyShared", "Key-Shared", "", None, 1, "Exclusive "])
def test_unknown_subscription_type(kind: object) -> None:
    p = DispatchPausePolicy(broker=True)
    c = holes_cursor(1)
    with pytest.raises(InvalidArgument, match="subscription type"):
        p.should_pause(c, kind)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="subscription type"):
        p.after_ack(c, kind)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="subscription type"):
        p.should_pause(c, kind, replay=True)  # type: ignore[arg-type]
    # also when the feature is off
    with pytest.raises(InvalidArgument, match="subscription type"):
        DispatchPausePolicy().after_ack(c, kind)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1, 0, "true", "false", 1.0, [True]])
def test_settings_must_be_bools(value: object) -> None:
    with pytest.raises(InvalidArgument):
        DispatchPausePolicy(broker=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        DispatchPausePolicy(namespace=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        DispatchPausePolicy(topic=value)  # type: ignore[arg-type]
    p = DispatchPausePolicy(broker=True, namespace=False, topic=True)
    for setter in (p.set_broker, p.set_namespace, p.set_topic):
        with pytest.raises(InvalidArgument):
            setter(value)  # type: ignore[arg-type]
    assert (p._broker, p._namespace, p._topic) == (True, False, True)  # a refused set changes nothing


def test_broker_setting_cannot_be_removed() -> None:
    with pytest.raises(InvalidArgument):
        DispatchPausePolicy(broker=None)  # type: ignore[arg-type]
    p = DispatchPausePolicy(broker=True)
    with pytest.raises(InvalidArgument):
        p.set_broker(None)  # type: ignore[arg-type]
    assert p.enabled


@pytest.mark.parametrize("limit", ["entries", "Ranges", "", None, 5])
def test_bad_limit_kind(limit: object) -> None:
    with pytest.raises(InvalidArgument, match="limit"):
        DispatchPausePolicy(limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [0, -1, True, 1.5, "5MB", None])
def test_bad_byte_budget(budget: object) -> None:
    with pytest.raises(InvalidArgument, match="max_ack_state_bytes"):
        DispatchPausePolicy(limit="bytes", max_ack_state_bytes=budget)  # type: ignore[arg-type]


def test_defaults() -> None:
    p = DispatchPausePolicy()
    assert (p.enabled, p.limit, p.max_ack_state_bytes, p.on_resume) == (
        False,
        "ranges",
        5 * 1024 * 1024,
        None,
    )
    assert not p.blocked_on_ack_state_persistent and (p.pauses, p.resumes) == (0, 0)
