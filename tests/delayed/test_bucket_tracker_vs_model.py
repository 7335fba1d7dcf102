"""The bucket tracker against a plain set-of-indexes model, through seals, merges, crashes and restarts.

Small limits (a few indexes per bucket and segment, two buckets before merging) make every code path
run in a short example: sealing at ledger boundaries, barriers and segment loads, merges, retirement,
trimming. A "crash" abandons the tracker with its snapshot jobs unrun; a "restart" closes it. After
either, every index of a bucket whose snapshot was created must be recovered, and after the
dispatcher's replay (re-adding what the model holds) the two must agree exactly.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cursorkit import Position
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    FileCursorProperties,
    snapshot,
)

TICK = 10


class Model:
    """Tracked indexes keyed by position, with the tracker's rules for adds, delivery and trims."""

    def __init__(self) -> None:
        self.at: dict[tuple[int, int], int] = {}
        self.mark_delete: tuple[int, int] | None = None
        self.deliver_at: dict[tuple[int, int], int] = {}
        """A message's deliver-at is its own: the first time drawn for a position is kept for good."""

    def time_of(self, pos: tuple[int, int], drawn: int) -> int:
        return self.deliver_at.setdefault(pos, drawn)

    def add(self, ledger: int, entry: int, at: int, cutoff: int) -> bool:
        pos = (ledger, entry)
        if at < 0 or at <= cutoff:
            self.at.pop(pos, None)
            return False
        if self.mark_delete is not None and pos <= self.mark_delete:
            return False
        self.at.setdefault(pos, at)
        return True

    def due(self, cutoff: int, n: int) -> list[tuple[int, int]]:
        order = sorted((at, pos) for pos, at in self.at.items() if at <= cutoff)
        taken = [pos for _, pos in order[:n]]
        for pos in taken:
            del self.at[pos]
        return sorted(taken)

    def trim(self, md: tuple[int, int]) -> None:
        self.mark_delete = md
        for pos in [p for p in self.at if p <= md]:
            del self.at[pos]


class BucketTrackerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ck-bucket-"))
        self.now = 1_000
        self.model = Model()
        self.ledger = 1
        self.tracker = self.open()

    def open(self) -> BucketDelayedDeliveryTracker:
        md = self.model.mark_delete
        return BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(self.dir / "snapshots"),
            FileCursorProperties(self.dir / "cursor.props"),
            clock=lambda: self.now,
            background=False,
            tick_time_ms=TICK,
            min_index_count_per_bucket=4,
            max_time_step_per_segment_ms=40,
            max_indexes_per_segment=3,
            max_num_buckets=2,
            mark_delete=Position(*md) if md is not None else None,
        )

    def cutoff(self) -> int:
        return self.now + TICK

    def teardown(self) -> None:
        self.tracker.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        entry=st.integers(0, 30), delay=st.integers(-20, 400), ledger_step=st.sampled_from([0, 0, 0, 1, -1])
    )
    def add(self, entry: int, delay: int, ledger_step: int) -> None:
        ledger = max(1, self.ledger + ledger_step)
        self.ledger = max(self.ledger, ledger)
        at = self.model.time_of((ledger, entry), self.now + delay)
        expected = self.model.add(ledger, entry, at, self.cutoff())
        assert self.tracker.add_message(ledger, entry, at) == expected

    @rule(n=st.integers(1, 12), delays=st.lists(st.integers(-20, 400), min_size=1, max_size=12))
    def add_many(self, n: int, delays: list[int]) -> None:
        self.ledger += 1
        entries = np.arange(len(delays), dtype=np.int64) * 2
        ats = np.array(
            [self.model.time_of((self.ledger, 2 * i), self.now + d) for i, d in enumerate(delays)],
            dtype=np.int64,
        )
        ledgers = np.full(len(delays), self.ledger, dtype=np.int64)
        expected = [
            self.model.add(self.ledger, int(e), int(a), self.cutoff())
            for e, a in zip(entries, ats, strict=True)
        ]
        assert self.tracker.add_many(ledgers, entries, ats).tolist() == expected

    @rule(dt=st.integers(1, 120))
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule(n=st.integers(0, 15))
    def get(self, n: int) -> None:
        got = [tuple(r) for r in self.tracker.get_scheduled_messages(n).tolist()]
        assert got == self.model.due(self.cutoff(), n)

    @rule()
    def maintenance(self) -> None:
        self.tracker.maintenance()

    @precondition(lambda self: self.model.at)
    @rule(data=st.data())
    def trim(self, data: st.DataObject) -> None:
        pos = data.draw(st.sampled_from(sorted(self.model.at)))
        self.model.trim(pos)
        self.tracker.trim(Position(*pos))

    def _reopen_and_replay(self, durable: set[tuple[int, int]]) -> None:
        self.tracker = self.open()
        report = self.tracker.recovery_report
        assert not report.damaged
        due_now = {p for p, at in self.model.at.items() if at <= self.cutoff()}
        for pos in durable - due_now:
            assert self.tracker.contains_message(*pos), f"{pos} of a created bucket was lost"
        # The dispatcher re-reads everything after mark-delete: positions recovery brought back
        # although already delivered are due, so the re-read untracks them (at-least-once).
        for pos, at in sorted(self.model.deliver_at.items()):
            expected = self.model.add(pos[0], pos[1], at, self.cutoff())
            assert self.tracker.add_message(pos[0], pos[1], at) == expected

    def _durable(self, storage: FileBucketSnapshotStorage) -> set[tuple[int, int]]:
        """Positions the model holds that sit in a created snapshot (what must survive a crash)."""
        held: set[tuple[int, int]] = set()
        for b in self.tracker.immutable_buckets:
            if b.bucket_id is None:
                continue
            blobs = storage.get_bucket_snapshot_segment(b.bucket_id, 1, b.last_segment_entry_id)
            segs = snapshot.decode(blobs)
            held.update(zip(segs.ledger_ids.tolist(), segs.entry_ids.tolist(), strict=True))
        return held & set(self.model.at)

    @rule()
    def crash(self) -> None:
        durable = self._durable(self.tracker.storage)  # queued jobs never run: the process died here
        self.tracker.storage.close()  # the dead process's directory lock goes with it
        self._reopen_and_replay(durable)

    @rule()
    def restart(self) -> None:
        self.tracker.close()
        with FileBucketSnapshotStorage(self.dir / "snapshots") as storage:
            durable = self._durable(storage)
        self._reopen_and_replay(durable)

    @invariant()
    def counts_agree(self) -> None:
        assert self.tracker.number_of_delayed_messages == len(self.model.at)
        for pos in list(self.model.at)[:5]:
            assert self.tracker.contains_message(*pos)


BucketTrackerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestBucketTracker = BucketTrackerMachine.TestCase
