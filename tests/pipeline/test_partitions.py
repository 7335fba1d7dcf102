"""The per-partition functions of the rebuild, on plain Arrow batches (no Spark).

Properties: folding acks split over any partitions and merged equals replaying them one by one
through ``Cursor``; the built delayed index, written and recovered, emits exactly its messages in
deliver-at order; the bucket plan follows PIP-195's seal rule.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit._core import RangeSet
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage
from cursorkit.errors import InvalidArgument
from cursorkit.pipeline import schema
from cursorkit.pipeline.cursors import merge_ack_folds
from cursorkit.pipeline.delayed_buckets import write_buckets
from cursorkit.pipeline.partitions.acks import fold_acks
from cursorkit.pipeline.partitions.buckets import BUCKET_ID_SCHEMA, BUCKETS_SCHEMA, build_buckets, tag_buckets
from cursorkit.pipeline.partitions.index import index_messages
from cursorkit.pipeline.plan import PlannedBucket, plan_buckets
from cursorkit.pipeline.reference import replay_acks, replay_redeliveries

NOW = 1_000


# --- acks -----------------------------------------------------------------------------------------


@st.composite
def topics(draw: st.DrawFn) -> tuple[dict[tuple[int, int], int], list[dict[str, Any]], int]:
    """A small message log (position -> batch size), ack rows over it, and a partition count."""
    sizes: dict[tuple[int, int], int] = {}
    for ledger in draw(st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True)):
        for entry in range(draw(st.integers(1, 12))):
            sizes[(ledger, entry)] = draw(st.sampled_from([1, 1, 1, 2, 3, 5, 70]))
    positions = sorted(sizes)
    rows: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 19)) == 0:
            pos = (draw(st.integers(0, 8)), draw(st.integers(0, 15)))  # maybe unknown
        else:
            pos = draw(st.sampled_from(positions))
        size = sizes.get(pos, 1)
        index = draw(st.none() | st.integers(0, size - 1)) if size > 1 else None
        rows.append(
            {
                "subscription": draw(st.sampled_from(["a", "b", "c d"])),
                "ledger_id": pos[0],
                "entry_id": pos[1],
                "batch_index": index,
                "ack_type": draw(
                    st.sampled_from(
                        [schema.ACK_INDIVIDUAL] * 3 + [schema.ACK_CUMULATIVE, schema.ACK_NACK, "Nack"]
                    )
                ),
                "ack_time": draw(st.integers(0, NOW + 50)),
            }
        )
    return sizes, rows, draw(st.integers(1, 4))


ACK_ARROW = pa.schema([(c.name, c.type) for c in schema.ACK_COLUMNS] + [("batch_size", pa.int64())])


def _batches(rows: list[dict[str, Any]], sizes: dict[tuple[int, int], int]) -> list[pa.RecordBatch]:
    """Rows as the driver feeds them: batch-index rows carry their entry's batch size."""
    out = []
    for r in rows:
        size = sizes.get((r["ledger_id"], r["entry_id"])) if r["batch_index"] is not None else None
        out.append({**r, "batch_size": size})
    table = pa.Table.from_pylist(out, schema=ACK_ARROW)
    return table.to_batches(max_chunksize=7) or [table.to_batches()[0]] if len(table) else []


