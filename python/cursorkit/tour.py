"""A scripted tour: ack patterns → ranges → encodings, then delayed delivery through the bucket tracker.

Run with ``python -m cursorkit.tour`` (``make demo``). It prints what a broker operator would ask of a
cursor (how many ack holes, what Pulsar would persist, what cursorkit persists) and of a delayed index
(memory, snapshots on disk, recovery after a restart, delivery order).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cursorkit import Cursor, Position, RangeSet
from cursorkit.ackstate import DispatchPausePolicy, FileCursorStore

PULSAR_MAX_UNACKED_RANGES = 10_000
"""Pulsar's ``managedLedgerMaxUnackedRangesToPersist`` default."""


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def _pattern(name: str, ledgers: np.ndarray, entries: np.ndarray) -> tuple[str, RangeSet]:
    rs = RangeSet()
    rs.add_many(ledgers, entries)
    return name, rs


def _patterns(rng: np.random.Generator) -> list[tuple[str, RangeSet]]:
    """Ack patterns a Shared subscription produces, from benign to pathological."""
    per_ledger = 50_000
    ledger_col = np.repeat(np.arange(4, dtype=np.int64), per_ledger)
    entry_col = np.tile(np.arange(per_ledger, dtype=np.int64), 4)
    in_order = _pattern("in-order acks, 4 ledgers x 50k", ledger_col, entry_col)
    kept = rng.random(ledger_col.size) > 0.02
    holes = _pattern("2% of messages unacked (slow consumer)", ledger_col[kept], entry_col[kept])
    odd = np.arange(1, 1_000_000, 2, dtype=np.int64)
    alternating = _pattern("every other entry acked, 1M entries", np.zeros_like(odd), odd)
    return [in_order, holes, alternating]


def main() -> None:
    """Print the tour."""
    print("cursorkit tour: acknowledgement state as range sets\n")
    article = RangeSet()
    article.add_many([5] * 7, [0, 1, 2, 3, 4, 5, 7])
    print("Acking 5:0..5:5 and 5:7 leaves a hole at 5:6; Pulsar's string form of the acked ranges:")
    print(f"  {article}   ({len(article)} ranges, first {article.first_range()})\n")

    header = (
        f"{'pattern':<40} {'ranges':>8} {'memory':>11} {'compact':>11} "
        f"{'MessageRange':>13} {'LongListMap':>12} {'Pulsar keeps':>13}"
    )
    print(header)
    print("-" * len(header))
    for name, rs in _patterns(np.random.default_rng(2026)):
        kept = min(len(rs), PULSAR_MAX_UNACKED_RANGES)
        print(
            f"{name:<40} {len(rs):>8,} {_kib(rs.memory_usage()):>11} {_kib(len(rs.to_bytes())):>11} "
            f"{_kib(rs.message_range_wire_size()):>13} {_kib(rs.long_list_map_wire_size()):>12} "
            f"{kept / max(len(rs), 1):>12.0%}"
        )
    print(
        "\nMessageRange is what Pulsar writes by default and is cut at "
        f"{PULSAR_MAX_UNACKED_RANGES:,} ranges;\nthe compact form (roaring portable bitmaps "
        "per ledger, CRC-checked) keeps every range."
    )

    _cursor_tour()
    _delayed_tour()
    _key_shared_tour()


