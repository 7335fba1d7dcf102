"""The delayed-delivery timing contract, checked after every step against a model of every tracked index.

A broker dispatches when ``has_message_available()`` and otherwise arms a timer for
``next_delivery_time()``; if either lags, delivery stalls. So after *every* step (adds, including
into ledgers already sealed into buckets; clock moves, including exactly onto the next deliver-at;
``get_scheduled_messages(n)`` for every small ``n``, so batches end exactly on segment ends; seals,
merges, trims, clears, restarts with and without the persisted tail) the tracker's readiness, next
time, count, ``contains_message`` and delivery order must equal the model's. Segments go down to one
index and one millisecond. CI runs a bounded profile; ``make fuzz`` the long one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cursorkit import Position
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    FileCursorProperties,
    SharedDelayedIndex,
)
from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, parse_bucket_key
from cursorkit.proto import delayed_bucket_pb2 as pb
from fuzz_budget import runs

pytestmark = pytest.mark.fuzz

Pos = tuple[int, int]
SUBS = ("a", "b", "c")


class TopicModel:
    """Every tracked position with its deliver-at, and the bucket tracker's add and delivery rules."""

    def __init__(self, tick: int, strict: bool) -> None:
        self.tick = tick
        self.strict = strict
        self.at: dict[Pos, int] = {}
        self.mark_delete: Pos | None = None
        self.deliver_at: dict[Pos, int] = {}
        """A message's deliver-at is its own: the first time drawn for a position is kept for good."""

    def time_of(self, pos: Pos, drawn: int) -> int:
        return self.deliver_at.setdefault(pos, drawn)

    def cutoff(self, now: int) -> int:
        return now if self.strict else now + self.tick

    def add(self, pos: Pos, at: int, now: int) -> bool:
        if at < 0 or at <= self.cutoff(now):
            self.at.pop(pos, None)  # a due re-add untracks (Pulsar's newer rule)
            return False
        if self.mark_delete is not None and pos <= self.mark_delete:
            return False
        self.at.setdefault(pos, at)
        return True

    def due(self, now: int, n: int) -> list[Pos]:
        order = sorted((at, pos) for pos, at in self.at.items() if at <= self.cutoff(now))
        taken = [pos for _, pos in order[:n]]
        for pos in taken:
            del self.at[pos]
        return sorted(taken)

    def has(self, now: int) -> bool:
        return any(at <= self.cutoff(now) for at in self.at.values())

    def next_time(self) -> int | None:
        return min(self.at.values(), default=None)

    def trim(self, md: Pos) -> None:
        self.mark_delete = md
        for pos in [p for p in self.at if p <= md]:
            del self.at[pos]


def positions_of(blobs: list[bytes]) -> dict[Pos, int]:
    """Positions and deliver-at of encoded segments, read with the generated protobuf classes."""
    out: dict[Pos, int] = {}
    for blob in blobs:
        for ix in pb.SnapshotSegment.FromString(blob).indexes:
            out[(ix.ledger_id, ix.entry_id)] = ix.timestamp
    return out


def recoverable(directory: Path, cutoff: int, md: Pos | None) -> dict[Pos, int]:
    """What a restart must track, by Pulsar's rule.

    Every recorded bucket from its first segment not wholly due at recovery, plus the persisted
    tail, less what mark-delete covers.
    """
    props = FileCursorProperties(directory / "cursor.props")
    out: dict[Pos, int] = {}
    with FileBucketSnapshotStorage(directory / "snapshots") as storage:
        for key, value in sorted(props.items()):
            sid = int(value)
            if key == MUTABLE_TAIL_PROPERTY:
                n = len(storage.get_bucket_snapshot_metadata(sid).metadata_list)
                out.update(positions_of(storage.get_bucket_snapshot_segment(sid, 1, n)))
                continue
            if parse_bucket_key(key) is None:
                continue
            segments = storage.get_bucket_snapshot_metadata(sid).metadata_list
            skip = 0
            while skip < len(segments) and segments[skip].max_schedule_timestamp <= cutoff:
                skip += 1
            if skip < len(segments):
                out.update(positions_of(storage.get_bucket_snapshot_segment(sid, skip + 1, len(segments))))
    return {p: at for p, at in out.items() if md is None or p > md}


