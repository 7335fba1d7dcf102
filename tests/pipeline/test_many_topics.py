"""Many-topic rebuild on local Spark: each topic's stores equal its one-topic rebuild, byte for byte.

Problems name their topic, and the root manifest is the commit point across killed and repeated runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.pipeline import cluster
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.generate import generate
from cursorkit.pipeline.load import list_topics, open_delayed_index, read_cursors, read_manifest
from cursorkit.pipeline.output import RUNS_DIR
from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
from cursorkit.pipeline.topic_risk import risk_order
from cursorkit.pipeline.topic_stages.index import dense_slots, sparse_slots
from cursorkit.pipeline.topic_stages.split import split_by_topic
from cursorkit.pipeline.topics_output import TOPICS_MANIFEST_FORMAT

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPICS = [
    "persistent://tenant/ns/orders",
    "persistent://tenant/ns/clicks-partition-0",
    "persistent://tenant/ns/clicks-partition-1",
    "persistent://other/ns/Ünïcode topic",
]
CFG = RebuildConfig(min_index_count_per_bucket=150, max_indexes_per_segment=60)
STATE_ONLY = dataclasses.replace(CFG, report=False)
"""For tests that compare the rebuilt state: the HTML report (3-4 s of matplotlib a many-topic run)
is checked by ``test_cluster_report`` and the commit-point tests write it."""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four topics' logs generated apart (different sizes, seeds, subscriptions), then interleaved."""
    root = tmp_path_factory.mktemp("topics")
    for i, _ in enumerate(TOPICS):
        generate(
            root / f"t{i}",
            messages=800 + 900 * i,
            ledgers=2 + i,
            keys=40,
            delayed_fraction=0.3,
            subscriptions=1 + i % 3,
            seed=11 + i,
            rows_per_file=700,
        )
    for i, _ in enumerate(TOPICS):
        _add_nacks(root / f"t{i}")
    for kind in ("messages", "acks"):
        tables = []
        for i, topic in enumerate(TOPICS):
            t = pq.read_table(root / f"t{i}" / kind)
            tables.append(t.append_column("topic", pa.array([topic] * t.num_rows, pa.string())))
        both = pa.concat_tables(tables)
        order = sorted(range(both.num_rows), key=lambda r: (r * 7919) % both.num_rows)  # interleave topics
        (root / "all" / kind).mkdir(parents=True)
        pq.write_table(both.take(order), root / "all" / kind / "part-0.parquet", row_group_size=500)
    return root


