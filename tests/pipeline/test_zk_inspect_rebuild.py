"""The operators' side of the ZooKeeper stores: ``inspect zk://`` and ``rebuild --cursor-store zk://``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorkit import Position
from cursorkit.ackstate import Cursor, CursorStore
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.generate import generate
from cursorkit.pipeline.generate_topics import generate_topics
from cursorkit.pipeline.inspector.znodes import inspect_zk
from cursorkit.pipeline.load import list_topics, read_cursors
from cursorkit.pipeline.publish import publish_cursors
from cursorkit.stores import ObjectStore, cursor_znode_path

pytestmark = pytest.mark.spark


def test_inspect_reads_cursorkits_and_pulsars_znodes(
    zk_server: Any, zk_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = f"ns{uuid.uuid4().hex[:6]}"
    objects = ObjectStore(str(tmp_path / "objects"))
    ours = f"zk://{zk_server.hosts}{cursor_znode_path(f'persistent://t/{ns}/orders', 'ours')}"
    with CursorStore.create(ours, objects=objects) as store:
        cursor = store.recover()
        for e in range(0, 4_000, 2):
            cursor.ack(Position(1, e))
        store.cursor_properties["#pulsar.internal.delayed.bucket_1_1"] = "5"
        store.flush(cursor)
    pulsar = Cursor(Position(3, 4))
    pulsar.ack(Position(3, 9))
    zk_client.create(
        cursor_znode_path(f"persistent://t/{ns}/orders", "theirs"),
        pulsar.encode("managed_cursor_info"),
        makepath=True,
    )
    assert main(["inspect", ours, "--objects", objects.uri]) == 0
    out = capsys.readouterr().out
    assert "cursorkit" in out and "1,000 / 2,000" in out and "│ ok " in out
    assert main(["inspect", f"zk://{zk_server.hosts}/managed-ledgers/t/{ns}"]) == 0
    out = capsys.readouterr().out
    assert "2 cursor znodes" in out and "pulsar" in out and "3:4" in out
    zk_client.create(
        cursor_znode_path(f"persistent://t/{ns}/orders", "broken"), b"\x08\x01\xff", makepath=True
    )
    assert main(["inspect", f"zk://{zk_server.hosts}/managed-ledgers/t/{ns}"]) == 1
    assert "damaged" in capsys.readouterr().out
    assert main(["inspect", f"zk://{zk_server.hosts}/managed-ledgers/t/{ns}-none"]) == 2


def test_inspect_shows_a_cut_cursor_with_its_numbers_and_exits_1(
    zk_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Acks a cursor recorded that no durable copy holds will be redelivered: at risk, not ok."""
    ns = f"ns{uuid.uuid4().hex[:6]}"
    root = f"zk://{zk_server.hosts}/managed-ledgers/t/{ns}"
    objects = ObjectStore(str(tmp_path / "objects"))
    cut = f"zk://{zk_server.hosts}{cursor_znode_path(f'persistent://t/{ns}/orders', 'cut')}"
    whole = f"zk://{zk_server.hosts}{cursor_znode_path(f'persistent://t/{ns}/orders', 'whole')}"
    for location, where in ((cut, None), (whole, objects)):
        with CursorStore.create(location, objects=where) as store:
            cursor = store.recover()
            for e in range(0, 2 * 13_486, 2):
                cursor.ack(Position(1, e + 1))
            store.flush(cursor)
    assert main(["inspect", whole, "--objects", objects.uri]) == 0
    assert "cut:" not in capsys.readouterr().out
    assert main(["inspect", cut]) == 1
    assert "cut: 1,000 of 13,486 ranges" in capsys.readouterr().out
    found = inspect_zk(root, objects=objects)
    assert {c.subscription: c.status for c in found.cursors} == {
        "cut": "cut: 1,000 of 13,486 ranges",
        "whole": "ok",
    }
    assert found.cut and not found.damaged and found.at_risk
    assert main(["inspect", root, "--objects", objects.uri]) == 1
    capsys.readouterr()


def test_rebuild_publishes_a_topics_cursors_to_zookeeper(
    spark: Any, zk_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = generate(
        tmp_path / "logs", messages=20_000, ledgers=4, keys=50, delayed_fraction=0.2, subscriptions=3, seed=5
    )
    acks = pq.read_table(logs.acks_path)
    msgs = pq.read_table(logs.messages_path)
    last = max(msgs.column("publish_time").to_pylist())
    picked = range(0, msgs.num_rows, 997)
    nacks = {  # beyond Pulsar: nack rows give the published znodes their redelivery counts
        "subscription": [acks.column("subscription")[0].as_py()] * len(picked),
        "ledger_id": [msgs.column("ledger_id")[r].as_py() for r in picked],
        "entry_id": [msgs.column("entry_id")[r].as_py() for r in picked],
        "batch_index": [None] * len(picked),
        "ack_type": ["nack"] * len(picked),
        "ack_time": [last] * len(picked),
    }
    pq.write_table(pa.table(nacks, schema=acks.schema), Path(logs.acks_path) / "part-nacks.parquet")
    topic = f"persistent://t/restored/orders-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "out"
    args = [
        "rebuild",
        "--messages",
        str(logs.messages_path),
        "--acks",
        str(logs.acks_path),
        "--out",
        str(out),
    ]
    store = f"zk://{zk_server.hosts}/chroot-{uuid.uuid4().hex[:6]}"
    assert main([*args, "--topic", topic, "--no-report", "--cursor-store", store]) == 0
    assert "published 3 cursors" in capsys.readouterr().out
    expected = read_cursors(out)
    for subscription, cursor in expected.items():
        location = f"{store}{cursor_znode_path(topic, subscription)}"
        with CursorStore.open(location, read_only=True) as znode:
            got = znode.recover()
            assert got.mark_delete_position == cursor.mark_delete_position
            assert got.individually_deleted.ranges() == cursor.individually_deleted.ranges()[:1_000]
            rebuilt = expected.redeliveries.get(subscription)
            assert znode.redelivery_counts.runs() == (rebuilt.runs() if rebuilt is not None else [])
    assert expected.redeliveries, "no rebuilt store kept the nack rows' counts"
    again = publish_cursors(out, store, one_topic=topic)  # existing znodes are kept unless told
    assert len(again.existing) == 3 and not again.published
    replaced = publish_cursors(out, store, one_topic=topic, overwrite=True)
    assert len(replaced.published) == 3


def test_a_many_topic_rebuild_publishes_every_topic(spark: Any, zk_server: Any, tmp_path: Path) -> None:
    from cursorkit.pipeline import cluster
    from cursorkit.pipeline.rebuild import RebuildConfig

    generate_topics(
        tmp_path / "logs", topics=3, messages=3_000, keys=20, delayed_fraction=0.2, subscriptions=2, seed=4
    )
    out = tmp_path / "out"
    cluster.rebuild_topics(
        spark, tmp_path / "logs" / "messages", tmp_path / "logs" / "acks", out, RebuildConfig(report=False)
    )
    objects = ObjectStore(str(tmp_path / "objects"))
    store = f"zk://{zk_server.hosts}/many-{uuid.uuid4().hex[:6]}"
    done = publish_cursors(out, store, objects=objects)
    assert not done.failed and not done.truncated
    count = 0
    for topic in list_topics(out):
        for subscription, cursor in read_cursors(out, topic=topic).items():
            with CursorStore.open(
                f"{store}{cursor_znode_path(topic, subscription)}", read_only=True, objects=objects
            ) as znode:
                assert znode.recover().individually_deleted == cursor.individually_deleted
            count += 1
    assert count == len(done.published) > 3
