"""Crash safety of the bucket tracker with real processes: SIGKILL while sealing and merging, then recover.

Each round starts support/delayed_crash_child.py on the same directories. It recovers the tracker and
adds ledger after ledger (content fixed per ledger id), sealing a bucket every ~300 indexes and
merging after every other seal on its worker thread, and reports ``D L`` once every non-empty
ledger up to ``L`` is in a created bucket. The parent kills it at a random moment (during startup,
right after a seal or a merge was queued, right after a ``D`` line, or anywhere), classifies what the
kill left on disk (unrecorded seals, unswapped merges, undeleted merge sources, torn temp files), then
recovers in-process and checks that:

* nothing is damaged, missing or overlapping, and recovery adopted or deleted exactly the orphans
  the disk held; afterwards every bucket property names a stored snapshot, every stored snapshot is
  named by a property, and the buckets are disjoint and form a prefix of the ledgers;
* every non-empty ledger up to the last ``D`` is covered, and the tracked positions are exactly the
  contents of the covered ledgers: each ``contains_message``, counted once, and nothing else (late
  adds into older ledgers only ever live in memory);
* on a copy of the directories, stepping the clock past every deliver-at delivers each of those
  positions exactly once, in (deliver-at, ledger, entry) order across batches, each as it falls due.

State accumulates: the next child resumes from the state this recovery left (at the ledger after the
last bucket), so later rounds recover, merge and kill on top of earlier crashes. When the ledgers pass
``LEDGER_CAP`` the directories are wiped and a fresh history starts, which keeps every round's
checks (linear in the positions held) within the time budget.
``CURSORKIT_DELAYED_CRASH_KILLS`` sets the number of kills (default 20 in CI, 30 under ``make fuzz``;
the rounds' seeds are fixed, so a smaller count runs the first rounds).

The last two tests need no processes: a snapshot store whose creates fail downgrades the bucket
(delivered from memory, in order), and a merge that fails at any step keeps its sources (Pulsar #26239).
"""

from __future__ import annotations

import bisect
import errno
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import child_lines
from cursorkit.delayed import (
    BucketDelayedDeliveryTracker,
    FileBucketSnapshotStorage,
    FileCursorProperties,
    RecoveryReport,
)
from cursorkit.delayed.bucket import PROPERTY_PREFIX, parse_bucket_key
from cursorkit.errors import PersistFailed
from cursorkit.fsio import StoreFile, default_opener
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata
from delayed_crash_child import (
    NOW,
    covered_prefix,
    late_adds,
    ledger_content,
    open_tracker,
)
from fuzz_budget import runs

KILLS = int(os.environ.get("CURSORKIT_DELAYED_CRASH_KILLS", runs(20, 30)))
SEED = int(os.environ.get("CURSORKIT_DELAYED_CRASH_SEED", "26239"))
CHILD = Path(__file__).parents[1] / "support" / "delayed_crash_child.py"
LEDGER_CAP = 600
"""Past this many ledgers the next round starts a fresh history."""
TICK = 1
I64_MAX = 2**63 - 1
BUCKET_FILE = re.compile(r"bucket-(\d{20})\.snap")
TEMP_FILE = re.compile(r"\..+\.tmp-[0-9a-f]{16}")

Key = tuple[int, int, int]


class Lines(child_lines.Lines):
    """The child's stdout, plus waiting for a tagged line."""

    def wait_for(self, tag: str, nth: int, give_up_after: int) -> None:
        """Reads until the ``nth`` line tagged ``tag``, or until ``give_up_after`` ``A`` lines."""
        found = added = 0
        while (line := self.next()) is not None:
            found += line.startswith(tag + " ")
            added += line.startswith("A ")
            if found >= nth or added >= give_up_after:
                return