def _add_nacks(topic: Path) -> None:
    """Nack rows (beyond Pulsar) of every 40th message for the first subscription, some twice."""
    acks = pq.read_table(topic / "acks")
    msgs = pq.read_table(topic / "messages").slice(0, None)
    pick = list(range(0, msgs.num_rows, 40))
    rows = [*pick, *pick[::3]]
    sub = acks.column("subscription")[0].as_py()
    nacks = {
        "subscription": [sub] * len(rows),
        "ledger_id": [msgs.column("ledger_id")[r].as_py() for r in rows],
        "entry_id": [msgs.column("entry_id")[r].as_py() for r in rows],
        "batch_index": [None] * len(rows),
        "ack_type": ["nack"] * len(rows),
        "ack_time": [msgs.column("publish_time")[r].as_py() for r in rows],
    }
    table = pa.table({n: nacks[n] for n in acks.schema.names}, schema=acks.schema)
    pq.write_table(table, topic / "acks" / "part-nacks.parquet")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_each_topic_equals_its_one_topic_rebuild(spark: Any, logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = cluster.rebuild_topics(spark, logs / "all" / "messages", logs / "all" / "acks", out, STATE_ONLY)
    assert sorted(summary.topics) == sorted(TOPICS)
    assert list_topics(out).keys() == set(TOPICS)
    # The manifest lists every file of every topic with its size and SHA-256.
    doc = json.loads((out / "manifest.json").read_text())
    assert doc["format"] == TOPICS_MANIFEST_FORMAT
    for topic, entry in doc["topics"].items():
        for f in entry["files"]:
            data = (out / entry["dir"] / f["path"]).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"]), (topic, f)
    stores_with_counts = 0
    for i, topic in enumerate(TOPICS):
        single = tmp_path / f"single{i}"
        alone = rebuild(
            spark,
            logs / f"t{i}" / "messages",
            logs / f"t{i}" / "acks",
            single,
            dataclasses.replace(STATE_ONLY, topic=topic),
        )
        mine = out / summary.topics[topic]["dir"]
        for part in ("cursors", "delayed"):
            assert _files(mine / part) == _files(single / part), (topic, part)
        assert summary.topics[topic]["messages"] == alone.inputs["messages"]
        assert summary.topics[topic]["buckets"] == len(alone.buckets)
        assert summary.topics[topic]["backlog"] == sum(c.backlog for c in alone.cursors)
        # The library reads a topic of the output as it reads a one-topic output.
        assert read_manifest(out, topic).topic == topic
        nacked = [c for c in (mine / "cursors").iterdir() if (c / "redeliveries").exists()]
        assert len(nacked) <= 1, (topic, nacked)  # only the first subscription has nack rows
        stores_with_counts += len(nacked)
        cursors = read_cursors(out, topic=topic)
        assert {n: str(c.mark_delete_position) for n, c in cursors.items()} == {
            c.subscription: c.mark_delete for c in alone.cursors
        }
        now = read_manifest(out, topic).now_ms
        tracker = open_delayed_index(out, topic, clock=lambda now=now: now, strict=True, background=False)
        assert (tracker.number_of_delayed_messages if tracker else 0) == sum(
            b.messages for b in alone.buckets
        )
    assert stores_with_counts, "no rebuilt store kept the nack rows' redelivery counts"
    with pytest.raises(InvalidArgument, match="holds 4 topics"):
        read_manifest(out)


def test_a_bad_row_names_its_topic(spark: Any, logs: Path, tmp_path: Path) -> None:
    t = pq.read_table(logs / "all" / "messages")
    ledgers = t.column("ledger_id").to_pylist()
    topics = t.column("topic").to_pylist()
    victim = next(i for i, tp in enumerate(topics) if tp == TOPICS[2])
    ledgers[victim] = -5
    bad = t.set_column(t.schema.get_field_index("ledger_id"), "ledger_id", pa.array(ledgers, pa.int64()))
    (tmp_path / "m").mkdir()
    pq.write_table(bad, tmp_path / "m" / "part-0.parquet")
    with pytest.raises(InvalidInput, match="topic 'persistent://tenant/ns/clicks-partition-1'") as e:
        cluster.rebuild_topics(spark, tmp_path / "m", None, tmp_path / "out", CFG)
    assert e.value.topic == TOPICS[2] and e.value.column == "ledger_id"
    nulls = t.set_column(
        t.schema.get_field_index("topic"), "topic", pa.array([None] + topics[1:], pa.string())
    )
    (tmp_path / "n").mkdir()
    pq.write_table(nulls, tmp_path / "n" / "part-0.parquet")
    with pytest.raises(InvalidInput, match="topic is null"):
        cluster.rebuild_topics(spark, tmp_path / "n", None, tmp_path / "out", CFG)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_manifest_is_the_commit_point(spark: Any, logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = cluster.rebuild_topics(spark, logs / "all" / "messages", logs / "all" / "acks", out, CFG)
    before = _files(out)
    # A run killed after its tasks wrote: its staging is on disk, the manifest still names the first run.
    killed = out / RUNS_DIR / "20260101T000000-deadbeef" / "topics" / "x" / "a7"
    killed.mkdir(parents=True)
    (killed / "manifest.json").write_text("{}")
    stray = out / first.topics[TOPICS[0]]["dir"] / ".." / "a999999"  # a speculative attempt's copy
    stray.mkdir()
    (stray / "summary.json").write_text("{}")
    assert read_manifest(out, TOPICS[0]).root == out / first.topics[TOPICS[0]]["dir"]
    assert sorted(read_cursors(out, topic=TOPICS[1])) == sorted(
        read_cursors(out / first.topics[TOPICS[1]]["dir"])
    )
    # The next run cleans what no manifest names and commits its own.
    second = cluster.rebuild_topics(spark, logs / "all" / "messages", logs / "all" / "acks", out, CFG)
    assert second.run != first.run
    assert sorted(p.name for p in (out / RUNS_DIR).iterdir()) == [second.run]
    for topic in TOPICS:
        a, b = out / second.topics[topic]["dir"], Path(first.topics[topic]["dir"])
        assert _files(a / "cursors") == {
            k.removeprefix(f"{b.as_posix()}/cursors/"): v
            for k, v in before.items()
            if k.startswith(f"{b.as_posix()}/cursors/")
        }
    # An output that is not a rebuild's is never replaced.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgument, match="not a rebuild's output"):
        cluster.rebuild_topics(spark, logs / "all" / "messages", None, foreign, CFG)


def test_cli_rebuilds_and_inspects_many_topics(
    spark: Any, logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["--min-index-count-per-bucket", "150", "--max-indexes-per-segment", "60", "--no-report"]
    assert (
        main(
            [
                "rebuild",
                "--messages",
                str(logs / "all" / "messages"),
                "--acks",
                str(logs / "all" / "acks"),
                "--out",
                str(out),
                *args,
            ]
        )
        == 0
    )
    assert "4 topics, riskiest first" in capsys.readouterr().out
    assert main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    assert all(t[:20] in shown for t in TOPICS)
    assert main(["inspect", str(out), "--topic", TOPICS[3]]) == 0
    assert TOPICS[3] in capsys.readouterr().out
    assert main(["inspect", str(out), "--topic", "persistent://no/such/topic"]) == 2


def test_sparse_slot_histograms_round_trip() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    hists = [np.zeros(65536, dtype=np.int64) for _ in range(3)]
    for h in hists:
        h[rng.integers(0, 65536, 500)] += rng.integers(1, 9, 500)
    total = dense_slots(sparse_slots(h.tobytes()) for h in hists)
    assert (total == sum(hists)).all()
    assert sparse_slots(np.zeros(65536, dtype=np.int64).tobytes()) == b""


def test_split_by_topic_keeps_rows_and_order() -> None:
    batch = pa.RecordBatch.from_pydict({"topic": ["b", "a", None, "b", "a"], "x": [1, 2, 3, 4, 5]})
    parts = {t: p.column("x").to_pylist() for t, p in split_by_topic(batch)}
    assert parts == {"a": [2, 5], "b": [1, 4], None: [3]}


def test_generate_topics_writes_a_cluster(spark: Any, tmp_path: Path) -> None:
    import numpy as np

    from cursorkit.pipeline.generate_topics import generate_topics, topic_sizes

    sizes = topic_sizes(100_000, 50, np.random.default_rng(1))
    assert sum(sizes) == 100_000 and min(sizes) >= 10 and max(sizes) > 10 * (100_000 // 50)
    g = generate_topics(
        tmp_path / "logs",
        topics=6,
        messages=6_000,
        keys=30,
        delayed_fraction=0.2,
        subscriptions=3,
        seed=4,
        partitioned_fraction=0.34,
        partitions=3,
    )
    partitioned = [t for t in g.topics if "-partition-" in t]
    assert len(partitioned) == 6 and len(g.topics) == 10 and sum(g.topics.values()) == 6_000
    with pytest.raises(InvalidArgument, match="already exists"):
        generate_topics(
            tmp_path / "logs", topics=2, messages=100, keys=3, delayed_fraction=0, subscriptions=1, seed=1
        )
    out = tmp_path / "out"
    summary = cluster.rebuild_topics(spark, g.messages_path, g.acks_path, out, STATE_ONLY)
    assert {t: f["messages"] for t, f in summary.topics.items()} == g.topics
    assert {f["subscriptions"] for f in summary.topics.values()} == {1, 2, 3}


def test_cluster_report(spark: Any, logs: Path, tmp_path: Path) -> None:
    from cursorkit.pipeline.cluster_report import partitioned_name

    out = tmp_path / "out"
    summary = cluster.rebuild_topics(spark, logs / "all" / "messages", logs / "all" / "acks", out, CFG)
    doc = json.loads((out / "manifest.json").read_text())
    html = (out / doc["report"]).read_text()
    order = risk_order(summary.topics)
    assert html.index(partitioned_name(order[0])[0]) < html.index("Across the cluster")
    assert html.count("<h2>Detail: ") == len(TOPICS)  # every topic: fewer than DETAIL_TOPICS
    assert html.count('<img alt="histograms of per-topic figures"') == 1
    assert "clicks (partition 1)" in html
    assert partitioned_name("persistent://t/n/a-partition-12") == ("persistent://t/n/a", 12)
    assert partitioned_name("persistent://t/n/a") == ("persistent://t/n/a", None)
    off = cluster.rebuild_topics(
        spark,
        logs / "all" / "messages",
        logs / "all" / "acks",
        tmp_path / "off",
        STATE_ONLY,
    )
    assert off.topics and json.loads((tmp_path / "off" / "manifest.json").read_text())["report"] is None
