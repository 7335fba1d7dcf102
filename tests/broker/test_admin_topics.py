"""Pulsar's admin v2 topic paths: list, create and delete topics (partitioned or not), grow them.

A real HTTP client against the broker process, and the official client seeing each change without
a restart (its PARTITIONED_METADATA answers the new count at once).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess

pytest.importorskip("aiohttp")
pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, receive_all  # noqa: E402

NS = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
_UNSET = object()


def call(method: str, url: str, body: object = _UNSET, *, raw: bytes | None = None) -> tuple[int, object]:
    """Status and JSON body (None when empty) of one request; ``body`` is sent as JSON."""
    data = raw if raw is not None else (None if body is _UNSET else json.dumps(body).encode())
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as r:  # noqa: S310 - a test server on 127.0.0.1
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def refused(method: str, url: str, status: int, body: object = _UNSET, *, raw: bytes | None = None) -> str:
    """The reason of a request that must be refused with ``status``."""
    got, answer = call(method, url, body, raw=raw)
    assert got == status, (method, url, got, answer)
    assert isinstance(answer, dict) and isinstance(answer.get("reason"), str) and answer["reason"], answer
    return str(answer["reason"])


def disk(data: Path) -> tuple[list[str], bytes]:
    """The directories under ``data`` and the partitioned-topic table: what a refused request must keep.

    (Cursor files change on their own as the broker flushes acknowledgements.)
    """
    table = data / "partitioned.json"
    dirs = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_dir())
    return dirs, table.read_bytes() if table.exists() else b""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with its admin API for this module's tests (each uses topics of its own)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("admin") / "data", "--http-port", "0")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


def test_a_partitioned_topic_made_over_rest_is_served_at_once(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/orders/partitions", 3) == (204, None)
    assert call("GET", f"{api}/orders/partitions") == (200, {"partitions": 3, "deleted": False})
    status, listed = call("GET", api)
    assert status == 200 and isinstance(listed, list)
    assert {f"{T}orders-partition-{i}" for i in range(3)} <= set(listed)
    assert f"{T}orders" in call("GET", f"{api}/partitioned")[1]
    c = client(served.url)
    try:
        assert len(c.get_topic_partitions(f"{T}orders")) == 3
        consumer = c.subscribe(f"{T}orders", "s")
        producer = c.create_producer(
            f"{T}orders",
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for i in range(9):
            producer.send(f"m{i}".encode())
        got = receive_all(consumer, 9)
        assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(9))
        assert {m.topic_name() for m in got} == {f"{T}orders-partition-{i}" for i in range(3)}
    finally:
        c.close()


def test_growing_a_partitioned_topic_reaches_new_clients_and_keeps_what_new_partitions_got(
    served: BrokerProcess,
) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/grow/partitions", {"partitions": 2, "properties": {"k": "v"}})[0] == 204
    first = client(served.url)
    try:
        first.subscribe(f"{T}grow", "s").close()  # a durable subscription on partitions 0 and 1
        assert call("POST", f"{api}/grow/partitions", 4) == (204, None)
        assert call("GET", f"{api}/grow/partitions")[1] == {"partitions": 4, "deleted": False}
        # The new partitions carry partition 0's subscription from their first entry (as Pulsar does).
        assert call("GET", f"{api}/grow-partition-3/subscriptions") == (200, ["s"])
        second = client(served.url)
        try:
            assert len(second.get_topic_partitions(f"{T}grow")) == 4
            producer = second.create_producer(
                f"{T}grow",
                batching_enabled=False,
                message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
            )
            for i in range(8):
                producer.send(f"g{i}".encode())
            consumer = second.subscribe(f"{T}grow", "s", initial_position=pulsar.InitialPosition.Latest)
            got = receive_all(consumer, 8)
            assert {m.topic_name() for m in got} == {f"{T}grow-partition-{i}" for i in range(4)}
        finally:
            second.close()
    finally:
        first.close()
    before = disk(served.data)
    reason = refused("POST", f"{api}/grow/partitions", 422, 3)
    assert "3" in reason and "4" in reason
    assert call("POST", f"{api}/grow/partitions", 4) == (204, None)  # the same count: nothing to do
    assert call("PUT", f"{api}/plain", None)[0] == 204
    assert "not the partitioned topic" in refused("POST", f"{api}/plain/partitions", 409, 5)
    refused("POST", f"{api}/never-made/partitions", 409, 5)
    assert call("GET", f"{api}/grow/partitions")[1] == {"partitions": 4, "deleted": False}
    dirs, table = disk(served.data)
    assert ([d for d in dirs if "plain" not in d], table) == before


def test_refusals_answer_pulsars_codes_and_change_nothing(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/taken/partitions", 2)[0] == 204
    assert call("PUT", f"{api}/single", None)[0] == 204
    before = disk(served.data)
    listed = call("GET", api)
    for count in (0, -1):
        assert (
            refused("PUT", f"{api}/p/partitions", 406, count) == "Number of partitions should be more than 0"
        )
    assert "10000" in refused("PUT", f"{api}/p/partitions", 406, 10_001)
    refused("PUT", f"{api}/p/partitions", 406, raw=b"")
    for bad in ("3", 1.5, True, [3], {"partitions": "3"}, 2**31, {"partitions": 2, "properties": [1]}):
        refused("PUT", f"{api}/p/partitions", 400, bad)
    refused("PUT", f"{api}/p/partitions", 400, raw=b"{not json")
    refused("PUT", f"{api}/p/partitions", 400, raw=b"[" * 20_000)
    assert "-partition-" in refused("PUT", f"{api}/p-partition-0/partitions", 412, 2)
    assert refused("PUT", f"{api}/taken/partitions", 409, 3) == "This topic already exists"
    assert refused("PUT", f"{api}/single/partitions", 409, 3) == "This topic already exists"
    assert refused("PUT", f"{api}/taken", 409) == "This topic already exists"
    assert refused("PUT", f"{api}/single", 409) == "This topic already exists"
    assert refused("PUT", f"{api}/taken-partition-1", 409) == "This topic already exists"
    refused("PUT", f"{api}/taken-partition-2", 412)
    refused("PUT", f"{api}/nobase-partition-0", 412)
    refused("PUT", f"{api}/single", 400, raw=b"[1, 2]")
    for path in (
        "missing/partitions",
        "missing/subscriptions",
        "missing/lastMessageId",
        "taken/lastMessageId",
    ):
        refused("GET", f"{api}/{path}", 404)
    refused("DELETE", f"{api}/missing", 404)
    refused("DELETE", f"{api}/missing/partitions", 404)
    assert "delete-partitioned-topic" in refused("DELETE", f"{api}/taken", 409)
    assert "please call delete" in refused("DELETE", f"{api}/single/partitions", 409)
    assert (
        refused("GET", served.admin_url + "/admin/v2/persistent/no/such", 404) == "Namespace does not exist"
    )
    refused("GET", served.admin_url + "/admin/v2/persistent/no/such/partitioned", 404)
    refused("GET", served.admin_url + "/admin/v2/persistent/bad%20tenant/default", 412)
    refused("PUT", served.admin_url + "/admin/v2/persistent/bad%20tenant/default/t", 412)
    assert call("GET", f"{api}/missing/partitions?checkAllowAutoCreation=true") == (
        200,
        {"partitions": 0, "deleted": False},
    )
    assert call("GET", f"{api}/single/partitions") == (200, {"partitions": 0, "deleted": False})
    assert disk(served.data) == before
    assert call("GET", api) == listed
    c = client(served.url)
    try:
        assert len(c.get_topic_partitions(f"{T}p")) == 1  # never made: not partitioned
        assert len(c.get_topic_partitions(f"{T}taken")) == 2
    finally:
        c.close()


def test_delete_refuses_connected_clients_unless_forced(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/busy", None)[0] == 204
    c = client(served.url)
    try:
        consumer = c.subscribe(f"{T}busy", "s")
        producer = c.create_producer(f"{T}busy", batching_enabled=False)
        producer.send(b"one")
        before = disk(served.data)
        assert refused("DELETE", f"{api}/busy", 412) == "Topic has active producers/subscriptions"
        assert disk(served.data) == before
        producer.send(b"two")  # the refusal left the topic and its clients as they were
        assert [m.data() for m in receive_all(consumer, 2)] == [b"one", b"two"]
        assert call("DELETE", f"{api}/busy?force=true") == (204, None)
        # The clients were closed as by an unload; they come back to a new, empty topic.
        reader = c.create_reader(f"{T}busy", pulsar.MessageId.earliest)
        assert not reader.has_message_available()
    finally:
        c.close()
    # A subscription without consumers does not hold a topic back: it goes with it.
    assert call("PUT", f"{api}/idle", None)[0] == 204
    c = client(served.url)
    try:
        c.subscribe(f"{T}idle", "kept").close()
    finally:
        c.close()
    assert call("GET", f"{api}/idle/subscriptions") == (200, ["kept"])
    assert call("DELETE", f"{api}/idle") == (204, None)
    refused("GET", f"{api}/idle/subscriptions", 404)
    assert f"{T}idle" not in call("GET", api)[1]


def test_delete_a_partitioned_topic_with_and_without_force(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/pd/partitions", 2)[0] == 204
    c = client(served.url)
    try:
        producer = c.create_producer(f"{T}pd", batching_enabled=False)
        producer.send(b"x")
        before = disk(served.data)
        assert refused("DELETE", f"{api}/pd/partitions", 412) == "Topic has active producers/subscriptions"
        assert disk(served.data) == before
        assert call("GET", f"{api}/pd/partitions")[1] == {"partitions": 2, "deleted": False}
        producer.close()
        assert call("DELETE", f"{api}/pd/partitions") == (204, None)
        assert f"{T}pd" not in call("GET", f"{api}/partitioned")[1]
        refused("GET", f"{api}/pd/partitions", 404)
        assert len(c.get_topic_partitions(f"{T}pd")) == 1
        assert call("PUT", f"{api}/pf/partitions", 2)[0] == 204
        c.create_producer(f"{T}pf", batching_enabled=False).send(b"y")
        assert call("DELETE", f"{api}/pf/partitions?force=true") == (204, None)
        assert f"{T}pf" not in call("GET", f"{api}/partitioned")[1]
    finally:
        c.close()


def test_subscriptions_and_last_message_id(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    assert call("PUT", f"{api}/sp/partitions", 3)[0] == 204
    c = client(served.url)
    try:
        c.subscribe(f"{T}sp", "a")
        c.subscribe(f"{T}sp-partition-2", "b")
        assert call("GET", f"{api}/sp/subscriptions") == (200, ["a", "b"])
        assert call("GET", f"{api}/sp-partition-0/subscriptions") == (200, ["a"])
        plain = c.create_producer(f"{T}ids", batching_enabled=False)
        last = [plain.send(f"{i}".encode()) for i in range(3)][-1]
        assert call("GET", f"{api}/ids/lastMessageId") == (
            200,
            {"ledgerId": last.ledger_id(), "entryId": last.entry_id(), "partitionIndex": -1},
        )
        batched = c.create_producer(f"{T}batched", batching_enabled=True, batching_max_publish_delay_ms=50)
        for i in range(5):
            batched.send_async(f"{i}".encode(), None)
        batched.flush()
        status, answer = call("GET", f"{api}/batched/lastMessageId")
        assert status == 200 and isinstance(answer, dict) and answer["batchIndex"] == 4
        part = c.create_producer(f"{T}sp-partition-1", batching_enabled=False).send(b"p")
        assert call("GET", f"{api}/sp-partition-1/lastMessageId")[1] == {
            "ledgerId": part.ledger_id(),
            "entryId": part.entry_id(),
            "partitionIndex": 1,
        }
        assert call("GET", f"{api}/sp-partition-0/lastMessageId")[1]["entryId"] == -1
    finally:
        c.close()


def test_names_are_data_never_paths(served: BrokerProcess) -> None:
    api = served.admin_url + NS
    names = {"a%20b": "a b", "%2E%2E": "..", "..%2F..%2Fescape": None, "caf%C3%A9": "café", "%E2%98%83": "☃"}
    for encoded, name in names.items():
        if name is None:
            refused("PUT", f"{api}/{encoded}", 412)
            continue
        assert call("PUT", f"{api}/{encoded}", None) == (204, None), name
        assert call("GET", f"{api}/{encoded}/subscriptions") == (200, [])
    listed = call("GET", api)[1]
    assert isinstance(listed, list)
    assert {f"{T}{n}" for n in names.values() if n} <= set(listed)
    data = served.data
    for path in data.rglob("*"):
        assert path.resolve().is_relative_to(data.resolve()), path
    assert not (data.parent / "escape").exists() and not (data / "escape").exists()
    c = client(served.url)
    try:
        sent = c.create_producer(f"{T}a b", batching_enabled=False).send(b"z")
        assert call("GET", f"{api}/a%20b/lastMessageId")[1]["entryId"] == sent.entry_id()
    finally:
        c.close()
    assert call("DELETE", f"{api}/%2E%2E") == (204, None)
    assert f"{T}.." not in call("GET", api)[1]
    assert (data / "topics" / "public" / "default").is_dir()


def test_restart_keeps_what_rest_made_and_deleted(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--http-port", "0")
    broker.start()
    try:
        api = broker.admin_url + NS
        assert call("PUT", f"{api}/kept/partitions", 2)[0] == 204
        assert call("POST", f"{api}/kept/partitions", 3)[0] == 204
        assert call("PUT", f"{api}/solo", None)[0] == 204
        assert call("PUT", f"{api}/gone/partitions", 2)[0] == 204
        assert call("DELETE", f"{api}/gone/partitions")[0] == 204
        c = client(broker.url)
        try:
            c.subscribe(f"{T}kept", "k").close()
        finally:
            c.close()
        broker.stop()
        broker.start()
        api = broker.admin_url + NS
        assert call("GET", f"{api}/partitioned") == (200, [f"{T}kept"])
        assert call("GET", f"{api}/kept/partitions")[1] == {"partitions": 3, "deleted": False}
        assert call("GET", f"{api}/kept/subscriptions") == (200, ["k"])  # read from disk: not open
        listed = call("GET", api)[1]
        assert isinstance(listed, list) and f"{T}solo" in listed and f"{T}kept-partition-2" in listed
        assert not any("gone" in n for n in listed)
        c = client(broker.url)
        try:
            assert len(c.get_topic_partitions(f"{T}kept")) == 3
        finally:
            c.close()
    finally:
        broker.kill()


def test_a_failed_write_of_the_partitioned_table_changes_nothing(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--http-port", "0")
    broker.start()
    try:
        api = broker.admin_url + NS
        table = broker.data / "partitioned.json"
        table.mkdir()  # the table cannot be replaced: its write fails
        assert call("PUT", f"{api}/w/partitions", 2)[0] == 500
        refused("GET", f"{api}/w/partitions", 404)
        c = client(broker.url)
        try:
            assert len(c.get_topic_partitions(f"{T}w")) == 1
        finally:
            c.close()
        os.rmdir(table)
        assert call("PUT", f"{api}/w/partitions", 2)[0] == 204
        assert call("GET", f"{api}/partitioned") == (200, [f"{T}w"])
    finally:
        broker.kill()


SLOW_S = 0.15


@pytest.fixture
def slow_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every fsync sleeps ``SLOW_S`` (as in test_no_disk_wait); the times they were made are recorded."""
    made: list[float] = []
    real = os.fsync

    def sync(fd: int) -> None:
        made.append(time.monotonic())
        time.sleep(SLOW_S)
        real(fd)

    monkeypatch.setattr(os, "fsync", sync)
    monkeypatch.setattr(os, "fdatasync", sync)
    yield made


