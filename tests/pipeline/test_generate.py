"""``cursorkit.pipeline.generate``: the synthetic logs' schema, determinism and invariants (no Spark)."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit.errors import InvalidArgument, InvalidInputType
from cursorkit.pipeline import schema
from cursorkit.pipeline.generate import GenerateSummary, generate
from cursorkit.pipeline.generate_acks import subscription_progress

START = 1_767_225_600_000


def read_log(directory: Path, columns: tuple[schema.Column, ...]) -> tuple[pa.Table, list[int]]:
    """All part files of a log, in file order, checked against the schema; and their row counts."""
    files = sorted(directory.iterdir())
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(len(files))]
    tables = [pq.read_table(f) for f in files]
    for table in tables:
        assert table.schema.names == [c.name for c in columns]
        assert [f.type for f in table.schema] == [c.type for c in columns]
        assert [f.nullable for f in table.schema] == [c.nullable for c in columns]
    return pa.concat_tables(tables), [t.num_rows for t in tables]


@dataclass
class Logs:
    summary: GenerateSummary
    messages: pa.Table
    acks: pa.Table
    message_rows: list[int]
    ack_rows: list[int]
    args: dict[str, Any]
    col: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = self.messages
        self.col["ledger"] = m["ledger_id"].to_numpy()
        self.col["entry"] = m["entry_id"].to_numpy()
        self.col["publish"] = m["publish_time"].to_numpy()
        self.col["delayed"] = m["deliver_at"].is_valid().to_numpy(zero_copy_only=False)
        self.col["deliver"] = m["deliver_at"].fill_null(0).to_numpy()
        self.col["batch"] = m["batch_size"].to_numpy()
        self.col["due"] = np.maximum(self.col["publish"], self.col["deliver"])

    def row_of(self, ledger: np.ndarray, entry: np.ndarray) -> np.ndarray:
        """Message-log row of each (ledger, entry); -1 where the position does not exist."""
        ids, first = np.unique(self.col["ledger"], return_index=True)
        sizes = np.diff(np.append(first, len(self.col["ledger"])))
        at = np.clip(np.searchsorted(ids, ledger), 0, len(ids) - 1)
        ok = (ids[at] == ledger) & (entry >= 0) & (entry < sizes[at])
        return np.where(ok, first[at] + entry, -1)


def make(out: Path, **kwargs: Any) -> Logs:
    summary = generate(out, **kwargs)
    messages, message_rows = read_log(summary.messages_path, schema.MESSAGE_COLUMNS)
    acks, ack_rows = read_log(summary.acks_path, schema.ACK_COLUMNS)
    return Logs(summary, messages, acks, message_rows, ack_rows, kwargs)


BIG = {
    "messages": 200_000,
    "ledgers": 40,
    "keys": 1_000,
    "delayed_fraction": 0.1,
    "subscriptions": 4,
    "seed": 11,
    "batch_fraction": 0.1,
    "rows_per_file": 60_000,
}


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Logs:
    return make(tmp_path_factory.mktemp("big"), **BIG)


def check_invariants(logs: Logs) -> None:
    """What holds for every generated pair of logs, whatever the arguments."""
    a, s, c = logs.args, logs.summary, logs.col
    n = a["messages"]
    rows_per_file = a.get("rows_per_file", 1_000_000)
    start_ms = a.get("start_ms", START)

    # Counts and files.
    assert logs.messages.num_rows == s.messages == n
    assert logs.acks.num_rows == s.acks
    assert len(logs.message_rows) == math.ceil(n / rows_per_file)
    assert all(0 < r <= rows_per_file for r in logs.message_rows)
    assert all(r <= rows_per_file for r in logs.ack_rows)
    assert s.files == len(logs.message_rows) + len(logs.ack_rows)
    assert s.subscriptions == [f"sub-{i}" for i in range(a["subscriptions"])]
    assert s.ledgers == a["ledgers"]

    # Ledgers: increasing ids from 3 with steps 1..4, dense entry ids 0..size-1, rows in position order.
    ledger, entry = c["ledger"], c["entry"]
    ids, first = np.unique(ledger, return_index=True)
    assert len(ids) == a["ledgers"] and ids[0] == 3
    assert np.all(np.diff(ledger) >= 0)
    assert set(np.diff(ids).tolist()) <= {1, 2, 3, 4}
    sizes = np.diff(np.append(first, n))
    assert np.array_equal(entry, np.arange(n) - np.repeat(first, sizes))

    # Time, delays, batches, keys.
    publish = c["publish"]
    assert publish[0] == start_ms and np.all(np.diff(publish) >= 0)
    assert s.now_ms == publish.max()
    assert s.delayed == int(c["delayed"].sum())
    delay = (c["deliver"] - publish)[c["delayed"]]
    assert np.all(delay >= 60_000) and np.all(delay <= 3 * 86_400_000)
    batch = c["batch"]
    assert np.all((batch == 1) | ((batch >= 2) & (batch <= 16)))
    keys = logs.messages["key"]
    distinct = pc.count_distinct(keys).as_py()
    assert distinct == s.keys <= a["keys"]
    width = max(6, len(str(a["keys"] - 1)))
    for k in keys.drop_null().unique().to_pylist():
        assert k.startswith("key-") and len(k) == 4 + width and 0 <= int(k[4:]) < a["keys"]

    # Acks: existing positions, legal batch indexes, in the past, not before the message was due.
    acks = logs.acks
    rows = logs.row_of(acks["ledger_id"].to_numpy(), acks["entry_id"].to_numpy())
    assert np.all(rows >= 0)
    ack_time = acks["ack_time"].to_numpy()
    assert np.all(ack_time <= s.now_ms)
    failover = np.isin(acks["subscription"].to_numpy(zero_copy_only=False), s.subscriptions[::3])
    ready = np.where(failover, c["publish"][rows], c["due"][rows])  # Failover is not delayed
    assert np.all(ack_time >= ready)
    has_index = acks["batch_index"].is_valid().to_numpy(zero_copy_only=False)
    index = acks["batch_index"].fill_null(-1).to_numpy()
    assert np.all(index[has_index] >= 0)
    assert np.all(index[has_index] < batch[rows][has_index])
    assert np.all(batch[rows][has_index] > 1)
    assert set(acks["ack_type"].unique().to_pylist()) <= set(schema.ACK_TYPES)

    # Subscriptions written one after the other, each sorted by ack_time, each within its progress.
    subs = acks["subscription"].to_pylist()
    order = [name for i, name in enumerate(subs) if i == 0 or subs[i - 1] != name]
    assert order == [name for name in s.subscriptions if name in set(subs)]
    cumulative = acks["ack_type"].to_numpy(zero_copy_only=False) == schema.ACK_CUMULATIVE
    sub_col = np.array(subs, dtype=object)
    for i, name in enumerate(s.subscriptions):
        mine = sub_col == name
        assert np.all(np.diff(ack_time[mine]) >= 0)
        assert np.all(rows[mine] < math.floor(subscription_progress(i) * n))
        if i % 3:
            assert not cumulative[mine].any()
        replay_subscription(
            rows[mine],
            np.where(has_index[mine], index[mine], None),
            cumulative[mine],
            ack_time[mine],
            logs.col["publish"] if i % 3 == 0 else logs.col["due"],
        )


def replay_subscription(
    rows: np.ndarray, index: np.ndarray, cumulative: np.ndarray, ack_time: np.ndarray, due: np.ndarray
) -> None:
    """Pure-Python model of one subscription's cursor, fed the rows in log order.

    Cumulative acks only move forward and cover only messages due by their time; individual acks are
    all beyond the last cumulative one (the consumer switches style at its first hole, never back), and
    none comes before its message was due (``due``: when each message reached this subscription).
    """
    mark = -1  # last row the cumulative acks cover fully
    max_due = 0
    cursor = 0
    cumulative_rows = rows[cumulative]
    if len(cumulative_rows):
        assert np.all(rows[~cumulative] > cumulative_rows.max())
    columns = (rows.tolist(), index.tolist(), cumulative.tolist(), ack_time.tolist())
    for row, idx, cum, t in zip(*columns, strict=True):
        if cum:
            assert row > mark, "a cumulative ack that does not move forward"
            while cursor <= row:
                max_due = max(max_due, int(due[cursor]))
                cursor += 1
            assert max_due <= t, "a cumulative ack covering a message not yet due"
            mark = row if idx is None else row - 1
        else:
            assert due[row] <= t


def test_schema_and_invariants(big: Logs) -> None:
    check_invariants(big)
    assert len(big.message_rows) == 4


def test_ledger_sizes_vary_around_mean(big: Logs) -> None:
    _, counts = np.unique(big.col["ledger"], return_counts=True)
    mean = BIG["messages"] / BIG["ledgers"]
    assert counts.min() >= 0.5 * mean - 1 and counts.max() <= 1.5 * mean + 1
    assert counts.std() > 0.1 * mean
    ids = np.unique(big.col["ledger"])
    assert (np.diff(ids) > 1).any()


def test_publish_time_bursty_and_spans_minutes(big: Logs) -> None:
    publish = big.col["publish"]
    span_min = (publish[-1] - publish[0]) / 60_000
    assert 1 < span_min < 60
    # The rate changes per ledger: mean gap of the fastest and slowest ledger differ a lot.
    ids, first = np.unique(big.col["ledger"], return_index=True)
    last = np.append(first[1:], len(publish)) - 1
    rates = (publish[last] - publish[first]) / (last - first)
    assert rates.max() > 4 * rates.min()


def test_delayed_fraction_and_due_split(big: Logs) -> None:
    n, p = BIG["messages"], BIG["delayed_fraction"]
    delayed = big.col["delayed"]
    assert abs(delayed.sum() - n * p) < 5 * math.sqrt(n * p * (1 - p))
    deliver = big.col["deliver"][delayed]
    assert np.all(deliver > big.col["publish"][delayed])
    due_now = (deliver <= big.summary.now_ms).mean()
    assert 0.05 < due_now < 0.5


def test_batches(big: Logs) -> None:
    batch = big.col["batch"]
    p = BIG["batch_fraction"]
    assert abs((batch > 1).mean() - p) < 0.01
    assert batch.max() == 16 and batch[batch > 1].min() == 2


def test_key_skew(big: Logs) -> None:
    keys = big.messages["key"]
    nulls = keys.null_count / len(keys)
    assert 0.005 < nulls < 0.015
    counts = pc.value_counts(keys.drop_null())
    top = max(c.as_py() for c in counts.field("counts")) / len(keys)
    assert top > 50 / BIG["keys"]
    assert big.summary.keys > 0.5 * BIG["keys"]


def test_ack_shapes(big: Logs) -> None:
    acks = big.acks.to_pandas()
    rows = big.row_of(acks["ledger_id"].to_numpy(), acks["entry_id"].to_numpy())
    acks["row"] = rows
    n = BIG["messages"]
    assert set(acks["subscription"]) == {"sub-0", "sub-1", "sub-2", "sub-3"}
    # Failover-style subscriptions start cumulative; shared ones never are.
    for name in ("sub-0", "sub-3"):
        kinds = acks[acks.subscription == name].ack_type
        assert (kinds == schema.ACK_CUMULATIVE).sum() >= 1
    # Progress decreasing: each subscription acks up to about its progress point.
    for i in range(4):
        mine = acks[acks.subscription == f"sub-{i}"]
        assert mine.row.max() > (subscription_progress(i) - 0.01) * n
    # Shared subscription: whole-entry, by-index (some partial) and duplicate acks all occur.
    shared = acks[acks.subscription == "sub-1"]
    batch = big.col["batch"]
    on_batch = shared[batch[shared.row] > 1]
    whole = on_batch.batch_index.isna().sum()
    by_index = on_batch[on_batch.batch_index.notna()]
    assert whole > 0 and len(by_index) > 0
    acked_indexes = by_index.drop_duplicates(["row", "batch_index"]).groupby("row").size()
    complete = acked_indexes.to_numpy() == batch[acked_indexes.index.to_numpy()]
    assert complete.any() and not complete.all()
    dups = shared.duplicated(["row", "batch_index"]).sum()
    assert 0 < dups < 0.005 * len(shared)
    # Lost messages: some messages well before the progress point and already due are never acked.
    due = big.col["due"]
    early = np.arange(int(0.5 * n))
    ready = early[due[early] < big.summary.now_ms - 5_000]
    never = np.setdiff1d(ready, shared.row.to_numpy())
    assert 0.001 * len(ready) < len(never) < 0.02 * len(ready)
    # Delayed messages not yet due are never acked by Shared subscriptions (Failover is not delayed).
    not_due = np.flatnonzero(big.col["deliver"] > big.summary.now_ms)
    shared_rows = acks[~acks.subscription.isin(["sub-0", "sub-3"])].row.to_numpy()
    assert not np.isin(not_due, shared_rows).any()


def test_failover_cumulative_with_batch_index(tmp_path: Path) -> None:
    # No delays and no lost-message luck needed: with a few batches, cumulative acks ending inside one occur.
    logs = make(
        tmp_path / "out",
        messages=300_000,
        ledgers=10,
        keys=100,
        delayed_fraction=0.0,
        subscriptions=1,
        seed=5,
        batch_fraction=0.5,
    )
    check_invariants(logs)
    acks = logs.acks.to_pandas()
    cumulative = acks[acks.ack_type == schema.ACK_CUMULATIVE]
    assert len(cumulative) >= 2
    assert cumulative.batch_index.notna().any()


def test_deterministic(tmp_path: Path) -> None:
    args = {**BIG, "messages": 20_000, "rows_per_file": 7_000}
    first = make(tmp_path / "a", **args)
    again = make(tmp_path / "b", **args)
    other = make(tmp_path / "c", **{**args, "seed": args["seed"] + 1})
    assert first.messages.equals(again.messages) and first.acks.equals(again.acks)
    assert first.message_rows == again.message_rows and first.ack_rows == again.ack_rows
    assert not first.messages.equals(other.messages)
    assert not first.acks.equals(other.acks)
    # More subscriptions leave the message log and the earlier subscriptions' acks unchanged.
    more = make(tmp_path / "d", **{**args, "subscriptions": args["subscriptions"] + 1})
    assert more.messages.equals(first.messages)
    kept = more.acks.filter(pc.not_equal(more.acks["subscription"], "sub-4"))
    assert kept.equals(first.acks)


def test_no_subscriptions_writes_empty_ack_file(tmp_path: Path) -> None:
    logs = make(tmp_path, messages=10, ledgers=2, keys=3, delayed_fraction=0.5, subscriptions=0, seed=1)
    assert logs.acks.num_rows == 0 and logs.ack_rows == [0]
    assert logs.summary.acks == 0 and logs.summary.subscriptions == []
    check_invariants(logs)


def test_existing_output_refused(tmp_path: Path) -> None:
    args = {"messages": 10, "ledgers": 1, "keys": 1, "delayed_fraction": 0.0, "subscriptions": 1, "seed": 0}
    generate(tmp_path, **args)
    with pytest.raises(InvalidArgument, match="already exists"):
        generate(tmp_path, **args)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "acks").mkdir()
    with pytest.raises(InvalidArgument, match="acks"):
        generate(tmp_path / "other", **args)
    assert not (tmp_path / "other" / "messages").exists()
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["acks"]


GOOD: dict[str, Any] = {
    "messages": 100,
    "ledgers": 3,
    "keys": 10,
    "delayed_fraction": 0.1,
    "subscriptions": 2,
    "seed": 1,
}


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"messages": 0}, InvalidArgument),
        ({"ledgers": 0}, InvalidArgument),
        ({"ledgers": 101}, InvalidArgument),
        ({"keys": 0}, InvalidArgument),
        ({"keys": 2**31 + 1}, InvalidArgument),
        ({"delayed_fraction": -0.1}, InvalidArgument),
        ({"delayed_fraction": 1.5}, InvalidArgument),
        ({"delayed_fraction": float("nan")}, InvalidArgument),
        ({"batch_fraction": 2}, InvalidArgument),
        ({"subscriptions": -1}, InvalidArgument),
        ({"seed": -1}, InvalidArgument),
        ({"rows_per_file": 0}, InvalidArgument),
        ({"start_ms": -5}, InvalidArgument),
        ({"messages": 10.0}, InvalidInputType),
        ({"messages": True}, InvalidInputType),
        ({"keys": "10"}, InvalidInputType),
        ({"delayed_fraction": "0.1"}, InvalidInputType),
        ({"batch_fraction": None}, InvalidInputType),
        ({"seed": 1.5}, InvalidInputType),
    ],
)
def test_argument_validation(tmp_path: Path, change: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        generate(tmp_path, **{**GOOD, **change})
    assert list(tmp_path.iterdir()) == []


def test_out_type_checked() -> None:
    with pytest.raises(InvalidInputType):
        generate(42, **GOOD)  # type: ignore[arg-type]


def test_numpy_integers_accepted(tmp_path: Path) -> None:
    summary = generate(tmp_path, **{**GOOD, "messages": np.int64(50), "delayed_fraction": np.float32(0.2)})
    assert summary.messages == 50


@settings(max_examples=40)
@given(
    data=st.data(),
    messages=st.integers(1, 400),
    keys=st.integers(1, 2_000),
    delayed_fraction=st.sampled_from([0.0, 0.05, 0.5, 1.0]),
    batch_fraction=st.sampled_from([0.0, 0.05, 0.5, 1.0]),
    subscriptions=st.integers(0, 4),
    seed=st.integers(0, 2**64),
    rows_per_file=st.integers(40, 500),
)
def test_invariants_small_logs(
    data: st.DataObject,
    messages: int,
    keys: int,
    delayed_fraction: float,
    batch_fraction: float,
    subscriptions: int,
    seed: int,
    rows_per_file: int,
) -> None:
    ledgers = data.draw(st.integers(1, messages), label="ledgers")
    with tempfile.TemporaryDirectory() as out:
        logs = make(
            Path(out),
            messages=messages,
            ledgers=ledgers,
            keys=keys,
            delayed_fraction=delayed_fraction,
            batch_fraction=batch_fraction,
            subscriptions=subscriptions,
            seed=seed,
            rows_per_file=rows_per_file,
            start_ms=1_000,
        )
        check_invariants(logs)
        if delayed_fraction == 0.0:
            assert not logs.col["delayed"].any()
        if delayed_fraction == 1.0:
            assert logs.col["delayed"].all()
        if batch_fraction == 0.0:
            assert np.all(logs.col["batch"] == 1)
