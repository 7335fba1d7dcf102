"""Pulsar's stats REST paths against a real broker: ``/stats``, ``/partitioned-stats``, ``/internalStats``.

The official client produces and consumes; a real HTTP client reads the stats, compared with what
Pulsar would show (field names, counts, its range strings).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import pytest

from broker_process import BrokerProcess
from cursorkit import Position, RangeSet
from cursorkit.broker.server.admin.figures import bytes_after, entries_between
from cursorkit.broker.server.admin.stats_json import MAX_RANGES_SHOWN, range_string
from cursorkit.broker.server.meters import Meter
from pulsar_helpers import client, receive_all

pytest.importorskip("aiohttp")

T = TypeVar("T")
NS = "persistent://public/default"
PARTITIONED = f"{NS}/pt"


def get(url: str) -> tuple[int, Any]:
    """Status and JSON body of a GET (an error's too)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - a test broker on 127.0.0.1
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def eventually(check: Callable[[], T], timeout: float = 5.0) -> T:
    """``check()`` once it stops failing (acks reach the broker a little after the client sends them)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with its admin port for the module (each test has topics of its own)."""
    data = tmp_path_factory.mktemp("stats") / "data"
    b = BrokerProcess(data, "--http-port", "0", "--partitioned-topic", f"{PARTITIONED}=3")
    b.start()
    try:
        yield b
    finally:
        b.kill()


def stats(broker: BrokerProcess, local: str, what: str = "stats", query: str = "") -> Any:
    status, body = get(f"{broker.admin_url}/admin/v2/persistent/public/default/{local}/{what}{query}")
    assert status == 200, body
    return body


def test_topic_stats_count_what_was_produced_sent_and_acked(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/counted"
        shared = pulsar.ConsumerType.Shared
        consumer = c.subscribe(topic, "sub", consumer_type=shared, receiver_queue_size=100, consumer_name="c")
        producer = c.create_producer(topic, producer_name="p1", batching_enabled=False)
        for i in range(10):
            producer.send(b"message-%d" % i)
        got = receive_all(consumer, 10, ack=False)
        for msg in got[:4]:
            consumer.acknowledge(msg)

        def settled() -> Any:
            s = stats(broker, "counted")
            assert s["subscriptions"]["sub"]["msgBacklog"] == 6
            return s

        s = eventually(settled)
        assert s["msgInCounter"] == 10 and s["bytesInCounter"] > 0
        assert s["storageSize"] == s["bytesInCounter"]  # as in Pulsar: the entries' bytes
        assert s["msgRateIn"] > 0 and s["msgThroughputIn"] > 0
        assert s["msgOutCounter"] == 10 and s["bytesOutCounter"] == s["bytesInCounter"]
        [pub] = s["publishers"]
        assert pub["producerName"] == "p1" and pub["accessMode"] == "Shared"
        assert pub["address"].startswith("/127.0.0.1:") and pub["clientVersion"].startswith("Pulsar")
        sub = s["subscriptions"]["sub"]
        assert sub["type"] == "Shared" and sub["isDurable"] is True and sub["durable"] is True
        assert sub["unackedMessages"] == 6 and sub["msgBacklogNoDelayed"] == 6 and sub["msgDelayed"] == 0
        assert sub["msgOutCounter"] == 10 and sub["blockedSubscriptionOnUnackedMsgs"] is False
        assert sub["backlogSize"] == -1  # only with ?subscriptionBacklogSize=true, as in Pulsar
        [cons] = sub["consumers"]
        assert cons["consumerName"] == "c" and cons["availablePermits"] == 90
        assert cons["unackedMessages"] == 6 and cons["msgOutCounter"] == 10
        assert cons["avgMessagesPerEntry"] == 1
        assert "keyHashRanges" not in cons and "activeConsumerName" not in sub
        sized = stats(broker, "counted", query="?subscriptionBacklogSize=true&getEarliestTimeInBacklog=true")
        assert sized["subscriptions"]["sub"]["backlogSize"] > 0
        first = sized["subscriptions"]["sub"]["earliestMsgPublishTimeInBacklog"]
        assert first == got[4].publish_timestamp() and sized["earliestMsgPublishTimeInBacklogs"] == first
    finally:
        c.close()


def test_clients_show_their_access_mode_epoch_and_metadata(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/exclusive"
        c.subscribe(
            topic,
            "fail",
            consumer_type=pulsar.ConsumerType.Failover,
            consumer_name="only",
            properties={"team": "blue"},
        )
        producer = c.create_producer(
            topic,
            producer_name="solo",
            access_mode=pulsar.ProducerAccessMode.Exclusive,
            properties={"app": "x"},
        )
        producer.send(b"x")
        s = stats(broker, "exclusive")
        [pub] = s["publishers"]
        assert pub["accessMode"] == "Exclusive" and pub["metadata"] == {"app": "x"}
        assert s["topicEpoch"] == 0 and s["waitingPublishers"] == 0
        sub = s["subscriptions"]["fail"]
        assert sub["type"] == "Failover" and sub["activeConsumerName"] == "only"
        [cons] = sub["consumers"]
        assert cons["metadata"] == {"team": "blue"} and cons["unackedMessages"] == 0  # as Pulsar: Failover
        producer.close()
        assert stats(broker, "exclusive")["publishers"] == []
    finally:
        c.close()


def test_internal_stats_show_pulsars_range_strings_after_acks_out_of_order(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/ranges"
        consumer = c.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        ids = [producer.send(b"m%d" % i) for i in range(10)]
        ledger = ids[0].ledger_id()
        got = receive_all(consumer, 10, ack=False)
        for i in (7, 1, 5, 2):
            consumer.acknowledge(got[i])

        def cursor() -> Any:
            cur = stats(broker, "ranges", "internalStats")["cursors"]["sub"]
            assert cur["individuallyDeletedMessages"] == (
                f"[({ledger}:0..{ledger}:2],({ledger}:4..{ledger}:5],({ledger}:6..{ledger}:7]]"
            )
            return cur

        cur = eventually(cursor)
        assert cur["markDeletePosition"] == f"{ledger}:-1" and cur["readPosition"] == f"{ledger}:10"
        assert cur["totalNonContiguousDeletedMessagesRange"] == 3
        assert cur["numberOfEntriesSinceFirstNotAckedMessage"] == 11
        consumer.acknowledge(got[0])

        def moved() -> Any:
            cur = stats(broker, "ranges", "internalStats")["cursors"]["sub"]
            assert cur["markDeletePosition"] == f"{ledger}:2"
            return cur

        cur = eventually(moved)
        assert cur["individuallyDeletedMessages"] == f"[({ledger}:4..{ledger}:5],({ledger}:6..{ledger}:7]]"
        assert cur["numberOfEntriesSinceFirstNotAckedMessage"] == 8
        internal = stats(broker, "ranges", "internalStats")
        assert internal["numberOfEntries"] == 10 and internal["lastConfirmedEntry"] == f"{ledger}:9"
        assert internal["ledgers"][-1]["ledgerId"] == ledger and internal["ledgers"][-1]["entries"] == 10
        assert internal["totalSize"] == stats(broker, "ranges")["storageSize"]
        assert stats(broker, "ranges")["subscriptions"]["sub"]["nonContiguousDeletedMessagesRanges"] == 2
    finally:
        c.close()


def test_sticky_key_shared_consumers_show_their_hash_ranges(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/sticky"
        for name, ranges in (("low", [(0, 32767)]), ("high", [(32768, 65535)])):
            c.subscribe(
                topic,
                "ks",
                consumer_type=pulsar.ConsumerType.KeyShared,
                consumer_name=name,
                key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                    pulsar.KeySharedMode.Sticky, sticky_ranges=ranges
                ),
            )
        sub = stats(broker, "sticky")["subscriptions"]["ks"]
        assert sub["type"] == "Key_Shared" and sub["keySharedMode"] == "STICKY"
        assert sub["allowOutOfOrderDelivery"] is False
        by_name = {cons["consumerName"]: cons for cons in sub["consumers"]}
        assert by_name["low"]["keyHashRanges"] == ["[0, 32767]"]
        assert by_name["high"]["keyHashRanges"] == ["[32768, 65535]"]
        assert by_name["high"]["keyHashRangeArrays"] == [[32768, 65535]]
    finally:
        c.close()


def test_auto_split_consumers_split_the_hash_space_between_them(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        topic = f"{NS}/autosplit"
        consumers = [
            c.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=n)
            for n in ("a", "b")
        ]
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(b"x", partition_key=f"key-{i}")
        sub = eventually(lambda: _all_sent(stats(broker, "autosplit")["subscriptions"]["ks"], 20))
        assert sub["keySharedMode"] == "AUTO_SPLIT" and sub["unackedMessages"] == 20
        ranges = sorted(
            tuple(json.loads(text)) for cons in sub["consumers"] for text in cons["keyHashRanges"]
        )
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # disjoint
        assert sum(cons["unackedMessages"] for cons in sub["consumers"]) == 20
        assert {cons["consumerName"] for cons in sub["consumers"]} == {"a", "b"}
        del consumers
    finally:
        c.close()


def _all_sent(sub: Any, n: int) -> Any:
    assert sub["msgOutCounter"] == n
    return sub


def test_unknown_topics_are_404_and_nothing_is_made(broker: BrokerProcess) -> None:
    for what in ("stats", "internalStats", "partitioned-stats"):
        status, body = get(f"{broker.admin_url}/admin/v2/persistent/public/default/nowhere/{what}")
        assert status == 404, (what, body)
        assert isinstance(body["reason"], str)
    status, body = get(f"{broker.admin_url}/admin/v2/persistent/public/default/nowhere/stats")
    assert (status, body) == (404, {"reason": "Topic not found"})
    assert not list(broker.data.rglob("nowhere"))
    status, body = get(f"{broker.admin_url}/admin/v2/persistent/public/default/counted/partitioned-stats")
    assert status == 404  # not a partitioned topic


def test_partitioned_stats_add_up_the_partitions(broker: BrokerProcess) -> None:
    c = client(broker.url)
    try:
        consumer = c.subscribe(PARTITIONED, "sub")
        producer = c.create_producer(PARTITIONED, batching_enabled=False)
        for i in range(9):
            producer.send(b"x", partition_key=f"k{i}")
        receive_all(consumer, 9, ack=False)
        body = eventually(lambda: _all_sent(stats(broker, "pt", "partitioned-stats"), 9))
        assert body["metadata"] == {"partitions": 3} and body["msgInCounter"] == 9
        assert sorted(body["partitions"]) == [f"{PARTITIONED}-partition-{i}" for i in range(3)]
        assert sum(p["msgInCounter"] for p in body["partitions"].values()) == 9
        assert body["subscriptions"]["sub"]["msgBacklog"] == 9
        assert stats(broker, "pt", "partitioned-stats", "?perPartition=false")["partitions"] == {}
        one = stats(broker, "pt-partition-0")
        assert one["msgInCounter"] == body["partitions"][f"{PARTITIONED}-partition-0"]["msgInCounter"]
    finally:
        c.close()


def test_a_topic_on_disk_is_opened_for_its_stats(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", "--http-port", "0")
    b.start()
    try:
        c = client(b.url)
        c.subscribe(f"{NS}/kept", "sub")
        producer = c.create_producer(f"{NS}/kept", batching_enabled=False)
        for _ in range(5):
            producer.send(b"x")
        c.close()
        b.stop()
        b.start()  # the topic is on disk, not open
        status, body = get(f"{b.admin_url}/admin/v2/persistent/public/default/kept/stats")
        assert status == 200, body
        assert body["subscriptions"]["sub"]["msgBacklog"] == 5 and body["storageSize"] > 0
        assert body["msgInCounter"] == 0  # counters start when a topic is loaded, as in Pulsar
    finally:
        b.kill()


def test_the_range_string_is_bounded() -> None:
    acked = RangeSet()
    for e in range(0, 4 * MAX_RANGES_SHOWN, 2):
        acked.add(3, e)
    text = range_string(acked)
    assert text.startswith("[(3:-1..3:0],(3:1..3:2],") and text.endswith(",...]")
    assert text.count("..") == MAX_RANGES_SHOWN + 1  # the ranges and the ellipsis
    small = RangeSet()
    small.add(3, 5)
    small.add(3, 6)
    small.add(3, 9)
    assert range_string(small) == "[(3:4..3:6],(3:8..3:9]]"


def test_entry_counts_and_byte_estimates_follow_the_ledgers() -> None:
    entries, sizes = {1: 10, 2: 4}, {1: 1000, 2: 400}
    assert entries_between(Position(1, 2), Position(1, 10), entries) == 8
    assert entries_between(Position(1, 7), Position(2, 1), entries) == 4
    assert entries_between(Position(2, 1), Position(1, 7), entries) == 0
    assert bytes_after(Position(1, 4), entries, sizes) == 500 + 400
    assert bytes_after(Position(2, 3), entries, sizes) == 0


def test_a_meter_rate_covers_at_least_a_second() -> None:
    t0 = time.monotonic()
    m = Meter()
    m.add(100, 10, 1000)
    assert m.rates(t0 + 2.0) == pytest.approx((50.0, 500.0), rel=0.01)  # since the meter was made
    m.add(100, 10, 1000)
    # a tenth of a second after the last reading: still averaged from the meter's start, not over 0.1 s
    assert m.rates(t0 + 2.1) == pytest.approx((200 / 2.1, 2000 / 2.1), rel=0.01)
    # a second and more after it: averaged from that reading on
    assert m.rates(t0 + 3.5) == pytest.approx((100 / 1.5, 1000 / 1.5), rel=0.01)