@given(topics(), st.randoms(use_true_random=False))
def test_fold_any_partitioning_equals_sequential_replay(
    topic: tuple[dict[tuple[int, int], int], list[dict[str, Any]], int], rnd: random.Random
) -> None:
    sizes, rows, parts = topic
    ledger_sizes: dict[int, int] = {}
    known = RangeSet()
    for ledger, entry in sizes:
        ledger_sizes[ledger] = max(ledger_sizes.get(ledger, 0), entry + 1)
        known.add(ledger, entry)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    split = [shuffled[i::parts] for i in range(parts)]
    folded: list[dict[str, Any]] = []
    for chunk in split:
        for out in fold_acks(_batches(chunk, sizes), now_ms=NOW, positions=known.to_bytes()):
            folded.extend(out.to_pylist())
    cursors, read, problems, counts = merge_ack_folds(folded, ledger_sizes)
    assert read == len(rows)
    assert problems.counts.get("acks_after_now", 0) == sum(r["ack_time"] > NOW for r in rows)

    table = pa.Table.from_pylist(rows, schema=pa.schema([(c.name, c.type) for c in schema.ACK_COLUMNS]))
    want = replay_acks(table, NOW, ledger_sizes, sizes)
    assert sorted(cursors) == sorted(want)
    for name, c in want.items():
        got = cursors[name]
        assert got.mark_delete_position == c.mark_delete_position, name
        assert got.individually_deleted == c.individually_deleted, name
        assert got.batches() == c.batches(), name
    # nack rows (beyond Pulsar): each unacknowledged position's count is how many it has
    wanted_counts = replay_redeliveries(table, NOW, sizes, want)
    got_counts = {
        name: {(a.ledger_id, e): n for a, b, n in c.runs() for e in range(a.entry_id, b.entry_id + 1)}
        for name, c in counts.items()
    }
    assert {k: v for k, v in got_counts.items() if v} == wanted_counts


def test_fold_counts_and_samples_bad_rows() -> None:
    known = RangeSet()
    known.add_open_closed(4, -1, 4, 9)
    rows = [
        {
            "subscription": "s",
            "ledger_id": 4,
            "entry_id": 1,
            "batch_index": None,
            "ack_type": "individual",
            "ack_time": 5,
        },
        {
            "subscription": None,
            "ledger_id": 4,
            "entry_id": 2,
            "batch_index": None,
            "ack_type": "individual",
            "ack_time": 5,
        },
        {
            "subscription": "s",
            "ledger_id": 4,
            "entry_id": 3,
            "batch_index": None,
            "ack_type": "skip",
            "ack_time": 5,
        },
        {
            "subscription": "s",
            "ledger_id": 4,
            "entry_id": 4,
            "batch_index": 3,
            "ack_type": "individual",
            "ack_time": 5,
            "batch_size": 2,
        },
        {
            "subscription": "s",
            "ledger_id": 4,
            "entry_id": -1,
            "batch_index": None,
            "ack_type": "individual",
            "ack_time": 5,
        },
    ]
    table = pa.Table.from_pylist([{"batch_size": None, **r} for r in rows], schema=ACK_ARROW)
    (out,) = fold_acks(table.to_batches(), now_ms=NOW, positions=known.to_bytes())
    stats = json.loads(out.column("stats")[out.num_rows - 1].as_py())
    counts, samples = stats["problems"]["counts"], stats["problems"]["samples"]
    assert counts == {
        "null_subscription": 1,
        "bad_ack_type": 1,
        "acks_batch_index_out_of_range": 1,
        "negative_position": 1,
    }
    assert samples["bad_ack_type"]["ack_type"] == "skip"
    assert samples["acks_batch_index_out_of_range"]["batch_index"] == 3


# --- the message index ----------------------------------------------------------------------------


MSG_ARROW = pa.schema([(c.name, c.type) for c in schema.MESSAGE_COLUMNS])


def _msgs(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in MSG_ARROW]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(cols, MSG_ARROW, strict=True)], schema=MSG_ARROW
    )


def _index(batches: list[pa.RecordBatch], max_delay: int = 10_000) -> tuple[dict[str, Any], pa.Table]:
    (out,) = index_messages(batches, now_ms=NOW, max_delay_ms=max_delay)
    t = pa.Table.from_batches([out])
    stats = json.loads(t.column("stats")[t.num_rows - 1].as_py())
    return stats, t