def test_admin_changes_never_make_the_loop_wait_for_the_disk(tmp_path: Path, slow_disk: list[float]) -> None:
    """With every fsync taking 150 ms, REST topic changes reach the disk while pings come back at once."""
    from cursorkit.broker.server.admin.http_server import AdminServer
    from cursorkit.broker.server.config import BrokerConfig
    from cursorkit.proto import pulsar_api_pb2 as wire
    from in_process_broker import InProcess
    from raw_client import Raw

    inproc = InProcess(BrokerConfig(data=tmp_path, port=0, sync=True, flush_interval_ms=50))
    server = AdminServer(inproc.broker)
    try:
        inproc.call(server.start("127.0.0.1", 0))
        api = server.url + NS
        pinger = Raw(inproc.url)
        assert pinger.connect().type == wire.BaseCommand.CONNECTED
        rtts: list[float] = []
        done = threading.Event()

        def ping() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                pinger.send(wire.BaseCommand(type=wire.BaseCommand.PING, ping=wire.CommandPing()))
                assert pinger.receive().type == wire.BaseCommand.PONG
                rtts.append(time.monotonic() - t0)
                time.sleep(0.01)

        thread = threading.Thread(target=ping, daemon=True)
        thread.start()
        slow_disk.clear()
        assert call("PUT", f"{api}/slow/partitions", 2)[0] == 204
        assert call("POST", f"{api}/slow/partitions", 3)[0] == 204
        assert call("PUT", f"{api}/plain", None)[0] == 204
        assert call("DELETE", f"{api}/plain?force=true")[0] == 204
        assert call("DELETE", f"{api}/slow/partitions")[0] == 204
        done.set()
        thread.join(5)
        assert len(slow_disk) >= 4, "the disk was not reached: the test shows nothing"
        assert rtts and max(rtts) < SLOW_S / 2, (max(rtts), len(rtts), len(slow_disk))
    finally:
        inproc.call(server.stop())
        inproc.stop()
