"""``cursorkit inspect`` of a stopped broker's data directory: real names, mark-delete, backlog; read-only.

The directory is written by a real broker and the official client. The command runs as an install
with only the ``[broker]`` extra would run it: pyarrow, pyspark, pandas and kazoo do not import.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorkit.testing import LocalBroker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LONG = "a subscription name longer than 127 bytes, so its directory is a hash " * 3
AUDIT = "audit sub ✓"
BROKER_ONLY = '''
"""A broker-only install: the pipeline's and the other extras' modules do not import."""
import sys


class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pyarrow", "pyspark", "pandas", "matplotlib", "kazoo"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Absent())
'''


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory a broker wrote and left: ``orders`` (three subscriptions), ``parts`` (2 partitions)."""
    data = tmp_path_factory.mktemp("inspect") / "data"
    with LocalBroker(data, args=["--partitioned-topic", "parts=2"]) as b:
        c = client(b.service_url)
        try:
            shared = pulsar.ConsumerType.Shared
            billing = c.subscribe("orders", "billing", consumer_type=shared)
            audit = c.subscribe("orders", AUDIT, consumer_type=shared)
            idle = c.subscribe("orders", LONG, consumer_type=shared)
            p = c.subscribe("parts", "p", consumer_type=shared)
            producer = c.create_producer("orders", batching_enabled=False)
            for i in range(10):
                producer.send(f"m{i}".encode())
            c.create_producer("parts", batching_enabled=False).send(b"x")
            for _ in range(4):
                billing.acknowledge(billing.receive(timeout_millis=TIMEOUT_MS))
            got = [audit.receive(timeout_millis=TIMEOUT_MS) for _ in range(10)]
            for i in (0, 2, 5):
                audit.acknowledge(got[i])
            for consumer in (billing, audit, idle, p):
                consumer.close()  # acks go in groups: closing sends them
        finally:
            c.close()
    return data


@pytest.fixture(scope="module")
def broker_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a child that runs as a broker-only install would."""
    site = tmp_path_factory.mktemp("broker-only")
    (site / "sitecustomize.py").write_text(BROKER_ONLY)
    path = os.pathsep.join([str(site), str(REPO / "python")])
    return {**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "PYTHONPATH": path, "COLUMNS": "250"}


def inspect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cursorkit.cli", "inspect", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: size, modification time and content hash."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (
                st.st_size,
                st.st_mtime_ns,
                hashlib.sha256(p.read_bytes()).hexdigest(),
            )
    return out


@pytest.fixture
def copy(written: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the written directory, for a test that changes it."""
    target = tmp_path / "data"
    shutil.copytree(written, target)
    yield target


