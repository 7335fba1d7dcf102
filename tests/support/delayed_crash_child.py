"""The process tests/delayed/test_bucket_tracker_crash.py kills: recover a bucket tracker, then add ledgers.

Run as ``python delayed_crash_child.py DIR SEED``. The tracker keeps its snapshots in ``DIR/snapshots``
and its bucket pointers in ``DIR/cursor.props``; its clock stands still at :data:`NOW` and every
deliver-at is later, so nothing is ever due and every index stays tracked. Small limits make seals
and merges frequent, and the snapshot jobs run on the worker thread while ledgers keep coming.

A ledger's positions and deliver-ats depend only on the ledger id (:func:`ledger_content`), so the
parent knows what any ledger holds whichever child added it. After recovery the child resumes at the
ledger after the last recovered bucket. Lines on stdout, each flushed:

* ``R <ledger>``: recovered, resuming at that ledger;
* ``S <ledger>``: adding the ledger sealed the tail (its snapshot write is queued);
* ``M <ledger>``: that seal also queued a merge (more buckets than ``max_num_buckets``);
* ``A <ledger>``: the ledger is added (its late adds too);
* ``D <ledger>``: after ``maintenance()``, every non-empty ledger up to this one is in a created bucket.

Seeded sleeps in the main thread and around the storage and property writes on the worker thread
spread the kills over every step of a seal and a merge.
"""

from __future__ import annotations

import functools
import random
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage, FileCursorProperties
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

NOW = 1_700_000_000_000
"""The child's clock (ms): it never moves, so nothing becomes due."""
BASE_DELAY_MS = 60_000
DELAY_STEP_MS = 1000
DELAY_STEPS = 3600
"""Deliver-at = NOW + BASE_DELAY_MS + DELAY_STEP_MS * k, k < DELAY_STEPS: many ties to break by position."""
LAST_DELIVER_AT = NOW + BASE_DELAY_MS + DELAY_STEP_MS * (DELAY_STEPS - 1)
CONTENT_SEED = 195
LATE_ENTRY_BASE = 1_000_000
"""Entry ids of late adds start here, above any ledger's own entries."""
MAX_LEDGERS = 1_000_000
TOPIC = "persistent://crash/ns/topic"
CURSOR = "crash-sub"
SETTINGS: dict[str, Any] = {
    "tick_time_ms": 1,
    "min_index_count_per_bucket": 300,
    "max_indexes_per_segment": 64,
    "max_time_step_per_segment_ms": 86_400_000,
    "max_num_buckets": 2,
}
"""Tracker limits: a bucket per ~300 indexes, 64 per segment, a merge after every other seal."""

Int64Array = npt.NDArray[np.int64]


@functools.lru_cache(maxsize=8192)
def ledger_content(ledger: int) -> tuple[Int64Array, Int64Array]:
    """The (entry ids, deliver-ats) of a ledger: about one ledger in seven is empty; entries have holes."""
    rng = np.random.default_rng([CONTENT_SEED, ledger])
    if rng.random() < 0.15:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    n = int(rng.integers(1, 80))
    entries = np.sort(rng.choice(2 * n, size=n, replace=False)).astype(np.int64)
    ats = NOW + BASE_DELAY_MS + DELAY_STEP_MS * rng.integers(0, DELAY_STEPS, size=n, dtype=np.int64)
    return entries, ats


