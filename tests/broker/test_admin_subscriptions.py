"""Admin REST of one subscription (create, delete, skip, skip_all, expire, reset-cursor) over real HTTP.

Seen by the official Pulsar client: Pulsar's paths, verbs and codes, and refusals that change nothing.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from broker_process import BrokerProcess
from pulsar_helpers import client, nothing_more, receive_all

pytest.importorskip("aiohttp")

NS = "/admin/v2/persistent/public/default"
EARLIEST = {"ledgerId": -1, "entryId": -1}
"""``MessageId.earliest`` as pulsar-admin sends it."""


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with its admin API for the module (each test has topics of its own)."""
    data = tmp_path_factory.mktemp("admin-subs") / "data"
    broker = BrokerProcess(
        data, "--http-port", "0", "--partitioned-topic", "persistent://public/default/parts=3"
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def pulsar_client(admin_broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = client(admin_broker.url)
    try:
        yield c
    finally:
        c.close()


def call(broker: BrokerProcess, method: str, path: str, body: object = None) -> tuple[int, dict[str, object]]:
    """Status and JSON body (``{}`` when empty) of one request; ``bytes`` bodies are sent as they are."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - a test server on 127.0.0.1
        broker.admin_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:  # noqa: S310
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def sub_path(topic: str, sub: str, tail: str = "") -> str:
    return f"{NS}/{topic}/subscription/{sub}{tail}"


def message_id(mid: pulsar.MessageId, **extra: object) -> dict[str, object]:
    """Pulsar's JSON message id (``ResetCursorData``) of a client's message id."""
    return {"ledgerId": mid.ledger_id(), "entryId": mid.entry_id(), "partitionIndex": -1, **extra}


def publish(c: pulsar.Client, topic: str, n: int, *, gap_s: float = 0.0) -> list[pulsar.MessageId]:
    """``n`` messages ``0..n-1``, one entry each (``gap_s`` apart: distinct publish times)."""
    producer = c.create_producer(topic, batching_enabled=False)
    ids = []
    for i in range(n):
        ids.append(producer.send(f"{i}".encode()))
        time.sleep(gap_s)
    producer.close()
    return ids


def values(messages: list[pulsar.Message]) -> list[int]:
    return [int(m.data()) for m in messages]


def test_create_at_a_message_id_and_the_ends_then_409(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    ids = publish(pulsar_client, "create-at", 10)
    assert call(admin_broker, "PUT", sub_path("create-at", "from-5"), message_id(ids[5])) == (204, {})
    assert call(admin_broker, "PUT", sub_path("create-at", "from-5")) == (
        409,
        {"reason": "Subscription already exists for topic"},
    )
    assert call(admin_broker, "PUT", sub_path("create-at", "first"), EARLIEST)[0] == 204
    assert call(admin_broker, "PUT", sub_path("create-at", "end"))[0] == 204  # no body: latest
    from_5 = pulsar_client.subscribe("create-at", "from-5")
    first = pulsar_client.subscribe("create-at", "first")
    end = pulsar_client.subscribe("create-at", "end", initial_position=pulsar.InitialPosition.Earliest)
    assert values(receive_all(from_5, 5)) == [5, 6, 7, 8, 9]
    assert values(receive_all(first, 10)) == list(range(10))
    assert nothing_more(end, 300)  # made at the end: its consumer's initial position changes nothing


def test_create_makes_a_missing_topic_and_a_bad_body_makes_nothing(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    status, body = call(admin_broker, "PUT", sub_path("made-by-admin", "s"), b"{not json")
    assert status == 400 and "reason" in body
    status, _ = call(admin_broker, "PUT", sub_path("made-by-admin", "s"), {"ledgerId": "x"})
    assert status == 400
    assert call(admin_broker, "POST", sub_path("made-by-admin", "s", "/skip_all"))[0] == 404  # nothing made
    assert call(admin_broker, "PUT", sub_path("made-by-admin", "s"))[0] == 204
    publish(pulsar_client, "made-by-admin", 3)
    consumer = pulsar_client.subscribe("made-by-admin", "s")
    assert values(receive_all(consumer, 3)) == [0, 1, 2]


def test_skip_three_then_the_consumer_receives_from_the_fourth(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    assert call(admin_broker, "PUT", sub_path("skipping", "s"))[0] == 204
    publish(pulsar_client, "skipping", 10)
    # Refusals first: none of them moves the cursor.
    assert call(admin_broker, "POST", sub_path("skipping", "s", "/skip/abc"))[0] == 404
    assert call(admin_broker, "POST", sub_path("skipping", "s", "/skip/2147483648"))[0] == 404
    assert call(admin_broker, "POST", sub_path("skipping", "s", "/skip/-1"))[0] == 412
    assert call(admin_broker, "POST", sub_path("skipping", "nobody", "/skip/1")) == (
        404,
        {"reason": "Subscription not found"},
    )
    assert call(admin_broker, "POST", sub_path("no-such-topic", "s", "/skip/1"))[0] == 404
    assert call(admin_broker, "POST", sub_path("skipping", "s", "/skip/3")) == (204, {})
    consumer = pulsar_client.subscribe("skipping", "s")
    assert values(receive_all(consumer, 7)) == [3, 4, 5, 6, 7, 8, 9]
    assert nothing_more(consumer, 200)


def test_skip_past_the_backlog_clears_it_whatever_the_count(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    assert call(admin_broker, "PUT", sub_path("skip-far", "s"))[0] == 204
    publish(pulsar_client, "skip-far", 5)
    started = time.monotonic()
    assert call(admin_broker, "POST", sub_path("skip-far", "s", "/skip/2147483647"))[0] == 204
    assert time.monotonic() - started < 2  # O(ranges), not O(count)
    consumer = pulsar_client.subscribe("skip-far", "s")
    assert nothing_more(consumer, 300)


def test_skip_all_under_a_connected_consumer_drops_what_it_was_not_sent(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    consumer = pulsar_client.subscribe(
        "skip-connected", "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1
    )
    publish(pulsar_client, "skip-connected", 10)
    time.sleep(0.2)  # the consumer holds what its one permit let the broker send
    assert call(admin_broker, "POST", sub_path("skip-connected", "s", "/skip_all"))[0] == 204
    held = values(receive_all(consumer, 1))  # what it already held it keeps (as in Pulsar)
    assert len(held) == 1 and held[0] <= 1
    assert nothing_more(consumer, 300)  # the rest was cleared, and the consumer stays connected:
    publish(pulsar_client, "skip-connected", 1)
    assert values(receive_all(consumer, 1)) == [0]  # the next message published reaches it


def test_reset_cursor_by_time_and_by_id_redelivers_to_the_connected_consumer(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    consumer = pulsar_client.subscribe("resetting", "s")
    publish(pulsar_client, "resetting", 10, gap_s=0.005)
    got = receive_all(consumer, 10)
    assert values(got) == list(range(10))
    at_3 = got[3].publish_timestamp()
    assert call(admin_broker, "POST", sub_path("resetting", "s", f"/resetcursor/{at_3}")) == (204, {})
    assert values(receive_all(consumer, 7)) == list(range(3, 10))
    to_6 = message_id(got[6].message_id())
    assert call(admin_broker, "POST", sub_path("resetting", "s", "/resetcursor"), to_6)[0] == 204
    assert values(receive_all(consumer, 4)) == [6, 7, 8, 9]
    excluded = message_id(got[6].message_id(), isExcluded=True)
    assert call(admin_broker, "POST", sub_path("resetting", "s", "/resetcursor"), excluded)[0] == 204
    assert values(receive_all(consumer, 3)) == [7, 8, 9]
    assert call(admin_broker, "POST", sub_path("resetting", "s", "/resetcursor/0"))[0] == 204  # before all
    assert values(receive_all(consumer, 10)) == list(range(10))
    assert nothing_more(consumer, 200)


def test_refused_resets_change_nothing(admin_broker: BrokerProcess, pulsar_client: pulsar.Client) -> None:
    consumer = pulsar_client.subscribe("reset-refused", "s")
    publish(pulsar_client, "reset-refused", 3)
    assert values(receive_all(consumer, 3)) == [0, 1, 2]
    path = sub_path("reset-refused", "s", "/resetcursor")
    assert call(admin_broker, "POST", path)[0] == 400  # no message id
    assert call(admin_broker, "POST", path, b"[1, 2]")[0] == 400
    assert call(admin_broker, "POST", path, {"ledgerId": 1, "entryId": True})[0] == 400
    assert call(admin_broker, "POST", sub_path("reset-refused", "s", "/resetcursor/soon"))[0] == 404
    assert call(admin_broker, "POST", sub_path("reset-refused", "other", "/resetcursor/0"))[0] == 404
    assert nothing_more(consumer, 300)  # not disconnected, nothing redelivered


def test_reset_into_a_batch_delivers_from_its_index(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    consumer = pulsar_client.subscribe("batch-reset", "s")
    producer = pulsar_client.create_producer(
        "batch-reset", batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=1000
    )
    for i in range(5):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    got = receive_all(consumer, 5)
    assert {m.message_id().entry_id() for m in got} == {got[0].message_id().entry_id()}  # one entry
    path = sub_path("batch-reset", "s", "/resetcursor")
    assert call(admin_broker, "POST", path, message_id(got[0].message_id(), batchIndex=2))[0] == 204
    assert values(receive_all(consumer, 3)) == [2, 3, 4]
    excluded = message_id(got[0].message_id(), batchIndex=2, isExcluded=True)
    assert call(admin_broker, "POST", path, excluded)[0] == 204
    assert values(receive_all(consumer, 2)) == [3, 4]
    assert nothing_more(consumer, 200)


def test_delete_is_refused_with_a_consumer_and_forced_closes_it(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    consumer = pulsar_client.subscribe("deleting", "s")
    publish(pulsar_client, "deleting", 5)
    assert values(receive_all(consumer, 5, ack=False)) == list(range(5))
    assert call(admin_broker, "DELETE", sub_path("deleting", "s")) == (
        412,
        {"reason": "Subscription has active connected consumers"},
    )
    assert call(admin_broker, "DELETE", sub_path("deleting", "s") + "?force=yes")[0] == 412  # Java: not true
    assert call(admin_broker, "DELETE", sub_path("deleting", "s") + "?force=true") == (204, {})
    # Closed, the consumer comes back and makes the subscription anew, at the end: the five it never
    # acknowledged are gone with the old one, and what is published once it is back reaches it.
    producer = pulsar_client.create_producer("deleting", batching_enabled=False)
    deadline = time.monotonic() + 10
    while True:
        producer.send(b"100")
        try:
            msg = consumer.receive(timeout_millis=300)
            break
        except pulsar.Timeout:
            assert time.monotonic() < deadline, "the consumer never came back"
    assert int(msg.data()) == 100


def test_delete_without_consumers_then_404s(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    publish(pulsar_client, "delete-idle", 3)
    assert call(admin_broker, "PUT", sub_path("delete-idle", "s"), EARLIEST)[0] == 204
    assert call(admin_broker, "DELETE", sub_path("delete-idle", "s"))[0] == 204
    gone = call(admin_broker, "DELETE", sub_path("delete-idle", "s"))
    assert gone == (404, {"reason": "Subscription not found"})
    assert call(admin_broker, "DELETE", sub_path("never-made", "s"))[0] == 404
    assert not (admin_broker.data / "topics" / "public" / "default" / "never-made").exists()  # no trace
    assert call(admin_broker, "POST", sub_path("delete-idle", "s", "/skip_all"))[0] == 404
    # Made again (at the earliest), it starts over: the deleted one's state is gone.
    assert call(admin_broker, "PUT", sub_path("delete-idle", "s"), EARLIEST)[0] == 204
    consumer = pulsar_client.subscribe("delete-idle", "s")
    assert values(receive_all(consumer, 3)) == [0, 1, 2]


def test_partitioned_topic_fans_out_or_refuses(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    assert call(admin_broker, "POST", sub_path("parts", "s", "/skip/1")) == (
        405,
        {"reason": "Skip messages on a partitioned topic is not allowed"},
    )
    assert call(admin_broker, "PUT", sub_path("parts", "s"), EARLIEST)[0] == 204
    assert call(admin_broker, "PUT", sub_path("parts", "s"))[0] == 409
    assert call(admin_broker, "POST", sub_path("parts", "s", "/resetcursor"), EARLIEST) == (
        405,
        {"reason": "Reset-cursor at position is not allowed for partitioned-topic"},
    )
    producer = pulsar_client.create_producer("parts", batching_enabled=False)
    for i in range(9):
        producer.send(f"{i}".encode(), partition_key=f"k{i}")
    assert call(admin_broker, "POST", sub_path("parts", "s", "/skip_all"))[0] == 204
    consumer = pulsar_client.subscribe("parts", "s", consumer_type=pulsar.ConsumerType.Shared)
    assert nothing_more(consumer, 300)
    assert call(admin_broker, "POST", sub_path("parts", "s", "/resetcursor/0"))[0] == 204
    assert sorted(values(receive_all(consumer, 9))) == list(range(9))
    consumer.close()
    assert call(admin_broker, "DELETE", sub_path("parts", "s"))[0] == 204
    assert call(admin_broker, "DELETE", sub_path("parts", "s"))[0] == 404


def test_expire_409_without_backlog_and_412_for_a_negative_age(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    assert call(admin_broker, "PUT", sub_path("expiring", "s"))[0] == 204
    status, body = call(admin_broker, "POST", sub_path("expiring", "s", "/expireMessages/1"))
    assert status == 409 and str(body["reason"]).startswith("Expire message by timestamp not issued on topic")
    publish(pulsar_client, "expiring", 3)
    assert call(admin_broker, "POST", sub_path("expiring", "s", "/expireMessages/-1"))[0] == 412
    assert call(admin_broker, "POST", sub_path("expiring", "s", "/expireMessages/x"))[0] == 404
    # None is that old: nothing expires.
    assert call(admin_broker, "POST", sub_path("expiring", "s", "/expireMessages/3600"))[0] == 204
    consumer = pulsar_client.subscribe("expiring", "s")
    assert values(receive_all(consumer, 3)) == [0, 1, 2]


def test_skip_all_and_expiry_empty_the_backlog_and_survive_a_killed_broker(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--http-port", "0")
    broker.start()
    try:
        c = client(broker.url)
        for sub in ("cleared", "expired", "kept"):
            c.subscribe("ttl", sub).close()
        publish(c, "ttl", 10)
        c.close()
        time.sleep(1.1)  # every message is older than a second now
        assert call(broker, "POST", sub_path("ttl", "cleared", "/skip_all"))[0] == 204
        assert call(broker, "POST", sub_path("ttl", "expired", "/expireMessages/1"))[0] == 204
        broker.kill()  # at once: a 204 means the cursor is on disk already
        broker.start()
        c = client(broker.url)
        try:
            cleared = c.subscribe("ttl", "cleared")
            expired = c.subscribe("ttl", "expired")
            kept = c.subscribe("ttl", "kept")
            assert values(receive_all(kept, 10)) == list(range(10))
            assert nothing_more(cleared, 300)
            assert nothing_more(expired, 100)
        finally:
            c.close()
    finally:
        broker.kill()


def test_reset_to_earliest_and_the_java_clients_excluded_key(
    admin_broker: BrokerProcess, pulsar_client: pulsar.Client
) -> None:
    """``MessageId.earliest`` as a reset body, and ``excluded``.

    ``excluded`` is the property pulsar-admin's Java client writes (Lombok's ``isExcluded()``): read
    as ``isExcluded`` is.
    """
    consumer = pulsar_client.subscribe("reset-ends", "s")
    publish(pulsar_client, "reset-ends", 4)
    got = receive_all(consumer, 4)
    path = sub_path("reset-ends", "s", "/resetcursor")
    assert call(admin_broker, "POST", path, EARLIEST)[0] == 204
    assert values(receive_all(consumer, 4)) == [0, 1, 2, 3]
    assert call(admin_broker, "POST", path, message_id(got[1].message_id(), excluded=True))[0] == 204
    assert values(receive_all(consumer, 2)) == [2, 3]
    assert nothing_more(consumer, 200)


def test_expire_up_to_a_message_id(admin_broker: BrokerProcess, pulsar_client: pulsar.Client) -> None:
    """POST ``expireMessages`` with a message id: mark-delete through it (before it when excluded)."""
    ids = publish(pulsar_client, "expire-to-id", 6)
    consumer_path = sub_path("expire-to-id", "s")
    assert call(admin_broker, "PUT", consumer_path, EARLIEST)[0] == 204
    body = {"ledgerId": ids[3].ledger_id(), "entryId": ids[3].entry_id(), "isExcluded": True}
    assert call(admin_broker, "POST", consumer_path + "/expireMessages", body)[0] == 204
    consumer = pulsar_client.subscribe("expire-to-id", "s")
    assert values(receive_all(consumer, 3)) == [3, 4, 5]
    assert call(admin_broker, "POST", sub_path("parts", "s", "/expireMessages"), body)[0] == 405
    assert call(admin_broker, "POST", consumer_path + "/expireMessages")[0] == 400


def test_a_plus_in_a_path_is_a_space_as_pulsar_decodes_it(admin_broker: BrokerProcess) -> None:
    """pulsar-admin encodes names with Java's URLEncoder (a space as ``+``); Pulsar decodes them back."""
    assert call(admin_broker, "PUT", f"{NS}/with+space/subscription/my+sub")[0] == 204
    assert call(admin_broker, "GET", f"{NS}/with%20space/subscriptions") == (200, ["my sub"])  # type: ignore[comparison-overlap]
    assert call(admin_broker, "PUT", f"{NS}/with%2Bplus")[0] == 204
    status, topics = call(admin_broker, "GET", NS)
    assert status == 200 and "persistent://public/default/with+plus" in topics  # type: ignore[operator]
    assert "persistent://public/default/with space" in topics  # type: ignore[operator]


def test_skip_and_clear_backlog_move_the_backlog_the_stats_report_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    """The figure an operator reads (``msgBacklog``) follows skip and skip_all, across a SIGKILL."""
    broker = BrokerProcess(tmp_path / "data", "--http-port", "0")
    broker.start()
    try:
        c = client(broker.url)
        c.subscribe("backlog", "s").close()
        publish(c, "backlog", 10)
        c.close()

        def backlog() -> object:
            status, stats = call(broker, "GET", f"{NS}/backlog/stats")
            assert status == 200
            return stats["subscriptions"]["s"]["msgBacklog"]  # type: ignore[index]

        assert backlog() == 10
        assert call(broker, "POST", sub_path("backlog", "s", "/skip/3"))[0] == 204
        assert backlog() == 7
        broker.kill()
        broker.start()
        assert backlog() == 7
        assert call(broker, "POST", sub_path("backlog", "s", "/skip_all"))[0] == 204
        assert backlog() == 0
        broker.kill()
        broker.start()
        assert backlog() == 0
    finally:
        broker.kill()