def test_subscriptions_by_real_name_with_mark_delete_and_backlog(
    written: Path, broker_only: dict[str, str]
) -> None:
    done = inspect(broker_only, str(written), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["damaged"] is False and doc["partitioned"] == {"persistent://public/default/parts": 2}
    topics = {t["name"]: t for t in doc["topics"]}
    assert set(topics) == {
        "persistent://public/default/orders",
        "persistent://public/default/parts-partition-0",
        "persistent://public/default/parts-partition-1",
    }
    orders = topics["persistent://public/default/orders"]
    assert orders["entries"] == 10 and orders["first"] == "1:0" and orders["last"] == "1:9"
    subs = {s["name"]: s for s in orders["subscriptions"]}
    assert set(subs) == {"billing", AUDIT, LONG}  # the names, not their hex or hash directories
    assert (subs["billing"]["mark_delete"], subs["billing"]["backlog"], subs["billing"]["acked_ranges"]) == (
        "1:3",
        6,
        0,
    )
    assert (subs[AUDIT]["mark_delete"], subs[AUDIT]["backlog"], subs[AUDIT]["acked_ranges"]) == ("1:0", 7, 2)
    assert subs[LONG]["backlog"] == 10 and subs[LONG]["mark_delete"] == "1:-1"
    assert sum(s["backlog"] for t in topics.values() for s in t["subscriptions"] if s["name"] == "p") == 1


def test_tables_name_everything_without_the_pipeline(written: Path, broker_only: dict[str, str]) -> None:
    done = inspect(broker_only, str(written))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert (
        "Broker data directory" in out
        and "status: ok" in out
        and "persistent://public/default/parts (2)" in out
    )
    assert AUDIT in out and "billing" in out and "persistent://public/default/orders" in out
    rows = [line for line in out.splitlines() if "│ billing" in line]
    assert rows and "1:3" in rows[0] and "│       6 │" in rows[0]


def test_one_topic_and_its_partitions(written: Path, broker_only: dict[str, str]) -> None:
    doc = json.loads(inspect(broker_only, str(written), "--topic", "parts", "--json").stdout)
    assert [t["name"] for t in doc["topics"]] == [
        "persistent://public/default/parts-partition-0",
        "persistent://public/default/parts-partition-1",
    ]
    done = inspect(broker_only, str(written), "--topic", "nothing-here")
    assert done.returncode == 2 and "holds no topic persistent://public/default/nothing-here" in done.stderr


def test_reading_changes_nothing(copy: Path, broker_only: dict[str, str]) -> None:
    """Not even what recovery tidies: a leftover temp file, an index file of a missing ledger."""
    log = copy / "topics" / "public" / "default" / "orders" / "log"
    (log / ".ledger-00000000000000000009.seg.tmp-0123456789abcdef").write_bytes(b"half a ledger")
    (log / "ledger-00000000000000000042.seg.idx").write_bytes(b"an index of nothing")
    segment = log / "ledger-00000000000000000001.seg"
    with segment.open("ab") as f:
        f.write(b"\x01\x02\x03")  # a write cut short by a crash
    before = snapshot(copy)
    done = inspect(broker_only, str(copy), "--json")
    assert done.returncode == 0, done.stderr
    assert snapshot(copy) == before
    orders = next(t for t in json.loads(done.stdout)["topics"] if t["name"].endswith("/orders"))
    assert orders["torn_tail_bytes"] == 3 and orders["entries"] == 10 and not orders["log_damage"]


def test_a_running_broker_is_refused(copy: Path, broker_only: dict[str, str]) -> None:
    with LocalBroker(copy):
        done = inspect(broker_only, str(copy))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "in use by a running broker" in done.stderr


def test_damage_is_reported_and_the_rest_still_summarised(copy: Path, broker_only: dict[str, str]) -> None:
    orders = copy / "topics" / "public" / "default" / "orders"
    segment = orders / "log" / "ledger-00000000000000000001.seg"
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # a flipped bit in the middle: a checksum fails there
    segment.write_bytes(bytes(raw))
    (orders / "log" / "ledger-00000000000000000001.seg.idx").unlink()  # so the records are read
    billing = orders / "subscriptions" / b"billing".hex() / "cursor" / "store.meta"
    billing.write_bytes(b"not a store")
    done = inspect(broker_only, str(copy), "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    topic = next(t for t in doc["topics"] if t["name"].endswith("/orders"))
    assert doc["damaged"] and topic["log_damage"] and topic["log_damage"][0].startswith("ledger 1 from byte ")
    subs = {s["name"]: s for s in topic["subscriptions"]}
    assert subs["billing"]["recovered_past"].startswith("store.meta unusable")
    assert subs["billing"]["mark_delete"] == "1:3"  # from its log, as the broker would recover it
    assert subs[AUDIT]["mark_delete"] == "1:0" and subs[AUDIT]["error"].startswith("backlog unknown")
    assert subs[LONG]["error"] is None and subs[LONG]["backlog"] == 4  # what the damaged log still serves
    table = inspect(broker_only, str(copy))
    assert table.returncode == 1 and "damage found" in table.stdout


def test_other_paths_need_no_pipeline_either(written: Path, broker_only: dict[str, str]) -> None:
    cursor = (
        written / "topics" / "public" / "default" / "orders" / "subscriptions" / b"billing".hex() / "cursor"
    )
    done = inspect(broker_only, str(cursor), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["stats"]["mark_delete_position"] == "1:3", (
        done.stderr
    )
    for location, extra in (("s3://bucket/out", "objectstore"), ("zk://127.0.0.1:1/x", "zookeeper")):
        done = inspect(broker_only, location)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f'pip install "cursorkit[{extra}]"' in done.stderr