def run_child(root: Path, seed: int, plan: random.Random, stderr: Path) -> tuple[list[str], str]:
    """Starts the child, kills it at a planned moment; its stdout lines and how the kill was aimed."""
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(root), str(seed)], stdout=subprocess.PIPE, stderr=err
        )
    lines = Lines(proc, "delayed crash child")
    aim = plan.random()
    try:
        if aim < 0.06:
            how = "startup"
            time.sleep(plan.uniform(0.0, 0.5))
        elif aim < 0.32:
            how = "seal"
            lines.wait_for("S", plan.randint(1, 6), 400)
            time.sleep(plan.uniform(0.0, 0.025))
        elif aim < 0.68:
            how = "merge"
            lines.wait_for("M", plan.randint(1, 3), 400)
            time.sleep(plan.uniform(0.005, 0.08))
        elif aim < 0.85:
            how = "durable"
            lines.wait_for("D", plan.randint(1, 5), 400)
            time.sleep(plan.uniform(0.0, 0.004))
        else:
            how = "anywhere"
            lines.wait_for("R", 1, 1)
            time.sleep(plan.uniform(0.0, 0.4))
    finally:
        proc.kill()
        proc.wait()
    lines.drain()
    assert proc.stdout is not None
    proc.stdout.close()
    if proc.returncode != -signal.SIGKILL:
        pytest.fail(f"delayed crash child exited with {proc.returncode}:\n{stderr.read_text()}")
    if "Traceback" in stderr.read_text():
        pytest.fail(f"a job of the delayed crash child failed:\n{stderr.read_text()}")
    return lines.seen, how


def bucket_properties(props: Mapping[str, str]) -> dict[int, tuple[int, int]]:
    """Snapshot id -> ledger range of every bucket property."""
    out: dict[int, tuple[int, int]] = {}
    for key, value in props.items():
        rng = parse_bucket_key(key)
        if rng is not None:
            out[int(value)] = rng
    return out