def test_index_classifies_delayed_messages_and_counts_per_ledger() -> None:
    rows = [
        (2, 0, 10, None, "a", 1),
        (2, 1, 10, 5, "a", 1),  # deliver-at before publish: not delayed
        (2, 2, 10, NOW, "b", 1),  # due
        (2, 3, 10, NOW + 1, None, 3),  # not yet due
        (5, 0, 10, NOW + 20_000, "c", 1),  # beyond the max delay
        (5, 1, 10, NOW + 3_600_000 * 0 + 7, "c", 1),
    ]
    stats, t = _index([_msgs(rows[:3]), _msgs(rows[3:])])
    assert stats["rows"] == 6 and stats["delayed"] == 4
    assert stats["delayed_due"] == 1 and stats["delayed_beyond_max_delay"] == 1
    per = {r["ledger_id"]: r for r in t.to_pylist() if r["ledger_id"] >= 0}
    assert {k: v["rows"] for k, v in per.items()} == {2: 4, 5: 2}
    assert {k: v["not_yet_due"] for k, v in per.items()} == {2: 1, 5: 1}
    assert stats["hours"] == {"0": 2}
    slots = np.frombuffer(t.column("range_slots")[t.num_rows - 1].as_py(), dtype=np.int64)
    assert slots.sum() == 6 and stats["problems"]["counts"] == {}


@pytest.mark.parametrize(
    ("rows", "problem", "column_value"),
    [
        ([(1, 0, 5, None, None, 1), (1, None, 5, None, None, 1)], "null_entry_id", ("entry_id", None)),
        ([(1, 0, 5, None, None, 1), (-1, 0, 5, None, None, 1)], "negative_ledger_id", ("ledger_id", -1)),
        ([(1, 0, 5, None, None, 1), (1, 0, 6, None, None, 1)], "duplicate_position", ("entry_id", 0)),
        ([(1, 0, 5, 10**17, None, 1)], "implausible_deliver_at", ("deliver_at", 10**17)),
        ([(1, 0, 5 * 10**15, None, None, 1)], "implausible_publish_time", ("publish_time", 5 * 10**15)),
        ([(1, 0, 5, None, None, 0)], "bad_batch_size", ("batch_size", 0)),
    ],
)
def test_index_reports_problems_with_a_sample(
    rows: list[tuple[Any, ...]], problem: str, column_value: tuple[str, Any]
) -> None:
    stats, _ = _index([_msgs(rows)])
    assert stats["problems"]["counts"][problem] == 1
    column, value = column_value
    assert stats["problems"]["samples"][problem][column] == value


def test_index_finds_duplicates_across_batches() -> None:
    stats, _ = _index([_msgs([(1, 0, 5, None, None, 1)]), _msgs([(1, 0, 9, None, None, 1)])])
    assert stats["problems"]["counts"] == {"duplicate_position": 1}


# --- the bucket plan and the built buckets --------------------------------------------------------


@given(st.dictionaries(st.integers(0, 60), st.integers(0, 40), max_size=30), st.integers(1, 80))
def test_plan_follows_the_seal_rule(counts: dict[int, int], minimum: int) -> None:
    plan = plan_buckets(counts, minimum)
    assert sum(b.messages for b in plan) == sum(counts.values())
    covered = [lg for lg in sorted(counts) if counts[lg]]
    pos = 0
    for i, b in enumerate(plan):
        mine = [lg for lg in covered if b.start_ledger_id <= lg <= b.end_ledger_id]
        assert (
            mine == covered[pos : pos + len(mine)]
            and mine[0] == b.start_ledger_id
            and mine[-1] == b.end_ledger_id
        )
        pos += len(mine)
        assert b.messages == sum(counts[lg] for lg in mine)
        # Sealed at the first ledger boundary at or past the minimum, never earlier.
        assert sum(counts[lg] for lg in mine[:-1]) < minimum
        if i < len(plan) - 1:
            assert b.messages >= minimum
    assert pos == len(covered)


def test_plan_refuses_a_bad_minimum() -> None:
    with pytest.raises(InvalidArgument):
        plan_buckets({1: 1}, 0)