def late_adds(ledger: int) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Positions in ledgers just below ``ledger`` added after it: they only ever live in memory."""
    rng = np.random.default_rng([CONTENT_SEED, ledger, 1])
    if ledger < 3 or rng.random() >= 0.25:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    n = int(rng.integers(1, 4))
    ledgers = ledger - rng.integers(1, min(ledger, 6), size=n, dtype=np.int64)
    entries = LATE_ENTRY_BASE + rng.integers(0, 1000, size=n, dtype=np.int64)
    ats = NOW + BASE_DELAY_MS + DELAY_STEP_MS * rng.integers(0, DELAY_STEPS, size=n, dtype=np.int64)
    return ledgers, entries, ats


def covered_prefix(ranges: Sequence[tuple[int, int]], upto: int) -> int:
    """The highest ledger ``L <= upto`` such that every non-empty ledger up to ``L`` lies in ``ranges``."""
    spans = sorted(ranges)
    i = 0
    ledger = 1
    while ledger <= upto:
        while i < len(spans) and spans[i][1] < ledger:
            i += 1
        if i < len(spans) and spans[i][0] <= ledger:
            ledger = spans[i][1] + 1
        elif len(ledger_content(ledger)[0]) == 0:
            ledger += 1
        else:
            break
    return min(ledger - 1, upto)


class DawdlingStorage(FileBucketSnapshotStorage):
    """The file store with short random pauses after each write and before each delete.

    The pauses widen the windows a kill can land in: between a snapshot write and its property
    write, and between a merge's property swap and the deletion of its sources.
    """

    def __init__(self, path: Path, seed: int) -> None:
        super().__init__(path)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()

    def _pause(self) -> None:
        with self._rng_lock:
            pause = self._rng.uniform(0.0, 0.008)
        time.sleep(pause)

    def create_bucket_snapshot(
        self, metadata: SnapshotMetadata, segments: Sequence[bytes], bucket_key: str, topic: str, cursor: str
    ) -> int:
        bucket_id = super().create_bucket_snapshot(metadata, segments, bucket_key, topic, cursor)
        self._pause()
        return bucket_id

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        self._pause()
        super().delete_bucket_snapshot(bucket_id)


def open_tracker(
    root: Path, storage: FileBucketSnapshotStorage, **kwargs: Any
) -> BucketDelayedDeliveryTracker:
    """The crash test's tracker over ``storage`` and ``root/cursor.props`` (recovers what is there)."""
    props = FileCursorProperties(root / "cursor.props")
    return BucketDelayedDeliveryTracker(storage, props, topic=TOPIC, cursor=CURSOR, **SETTINGS, **kwargs)


def main(argv: list[str]) -> None:
    """Recovers the tracker in ``argv[0]`` and adds ledgers, seeded by ``argv[1]``, until killed."""
    root, seed = Path(argv[0]), int(argv[1])
    rng = random.Random(seed)
    out = sys.stdout
    storage = DawdlingStorage(root / "snapshots", seed)
    tracker = open_tracker(root, storage, clock=lambda: NOW, background=True)
    resume = max((b.end_ledger_id for b in tracker.immutable_buckets), default=0) + 1
    out.write(f"R {resume}\n")
    out.flush()
    seals = tracker.counters().seals
    for ledger in range(resume, resume + MAX_LEDGERS):
        entries, ats = ledger_content(ledger)
        if len(entries):
            cuts = sorted(rng.sample(range(1, len(entries)), min(rng.randint(0, 2), len(entries) - 1)))
            for es, ts in zip(np.split(entries, cuts), np.split(ats, cuts), strict=True):
                if len(es) <= 3:
                    for e, t in zip(es.tolist(), ts.tolist(), strict=True):
                        tracker.add_message(ledger, e, t)
                else:
                    tracker.add_many(np.full(len(es), ledger, dtype=np.int64), es, ts)
            late_l, late_e, late_t = late_adds(ledger)
            if len(late_l):
                tracker.add_many(late_l, late_e, late_t)
        now_seals = tracker.counters().seals
        if now_seals > seals:
            seals = now_seals
            out.write(f"S {ledger}\n")
            if len(tracker.immutable_buckets) > SETTINGS["max_num_buckets"]:
                out.write(f"M {ledger}\n")
        out.write(f"A {ledger}\n")
        out.flush()
        if rng.random() < 0.15:
            tracker.maintenance()
            ranges = [(b.start_ledger_id, b.end_ledger_id) for b in tracker.immutable_buckets if b.created]
            out.write(f"D {covered_prefix(ranges, ledger)}\n")
            out.flush()
        time.sleep(rng.uniform(0.0, 0.003))
    tracker.close()
    storage.close()


if __name__ == "__main__":
    main(sys.argv[1:])