CONFIGS: dict[str, Any] = {
    "tick": st.sampled_from([0, 1, 5, 10]),
    "strict": st.booleans(),
    "min_count": st.sampled_from([1, 2, 3, 6]),
    "step": st.sampled_from([1, 2, 5, 40]),
    "max_idx": st.sampled_from([-1, 1, 2, 3]),
    "max_buckets": st.sampled_from([-1, 1, 2, 3]),
}


class BucketContract(RuleBasedStateMachine):
    """A bucket tracker (inline jobs, so every interleaving is reproducible) against ``TopicModel``."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ck-contract-"))
        self.now = 1_000
        self.ledger = 1
        self.model = TopicModel(0, True)
        self.settings: dict[str, Any] = {}
        self.tracker: BucketDelayedDeliveryTracker | None = None

    @initialize(persist_tail=st.booleans(), **CONFIGS)
    def configure(
        self,
        tick: int,
        strict: bool,
        min_count: int,
        step: int,
        max_idx: int,
        max_buckets: int,
        persist_tail: bool,
    ) -> None:
        self.model = TopicModel(tick, strict)
        self.settings = {
            "tick_time_ms": tick,
            "strict": strict,
            "min_index_count_per_bucket": min_count,
            "max_time_step_per_segment_ms": step,
            "max_indexes_per_segment": max_idx,
            "max_num_buckets": max_buckets,
            "persist_mutable_tail": persist_tail,
        }
        self.tracker = self.open()

    def open(self) -> BucketDelayedDeliveryTracker:
        md = self.model.mark_delete
        return BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(self.dir / "snapshots"),
            FileCursorProperties(self.dir / "cursor.props"),
            clock=lambda: self.now,
            background=False,
            mark_delete=Position(*md) if md is not None else None,
            **self.settings,
        )

    @property
    def t(self) -> BucketDelayedDeliveryTracker:
        assert self.tracker is not None
        return self.tracker

    def teardown(self) -> None:
        if self.tracker is not None:
            self.tracker.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def pick_ledger(self, back: int, new: bool) -> int:
        if new:
            self.ledger += 1
            return self.ledger
        return max(1, self.ledger - back)

    @rule(back=st.integers(0, 4), new=st.booleans(), entry=st.integers(0, 12), delay=st.integers(-3, 60))
    def add(self, back: int, new: bool, entry: int, delay: int) -> None:
        pos = (self.pick_ledger(back, new), entry)
        at = self.model.time_of(pos, self.now + delay)
        assert self.t.add_message(*pos, at) == self.model.add(pos, at, self.now)

    @rule(
        back=st.integers(0, 4),
        new=st.booleans(),
        delays=st.lists(st.integers(-3, 60), min_size=1, max_size=8),
    )
    def add_many(self, back: int, new: bool, delays: list[int]) -> None:
        ledger = self.pick_ledger(back, new)
        entries = list(range(20, 20 + len(delays)))
        ats = [self.model.time_of((ledger, e), self.now + d) for e, d in zip(entries, delays, strict=True)]
        want = [self.model.add((ledger, e), a, self.now) for e, a in zip(entries, ats, strict=True)]
        got = self.t.add_many(np.full(len(ats), ledger), np.array(entries), np.array(ats))
        assert got.tolist() == want

    @rule(dt=st.integers(0, 25))
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule()
    def advance_to_next(self) -> None:
        """Moves the clock to the moment the next message falls due, as a timer would."""
        nxt = self.t.next_delivery_time()
        if nxt is not None:
            self.now = max(self.now, nxt - (0 if self.model.strict else self.model.tick))

    @rule(n=st.integers(0, 6))
    def get(self, n: int) -> None:
        got = [tuple(r) for r in self.t.get_scheduled_messages(n).tolist()]
        assert got == self.model.due(self.now, n)

    @rule()
    def maintenance(self) -> None:
        self.t.maintenance()

    @precondition(lambda self: self.model.at)
    @rule(data=st.data())
    def trim(self, data: st.DataObject) -> None:
        pos = data.draw(st.sampled_from(sorted(self.model.at)))
        self.model.trim(pos)
        self.t.trim(Position(*pos))

    @rule(tick=st.sampled_from([0, 1, 5, 10]))
    def reset_tick_time(self, tick: int) -> None:
        self.t.reset_tick_time(tick)
        self.model.tick = tick

    @rule()
    def clear(self) -> None:
        self.t.clear()
        self.model.at.clear()

    @rule()
    def restart(self) -> None:
        """Close and recover: the model keeps exactly what Pulsar's recovery rule brings back."""
        self.t.close()
        self.model.tick = self.settings["tick_time_ms"]  # a policy change lives until the restart
        expected = recoverable(self.dir, self.model.cutoff(self.now), self.model.mark_delete)
        for pos, at in expected.items():
            assert self.model.deliver_at[pos] == at, f"{pos} persisted with another deliver-at"
        self.tracker = self.open()
        assert not self.t.recovery_report.damaged
        self.model.at = expected

    @rule()
    def replay(self) -> None:
        """The dispatcher re-reads everything after mark-delete (as after a restart)."""
        for pos, at in sorted(self.model.deliver_at.items()):
            assert self.t.add_message(*pos, at) == self.model.add(pos, at, self.now)

    @invariant()
    def contract(self) -> None:
        if self.tracker is None:
            return
        t, m = self.t, self.model
        assert t.number_of_delayed_messages == len(m.at)
        assert t.next_delivery_time() == m.next_time()
        assert t.has_message_available() == m.has(self.now)
        for pos in m.deliver_at:
            assert t.contains_message(*pos) == (pos in m.at), pos