def _cursor_tour() -> None:
    """A subscription with holes: what each form persists, the store's incremental flush, PIP-299."""
    print("\nA Shared subscription that leaves every other message unacked in 20 ledgers of 100k entries:")
    cursor = Cursor(
        Position(1, -1), name="tour-sub", ledger_sizes={ledger: 100_000 for ledger in range(1, 21)}
    )
    odd = np.arange(1, 100_000, 2, dtype=np.int64)
    cursor.ack_many(np.repeat(np.arange(1, 21, dtype=np.int64), odd.size), np.tile(odd, 20))
    print(
        f"  mark-delete {cursor.mark_delete_position}, {cursor.non_contiguous_deleted_ranges:,} ranges, "
        f"backlog {cursor.backlog():,}, fully persistable: {cursor.is_fully_persistable()}"
    )
    for form in ("message_range", "long_list_map", "compact"):
        r = cursor.persist(form)
        print(
            f"  {form:<14} {_kib(r.size):>11}  keeps {r.ranges_written:>9,} ranges"
            f"  cut {r.ranges_cut:>9,}{'  (reported, counted)' if r.truncated else ''}"
        )
    policy = DispatchPausePolicy(broker=True)
    print(
        f"  PIP-299 with the broker switch on: Key_Shared pauses new reads: "
        f"{policy.should_pause(cursor, 'Key_Shared')}, Failover: {policy.should_pause(cursor, 'Failover')}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = FileCursorStore.create(Path(tmp) / "tour-sub", name="tour-sub")
        first = store.flush(cursor)
        cursor.ack(Position(7, 2))
        t0 = time.perf_counter()
        second = store.flush(cursor)
        took = (time.perf_counter() - t0) * 1e3
        store.close()
        reopened = FileCursorStore.open(Path(tmp) / "tour-sub")
        recovered = reopened.recover()
        reopened.close()
    print(
        f"  CursorStore: first flush {_kib(first.bytes_written)}; after one more ack, the next flush writes "
        f"{second.ledgers_written} ledger ({_kib(second.bytes_written)}, {took:.1f} ms incl. fsync)"
    )
    same = recovered.individually_deleted == cursor.individually_deleted
    print(f"  reopened and recovered: {recovered.non_contiguous_deleted_ranges:,} ranges, identical: {same}")


def _delayed_tour() -> None:
    """1M delayed messages: the in-memory queue, then PIP-195 buckets with snapshots and a restart."""
    from cursorkit.delayed import (
        BucketDelayedDeliveryTracker,
        FileBucketSnapshotStorage,
        FileCursorProperties,
        InMemoryDelayedDeliveryTracker,
    )

    n, ledgers = 1_000_000, 20
    rng = np.random.default_rng(195)
    ls = np.repeat(np.arange(1, ledgers + 1, dtype=np.int64), n // ledgers)
    es = np.tile(np.arange(n // ledgers, dtype=np.int64), ledgers)
    ats = 3_600_000 + rng.integers(0, 3_600_000, size=n)  # due in one to two hours
    now = [0]
    print(f"\nDelayed delivery: {n:,} messages over {ledgers} ledgers, due in 1-2 hours")
    mem = InMemoryDelayedDeliveryTracker(clock=lambda: now[0])
    t0 = time.perf_counter()
    mem.add_many(ls, es, ats)
    took = time.perf_counter() - t0
    print(
        f"  in-memory tracker: {took * 1e3:.0f} ms to add, {mem.buffer_memory_usage / n:.1f} B per index "
        f"(Pulsar's queue: 24-48 B, per subscription)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "cursor.props"

        def open_tracker() -> BucketDelayedDeliveryTracker:
            return BucketDelayedDeliveryTracker(
                FileBucketSnapshotStorage(Path(tmp) / "snapshots"),
                FileCursorProperties(props),
                clock=lambda: now[0],
            )

        bucket = open_tracker()
        t0 = time.perf_counter()
        bucket.add_many(ls, es, ats)
        bucket.maintenance()
        took = time.perf_counter() - t0
        buckets = bucket.immutable_buckets
        on_disk = sum(b.snapshot_length for b in buckets)
        print(
            f"  bucket tracker: {len(buckets)} sealed buckets, {on_disk / 1e6:.1f} MB of snapshots "
            f"({on_disk / n:.1f} B per index) in {took:.1f} s; "
            f"{bucket.buffer_memory_usage / 1e6:.1f} MB in memory"
        )
        bucket.close()
        t0 = time.perf_counter()
        again = open_tracker()
        took = time.perf_counter() - t0
        report = again.recovery_report
        print(
            f"  restart: {len(report.recovered)} buckets recovered in {took * 1e3:.0f} ms, "
            f"{again.number_of_delayed_messages:,} messages tracked (the unsealed tail is replayed)"
        )
        now[0] = 3_600_000 + 600_000
        due = again.get_scheduled_messages(n)
        print(f"  ten minutes in: {len(due):,} messages due, delivered in deliver-at order")
        again.close()


def _key_shared_tour() -> None:
    """Pulsar's hash, the selectors' balance, and a churning Key_Shared subscription kept in order."""
    from collections import Counter

    from cursorkit.keyshared import (
        AutoSplitSelector,
        ConsistentHashingSelector,
        KeySharedDispatcher,
        Simulation,
        hash_many,
        sticky_key_hash,
    )
    from cursorkit.keyshared.hashing import SlotKind, slots

    print("\nKey_Shared: sticky-key hashing and dispatch")
    print(f"  sticky_key_hash(b'key1') = {sticky_key_hash(b'key1')} (Pulsar's Murmur3, seed 0, 31 bits)")
    keys = [f"order-{i}".encode() for i in range(1_000_000)]
    hashes = hash_many(keys)

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    def balance(selector: Any, kind: SlotKind) -> None:
        for i in range(10):
            selector.add_consumer(Named(f"c{i}"))
        load = Counter(selector.select_many(slots(hashes, kind)).tolist())
        print(
            f"  {type(selector).__name__:<26} 10 consumers, 1M keys: max/min load "
            f"{max(load.values()) / min(load.values()):.2f}"
        )

    balance(ConsistentHashingSelector(), "consistent")
    balance(AutoSplitSelector(), "range")
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=Cursor(Position(1, -1)))
    sim = Simulation(d, seed=2026, keys=5_000, distribution="zipf", read_batch=200)
    for i in range(20):
        sim.join(f"c{i}", 100, ack_delay=i % 4)
    t0 = time.perf_counter()
    for i in range(10):
        sim.publish(5_000)
        for _ in range(20):
            sim.step()
        sim.leave(sorted(sim.consumers)[0])  # churn: a consumer leaves, another joins
        sim.join(f"n{i}", 100, ack_delay=1)
    sim.drain()
    took = time.perf_counter() - t0
    print(
        f"  draining dispatcher, 50k Zipf-keyed messages, 20 consumers, 10 leave/join: "
        f"{sim.checker.deliveries:,} deliveries ({sim.checker.redeliveries:,} redelivered after leaves) "
        f"in {took:.1f} s; ordering violations: {len(sim.checker.violations)}"
    )


if __name__ == "__main__":
    main()