def encloses(outer: tuple[int, int], inner: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def disjoint(a: tuple[int, int], ranges: Sequence[tuple[int, int]]) -> bool:
    return all(a[1] < s or e < a[0] for s, e in ranges)


def classify_disk(root: Path) -> tuple[dict[str, int], set[int], set[int]]:
    """What a kill left, before recovery touches it: counts by kind, and the orphans to adopt / delete.

    An orphan (a snapshot no property names) disjoint from every recorded bucket is a seal whose
    property write the kill stopped; one enclosing recorded buckets is a merge whose swap it stopped;
    one inside a recorded bucket is a merge source it stopped deleting.
    """
    snaps = root / "snapshots"
    names = [p.name for p in root.iterdir()] + ([p.name for p in snaps.iterdir()] if snaps.is_dir() else [])
    kinds = dict.fromkeys(("torn_write", "unrecorded_seal", "unswapped_merge", "undeleted_source"), 0)
    kinds["torn_write"] = sum(bool(TEMP_FILE.fullmatch(n)) for n in names)
    files = {int(m.group(1)) for n in names if (m := BUCKET_FILE.fullmatch(n))}
    props = FileCursorProperties(root / "cursor.props")
    recorded = bucket_properties(props)
    assert set(recorded) <= files, f"properties name missing snapshots {sorted(set(recorded) - files)}"
    adopt: set[int] = set()
    delete: set[int] = set()
    storage = FileBucketSnapshotStorage(snaps)
    with storage:
        for bucket_id in sorted(files - set(recorded)):
            rng = parse_bucket_key(storage.bucket_info(bucket_id).bucket_key)
            assert rng is not None
            ranges = list(recorded.values())
            if disjoint(rng, ranges):
                kinds["unrecorded_seal"] += 1
                adopt.add(bucket_id)
            elif any(encloses(rng, r) for r in ranges):
                kinds["unswapped_merge"] += 1
                delete.add(bucket_id)
            else:
                assert any(encloses(r, rng) for r in ranges), f"orphan {bucket_id} {rng} overlaps {ranges}"
                kinds["undeleted_source"] += 1
                delete.add(bucket_id)
    return kinds, adopt, delete


def expected_positions(ranges: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Position -> deliver-at of every position of the ledgers in ``ranges``."""
    out: dict[tuple[int, int], int] = {}
    for start, end in ranges:
        for ledger in range(start, end + 1):
            entries, ats = ledger_content(ledger)
            out.update(zip(((ledger, e) for e in entries.tolist()), ats.tolist(), strict=True))
    return out


def check_recovered(
    t: BucketDelayedDeliveryTracker,
    storage: FileBucketSnapshotStorage,
    durable: int,
    adopt: set[int],
    delete: set[int],
    context: str,
) -> dict[tuple[int, int], int]:
    """The recovery checks of one round; returns the positions the tracker must hold."""
    report: RecoveryReport = t.recovery_report
    assert not report.damaged and not report.missing and not report.overlapping, f"{context}: {report}"
    assert not report.stale and not report.expired and not report.trimmed, f"{context}: {report}"
    assert set(report.adopted) == adopt, f"{context}: adopted {report.adopted}, disk had {sorted(adopt)}"
    assert set(report.orphans_deleted) == delete, f"{context}: deleted {report.orphans_deleted} not {delete}"

    props = t.cursor_properties
    buckets = t.immutable_buckets
    ranges = [(b.start_ledger_id, b.end_ledger_id) for b in buckets]
    assert all(b.created for b in buckets), context
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False)), f"{context}: overlap {ranges}"
    recorded = bucket_properties(props)
    assert recorded == {b.bucket_id: r for b, r in zip(buckets, ranges, strict=True)}, context
    assert storage.list_bucket_snapshots() == sorted(recorded), (
        f"{context}: unreferenced or missing snapshots"
    )
    assert all(k.startswith(PROPERTY_PREFIX) for k in props), f"{context}: stray properties {dict(props)}"

    last = ranges[-1][1] if ranges else 0
    assert covered_prefix(ranges, last) == last, f"{context}: a hole below the last bucket: {ranges}"
    assert covered_prefix(ranges, durable) == durable, (
        f"{context}: ledgers up to {durable} were durable: {ranges}"
    )

    expected = expected_positions(ranges)
    assert t.number_of_delayed_messages == len(expected), context
    assert sum(b.number_bucket_delayed_messages for b in buckets) == len(expected), context
    missing = [p for p in expected if not t.contains_message(*p)]
    assert not missing, f"{context}: {len(missing)} durable positions lost, e.g. {missing[:5]}"
    # Nothing beyond: the next ledgers' positions and every late add lived in memory only.
    beyond = [(ledger, e) for ledger in range(last + 1, last + 6) for e in ledger_content(ledger)[0].tolist()]
    for ledger in range(1, last + 6):
        beyond += list(zip(*(a.tolist() for a in late_adds(ledger)[:2]), strict=True))
    extra = [p for p in beyond if t.contains_message(*p)]
    assert not extra, f"{context}: positions never made durable were recovered: {extra[:5]}"
    return expected


class Clock:
    """An injectable clock (ms)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def drain_in_order(
    t: BucketDelayedDeliveryTracker,
    clock: Clock,
    expected: dict[tuple[int, int], int],
    batch: int,
    steps: int,
    context: str,
) -> None:
    """Steps the clock past every deliver-at and checks what comes out against ``expected``.

    Every position comes out once, none before its deliver-at (less the tick), all by it, and each
    batch's indexes come after the previous batch's in (deliver-at, ledger, entry) order.
    """
    want = sorted((at, ledger, e) for (ledger, e), at in expected.items())
    got: list[Key] = []
    start = want[0][0] - 1 if want else clock.now
    end = max(want[-1][0] if want else start, clock.now)
    times = sorted({*np.linspace(start, end, steps).astype(np.int64).tolist(), end})
    for now in times:
        clock.now = now
        while len(rows := t.get_scheduled_messages(batch)):
            assert len(rows) <= batch, context
            keys: list[Key] = []
            for ledger, e in rows.tolist():
                at = expected.get((ledger, e))
                assert at is not None, f"{context}: delivered {ledger}:{e}, which was never durable"
                keys.append((at, ledger, e))
            keys.sort()
            assert keys[-1][0] <= now + TICK, f"{context}: {keys[-1]} delivered early at {now}"
            assert not got or got[-1] < keys[0], f"{context}: {keys[0]} delivered after {got[-1]}"
            got.extend(keys)
        due = bisect.bisect_right(want, (now + TICK, I64_MAX, I64_MAX))
        assert len(got) == due, f"{context}: at {now}, {len(got)} of {due} due positions delivered"
    assert got == want, context
    assert t.number_of_delayed_messages == 0, context


def drain_copy(
    root: Path, scratch: Path, expected: dict[tuple[int, int], int], batch: int, context: str
) -> None:
    """Recovers a copy of ``root`` and drains it (the real directories keep their undelivered state)."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(root, scratch)
    clock = Clock(NOW)
    storage = FileBucketSnapshotStorage(scratch / "snapshots", fsync=False)
    t = open_tracker(scratch, storage, clock=clock, background=False)
    try:
        assert t.number_of_delayed_messages == len(expected), context
        drain_in_order(t, clock, expected, batch, 24, context)
    finally:
        t.close()
        storage.close()


@pytest.mark.slow
@pytest.mark.fuzz
def test_sigkill_while_sealing_and_merging_loses_no_durable_bucket(tmp_path: Path) -> None:
    root = tmp_path / "state"
    plan = random.Random(SEED)
    stats: dict[str, int] = dict.fromkeys(
        ("torn_write", "unrecorded_seal", "unswapped_merge", "undeleted_source", "fresh_starts"), 0
    )
    aims: dict[str, int] = {}
    resume = 1
    positions = kill_ledgers = 0
    started = time.monotonic()
    for rnd in range(KILLS):
        seed = SEED * 1000 + rnd
        seen, how = run_child(root, seed, plan, tmp_path / "child.err")
        aims[how] = aims.get(how, 0) + 1
        if seen:
            assert seen[0] == f"R {resume}", f"round {rnd}: the child recovered differently: {seen[0]}"
        durable = max((int(s[2:]) for s in seen if s.startswith("D ")), default=0)
        added = max((int(s[2:]) for s in seen if s.startswith("A ")), default=resume - 1)
        kill_ledgers += added - resume + 1
        context = f"round {rnd} (seed {seed}, killed at {how}, durable {durable}, added up to {added})"

        kinds, adopt, delete = classify_disk(root) if (root / "cursor.props").exists() else ({}, set(), set())
        for kind, n in kinds.items():
            stats[kind] += n > 0
        storage = FileBucketSnapshotStorage(root / "snapshots")
        t = open_tracker(root, storage, clock=lambda: NOW, background=False)
        try:
            expected = check_recovered(t, storage, durable, adopt, delete, context)
            last = max((b.end_ledger_id for b in t.immutable_buckets), default=0)
        finally:
            t.close()
            storage.close()
        drain_copy(root, tmp_path / "drain", expected, plan.choice((97, 1000)), context)
        positions = max(positions, len(expected))

        resume = last + 1
        if last > LEDGER_CAP:
            shutil.rmtree(root)
            resume = 1
            stats["fresh_starts"] += 1
    elapsed = time.monotonic() - started
    print(
        f"\n{KILLS} kills in {elapsed:.1f}s ({kill_ledgers} ledgers added, up to {positions} positions "
        f"held): aimed {aims}, found {stats}"
    )
    if KILLS >= 20:  # some kills landed between a snapshot write and its property, or inside a merge
        assert stats["unrecorded_seal"] + stats["unswapped_merge"] + stats["undeleted_source"] > 0


# --- failing storage, no processes ------------------------------------------------------------------

SMALL: dict[str, Any] = {
    "tick_time_ms": TICK,
    "min_index_count_per_bucket": 10,
    "max_indexes_per_segment": 4,
    "max_time_step_per_segment_ms": 1_000_000,
    "storage_retries": 3,
}
"""Limits of the fault tests: a ledger of 12 indexes fills a bucket of three or more segments."""


def small_ledger(ledger: int) -> dict[tuple[int, int], int]:
    """Twelve positions of ``ledger`` with deliver-ats in 1000..1400 (ties included)."""
    rng = random.Random(ledger * 7919)
    return {(ledger, e): 1000 + 10 * rng.randrange(40) for e in range(12)}


def add_ledger(t: BucketDelayedDeliveryTracker, ledger: int, expected: dict[tuple[int, int], int]) -> None:
    content = small_ledger(ledger)
    entries = [e for _, e in content]
    assert t.add_many([ledger] * len(entries), entries, list(content.values())).all()
    expected.update(content)


class FaultyStorage(FileBucketSnapshotStorage):
    """A file store that fails on demand: the next ``fail_creates`` creates, or one step of a merge.

    ``fail_merge`` picks the merge step: ``"load"`` (reading the sources), ``"create"`` (writing the
    merged snapshot) or ``"swap"`` (the property change, through :meth:`opener`). A merge is told
    apart by its bucket key, whose range encloses buckets created before. Deletions are recorded.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, fsync=False)
        self.fail_creates = 0
        self.fail_merge: str | None = None
        self.created_ranges: list[tuple[int, int]] = []
        self.deleted: list[int] = []
        self._fail_next_property_write = threading.Event()

    def create_bucket_snapshot(
        self, metadata: SnapshotMetadata, segments: Sequence[bytes], bucket_key: str, topic: str, cursor: str
    ) -> int:
        rng = parse_bucket_key(bucket_key)
        assert rng is not None
        merge = any(encloses(rng, r) for r in self.created_ranges)
        if self.fail_creates > 0 or (merge and self.fail_merge == "create"):
            self.fail_creates = max(0, self.fail_creates - 1)
            raise PersistFailed(errno.EIO, f"injected failure creating {bucket_key}")
        bucket_id = super().create_bucket_snapshot(metadata, segments, bucket_key, topic, cursor)
        self.created_ranges.append(rng)
        if merge and self.fail_merge == "swap":
            self._fail_next_property_write.set()
        return bucket_id

    def get_bucket_snapshot_segment(self, bucket_id: int, first: int, last: int) -> list[bytes]:
        if self.fail_merge == "load" and last > first:  # a merge reads whole buckets, delivery one segment
            raise PersistFailed(errno.EIO, f"injected failure reading bucket {bucket_id}")
        return super().get_bucket_snapshot_segment(bucket_id, first, last)

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        self.deleted.append(bucket_id)
        super().delete_bucket_snapshot(bucket_id)

    def opener(self, path: str, mode: str) -> StoreFile:
        """The cursor properties' file opener: fails once right after a merged snapshot is written."""
        if self._fail_next_property_write.is_set():
            self._fail_next_property_write.clear()
            raise OSError(errno.EIO, f"injected failure writing {path}")
        return default_opener(path, mode)


def fault_tracker(
    path: Path, storage: FaultyStorage, clock: Clock, **kwargs: Any
) -> BucketDelayedDeliveryTracker:
    props = FileCursorProperties(path / "props", opener=storage.opener)
    return BucketDelayedDeliveryTracker(storage, props, clock=clock, background=False, **SMALL, **kwargs)


def bucket_ranges(t: BucketDelayedDeliveryTracker) -> list[tuple[int, int]]:
    return [(b.start_ledger_id, b.end_ledger_id) for b in t.immutable_buckets]


@pytest.mark.parametrize("failures", [1, 3, 5])
def test_a_failed_create_downgrades_the_bucket_and_delivers_it_from_memory(
    tmp_path: Path, failures: int
) -> None:
    storage = FaultyStorage(tmp_path / "snaps")
    storage.fail_creates = failures  # 3 attempts per create: every 3 failures downgrade one bucket
    clock = Clock(0)
    t = fault_tracker(tmp_path, storage, clock, max_num_buckets=-1)
    expected: dict[tuple[int, int], int] = {}
    for ledger in range(1, 6):  # ledgers 2..5 seal [1,1]..[4,4]; ledger 5 stays in the tail
        add_ledger(t, ledger, expected)
        t.maintenance()
    downgraded = failures // 3
    assert t.op_stats.count("create", "failed") == failures
    assert t.op_stats.count("create", "succeed") == 4 - downgraded
    assert t.counters().downgrades == downgraded
    assert bucket_ranges(t) == [(k, k) for k in range(1 + downgraded, 5)]
    assert bucket_properties(t.cursor_properties) == {
        b.bucket_id: (k, k) for k, b in enumerate(t.immutable_buckets, 1 + downgraded)
    }
    assert storage.list_bucket_snapshots() == sorted(
        b.bucket_id for b in t.immutable_buckets if b.bucket_id is not None
    )
    assert t.number_of_delayed_messages == len(expected)
    assert all(t.contains_message(*p) for p in expected)

    # A restart recovers the created buckets only: a downgraded bucket's messages must be replayed.
    scratch = tmp_path / "copy"
    shutil.copytree(tmp_path / "snaps", scratch / "snaps")
    shutil.copy(tmp_path / "props", scratch / "props")
    copy_storage = FaultyStorage(scratch / "snaps")
    recovered = fault_tracker(scratch, copy_storage, Clock(0))
    durable = {p: at for p, at in expected.items() if 1 + downgraded <= p[0] <= 4}
    assert not recovered.recovery_report.damaged
    assert recovered.number_of_delayed_messages == len(durable)
    assert [recovered.contains_message(*p) for p in expected] == [p in durable for p in expected]
    recovered.close()
    copy_storage.close()

    drain_in_order(t, clock, expected, 5, 60, f"{failures} create failures")
    t.close()
    storage.close()


@pytest.mark.parametrize("stage", ["load", "create", "swap"])
def test_a_failed_merge_keeps_its_sources(tmp_path: Path, stage: str) -> None:
    storage = FaultyStorage(tmp_path / "snaps")
    clock = Clock(0)
    t = fault_tracker(tmp_path, storage, clock, max_num_buckets=2)
    expected: dict[tuple[int, int], int] = {}
    for ledger in range(1, 4):  # [1,1] and [2,2]: at the limit, no merge
        add_ledger(t, ledger, expected)
        t.maintenance()
    storage.fail_merge = stage
    add_ledger(t, 4, expected)  # seals [3,3]: three buckets, so the merge of all three is queued
    t.maintenance()
    assert t.op_stats.count("merge", "failed") == 1 and t.op_stats.count("merge", "succeed") == 0
    sources = t.immutable_buckets
    ids = [b.bucket_id for b in sources]
    assert bucket_ranges(t) == [(1, 1), (2, 2), (3, 3)]
    assert not any(b.merging for b in sources)
    assert not set(storage.deleted) & set(ids), f"a failed merge deleted its sources: {storage.deleted}"
    assert storage.list_bucket_snapshots() == ids  # a merged snapshot whose swap failed is taken back
    assert bucket_properties(t.cursor_properties) == {
        b.bucket_id: r for b, r in zip(sources, bucket_ranges(t), strict=True)
    }
    assert all(t.contains_message(*p) for p in expected)
    t.close()
    storage.close()

    # Recovery finds every source; the next seal's merge succeeds and only then deletes them.
    storage = FaultyStorage(tmp_path / "snaps")
    t = fault_tracker(tmp_path, storage, clock, max_num_buckets=2)
    report = t.recovery_report
    assert sorted(report.recovered) == ids and not report.damaged and not report.missing
    durable = {p: at for p, at in expected.items() if p[0] <= 3}
    assert t.number_of_delayed_messages == len(durable)
    assert all(t.contains_message(*p) for p in durable)
    for ledger in (4, 5):  # the dispatcher replays ledger 4 (the tail); ledger 5 seals [4,4]
        add_ledger(t, ledger, expected)
    t.maintenance()
    assert t.op_stats.count("merge", "succeed") == 1
    assert bucket_ranges(t) == [(1, 4)]
    assert set(ids) <= set(storage.deleted)
    (merged,) = t.immutable_buckets
    assert storage.list_bucket_snapshots() == [merged.bucket_id]
    assert bucket_properties(t.cursor_properties) == {merged.bucket_id: (1, 4)}
    drain_in_order(t, clock, expected, 7, 60, f"merge failed at {stage}")
    t.close()
    storage.close()