BucketContract.TestCase.settings = settings(
    max_examples=runs(150, 10_000), stateful_step_count=runs(40, 80), deadline=None
)
TestBucketContract = BucketContract.TestCase


class SharedModel:
    """The topic model plus, per subscription, its watermark and the due messages owed to it (FIFO)."""

    def __init__(self, topic: TopicModel) -> None:
        self.topic = topic
        self.watermark: dict[str, Pos] = dict.fromkeys(SUBS, (-1, -1))
        self.owed: dict[str, list[Pos]] = {s: [] for s in SUBS}

    def pull(self, now: int) -> None:
        due = self.topic.due(now, 2**62)
        for s in SUBS:
            self.owed[s].extend(p for p in due if p <= self.watermark[s])

    def add(self, sub: str, pos: Pos, at: int, now: int) -> bool:
        was = pos in self.topic.at
        tracked = self.topic.add(pos, at, now)
        if was and not tracked:  # fell due as this subscription re-read it: the others get it
            for s in SUBS:
                if s != sub and pos <= self.watermark[s]:
                    self.owed[s].append(pos)
        self.watermark[sub] = max(self.watermark[sub], pos)
        return tracked

    def get(self, sub: str, n: int, now: int) -> list[Pos]:
        self.pull(now)
        taken, self.owed[sub] = self.owed[sub][:n], self.owed[sub][n:]
        return sorted(taken)