@given(
    st.lists(
        st.tuples(st.integers(NOW + 1, NOW + 3_000_000), st.integers(0, 5), st.integers(0, 300)),
        min_size=1,
        max_size=400,
        unique_by=lambda t: (t[1], t[2]),
    ),
    st.integers(1, 150),
    st.integers(1, 60),
    st.integers(1, 3),
    st.randoms(use_true_random=False),
)
def test_built_index_recovers_and_emits_in_deliver_at_order(
    indexes: list[tuple[int, int, int]], minimum: int, per_segment: int, parts: int, rnd: random.Random
) -> None:
    counts: dict[int, int] = {}
    for _, ledger, _ in indexes:
        counts[ledger] = counts.get(ledger, 0) + 1
    plan = plan_buckets(counts, minimum)
    shuffled = indexes[:]
    rnd.shuffle(shuffled)
    table = pa.table(
        {
            "ledger_id": pa.array([r[1] for r in shuffled], pa.int64()),
            "entry_id": pa.array([r[2] for r in shuffled], pa.int64()),
            "deliver_at": pa.array([r[0] for r in shuffled], pa.int64()),
        }
    )
    tagged = pa.Table.from_batches(
        list(tag_buckets(table.to_batches(max_chunksize=50), starts=[b.start_ledger_id for b in plan])),
        schema=BUCKET_ID_SCHEMA,
    )
    buckets = tagged.column("bucket").to_pylist()
    # Spark's repartition by bucket: every bucket's rows in one partition, several buckets per partition.
    owner = {b: rnd.randrange(parts) for b in set(buckets)}
    built: list[pa.RecordBatch] = []
    for p in range(parts):
        mine = tagged.filter(pa.array([owner[b] == p for b in buckets]))
        built += build_buckets(
            mine.to_batches(max_chunksize=64),
            max_time_step_ms=60_000,
            max_indexes_per_segment=per_segment,
            cursors={},
        )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows, dropped = write_buckets(
            root, plan, pa.Table.from_batches(built, schema=BUCKETS_SCHEMA), topic="t", fsync=False
        )
        assert dropped == 0
        assert [(r.start_ledger_id, r.end_ledger_id, r.messages) for r in rows] == [
            (b.start_ledger_id, b.end_ledger_id, b.messages) for b in plan
        ]
        clock = [NOW]
        tracker = BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(root / "buckets", fsync=False),
            FileCursorProperties(root / "cursor.properties"),
            clock=lambda: clock[0],
            strict=True,
            background=False,
            cursor="shared-delayed-index",
            topic="t",
        )
        try:
            assert tracker.number_of_delayed_messages == len(indexes)
            assert not tracker.has_message_available()
            clock[0] = max(r[0] for r in indexes)
            emitted = []
            while len(got := tracker.get_scheduled_messages(1)):
                emitted.append((int(got[0][0]), int(got[0][1])))
        finally:
            tracker.close()
    want = sorted(indexes)
    at = {(lg, e): t for t, lg, e in indexes}
    assert sorted(emitted) == sorted((lg, e) for _, lg, e in want)
    times = [at[p] for p in emitted]
    assert times == sorted(times)


def test_build_drops_what_every_subscription_acked() -> None:
    import pickle

    from cursorkit._core import Position
    from cursorkit.ackstate import Cursor

    a = Cursor(Position(1, -1), name="a")
    b = Cursor(Position(1, -1), name="b")
    for c in (a, b):
        c.ack(Position(1, 2))
    a.ack(Position(1, 3))
    tagged = pa.table(
        {
            "bucket": pa.array([0, 0, 0], pa.int32()),
            "ledger_id": [1, 1, 1],
            "entry_id": [2, 3, 4],
            "deliver_at": [NOW + 5, NOW + 6, NOW + 7],
        },
        schema=BUCKET_ID_SCHEMA,
    )
    (out,) = build_buckets(
        tagged.to_batches(),
        max_time_step_ms=60_000,
        max_indexes_per_segment=10,
        cursors={"a": pickle.dumps(a), "b": pickle.dumps(b)},
    )
    row = out.to_pylist()[0]
    assert row["messages"] == 2 and row["dropped_acked"] == 1
    assert row["first_deliver_at"] == NOW + 6
    assert PlannedBucket(1, 1, 3).messages == 3