class SharedContract(RuleBasedStateMachine):
    """``SharedDelayedIndex`` over a bucket tracker: the contract holds per subscription."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ck-shared-contract-"))
        self.now = 1_000
        self.ledger = 1
        self.model = SharedModel(TopicModel(0, True))
        self.index: SharedDelayedIndex | None = None

    @initialize(**CONFIGS)
    def configure(
        self, tick: int, strict: bool, min_count: int, step: int, max_idx: int, max_buckets: int
    ) -> None:
        self.model = SharedModel(TopicModel(tick, strict))
        tracker = BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(self.dir / "snapshots"),
            {},
            clock=lambda: self.now,
            background=False,
            tick_time_ms=tick,
            strict=strict,
            min_index_count_per_bucket=min_count,
            max_time_step_per_segment_ms=step,
            max_indexes_per_segment=max_idx,
            max_num_buckets=max_buckets,
        )
        self.index = SharedDelayedIndex(tracker)

    @property
    def ix(self) -> SharedDelayedIndex:
        assert self.index is not None
        return self.index

    def teardown(self) -> None:
        if self.index is not None:
            self.index.tracker.close()  # type: ignore[attr-defined]
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        sub=st.sampled_from(SUBS),
        back=st.integers(0, 3),
        new=st.booleans(),
        entry=st.integers(0, 8),
        delay=st.integers(-3, 50),
    )
    def add(self, sub: str, back: int, new: bool, entry: int, delay: int) -> None:
        if new:
            self.ledger += 1
        pos = (self.ledger if new else max(1, self.ledger - back), entry)
        at = self.model.topic.time_of(pos, self.now + delay)
        got = self.ix.subscription(sub).add_message(*pos, at)
        assert got == self.model.add(sub, pos, at, self.now)

    @rule(sub=st.sampled_from(SUBS), delays=st.lists(st.integers(-3, 50), min_size=1, max_size=6))
    def add_many(self, sub: str, delays: list[int]) -> None:
        self.ledger += 1
        pos = [(self.ledger, e) for e in range(len(delays))]
        ats = [self.model.topic.time_of(p, self.now + d) for p, d in zip(pos, delays, strict=True)]
        self.model.pull(self.now)
        want = [self.model.add(sub, p, a, self.now) for p, a in zip(pos, ats, strict=True)]
        got = self.ix.subscription(sub).add_many(
            np.array([p[0] for p in pos]), np.array([p[1] for p in pos]), np.array(ats)
        )
        assert got.tolist() == want

    @rule(dt=st.integers(0, 20))
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule(sub=st.sampled_from(SUBS), n=st.integers(0, 5))
    def get(self, sub: str, n: int) -> None:
        got = [tuple(r) for r in self.ix.subscription(sub).get_scheduled_messages(n).tolist()]
        assert got == self.model.get(sub, n, self.now)

    @rule()
    def maintenance(self) -> None:
        self.ix.tracker.maintenance()  # type: ignore[attr-defined]

    @invariant()
    def contract(self) -> None:
        if self.index is None:
            return
        m = self.model
        m.pull(self.now)
        topic_next = m.topic.next_time()
        for s in SUBS:
            view = self.ix.subscription(s)
            owed = bool(m.owed[s])
            assert view.has_message_available() == owed
            assert view.number_of_delayed_messages == len(m.topic.at) + len(m.owed[s])
            nxt = view.next_delivery_time()
            assert nxt == (self.now if owed else topic_next)
            if not owed:  # no busy loop: a timer armed for it waits
                assert nxt is None or nxt > m.topic.cutoff(self.now)
        for pos in m.topic.deliver_at:
            assert self.ix.tracker.contains_message(*pos) == (pos in m.topic.at)


SharedContract.TestCase.settings = settings(
    max_examples=runs(100, 10_000), stateful_step_count=runs(40, 80), deadline=None
)
TestSharedContract = SharedContract.TestCase


def test_a_batch_ending_on_a_segment_end_leaves_the_next_segment_ready(tmp_path: Path) -> None:
    """The issue's repro: after a get that ends exactly on a loaded segment's last index."""
    clock = [0]

    def tracker() -> BucketDelayedDeliveryTracker:
        return BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(tmp_path / "s"),
            FileCursorProperties(tmp_path / "p"),
            clock=lambda: clock[0],
            background=False,
            tick_time_ms=0,
            strict=True,
            min_index_count_per_bucket=2,
            max_time_step_per_segment_ms=5,
        )

    t = tracker()
    for ledger, entry, at in [(1, 0, 10), (1, 1, 20), (2, 0, 30)]:
        assert t.add_message(ledger, entry, at)
    t.close()
    t = tracker()
    clock[0] = 25
    assert t.get_scheduled_messages(1).tolist() == [[1, 0]]
    assert t.has_message_available()
    assert t.next_delivery_time() == 20
    assert t.get_scheduled_messages(1).tolist() == [[1, 1]]
    assert not t.has_message_available()
    assert t.next_delivery_time() is None  # (2, 0) lived in the unpersisted tail: replayed
    t.close()
