"""What one client may cost: connections, unfinished frames, topics and their descriptors, topic loads.

Each limit is set low on a broker of its own, attacked with raw frames, and the official client
beside the attack must keep every message.
"""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

_T = api.BaseCommand
_QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def _client(broker: BrokerProcess) -> pulsar.Client:
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_QUIET)


def _rss_kib(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _fds(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def _round_trip(client: pulsar.Client, topic: str, n: int) -> None:
    """Produces ``n`` messages and receives every one of them, in order, exactly once."""
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    try:
        for i in range(n):
            producer.send(f"{topic}-{i}".encode())
        got = []
        for _ in range(n):
            msg = consumer.receive(timeout_millis=10_000)
            consumer.acknowledge(msg)
            got.append(msg.data().decode())
        assert got == [f"{topic}-{i}" for i in range(n)]
    finally:
        producer.close()
        consumer.close()


def _subscribe(raw: Raw, topic: str, consumer_id: int, request_id: int) -> _T:
    cmd = api.CommandSubscribe(
        topic=topic,
        subscription="s",
        subType=api.CommandSubscribe.Shared,
        consumer_id=consumer_id,
        request_id=request_id,
    )
    raw.send(_T(type=_T.SUBSCRIBE, subscribe=cmd))
    return raw.receive()


def _visit_topics(raw: Raw, prefix: str, n: int) -> None:
    """Subscribes to ``n`` new topics one after the other, closing each consumer (the topic goes idle)."""
    for i in range(n):
        reply = _subscribe(raw, f"{prefix}-{i}", i + 1, i + 1)
        assert reply.type == _T.SUCCESS, (i, reply)
        close = api.CommandCloseConsumer(consumer_id=i + 1, request_id=1000 + i)
        raw.send(_T(type=_T.CLOSE_CONSUMER, close_consumer=close))
        assert raw.receive().type == _T.SUCCESS


def test_connections_past_the_limit_get_pulsars_error(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--no-sync", "--max-connections-per-address", "6") as broker:
        client = _client(broker)
        try:
            _round_trip(client, "before", 3)  # the client's own connection: one of the six
            held = [Raw(broker.url) for _ in range(5)]
            extra = Raw(broker.url)
            refused = extra.receive()
            assert refused.type == _T.ERROR and refused.error.error == api.NotAllowedError
            assert refused.error.request_id == (1 << 64) - 1
            assert "maximum number of connections" in refused.error.message
            assert extra.closed()
            held.pop().close()
            time.sleep(0.2)
            again = Raw(broker.url)
            assert again.connect().type == _T.CONNECTED
            _round_trip(client, "after", 3)  # the client's connection was never touched
            for raw in [*held, again, extra]:
                raw.close()
        finally:
            client.close()


def _hold_unfinished_frame(url: str, claimed: int, sent: int, stop: threading.Event) -> None:
    """A connection that announces a ``claimed``-byte frame and sends ``sent`` bytes of it, then waits."""
    raw = Raw(url)
    raw.connect()
    raw.sock.settimeout(0.2)
    data = struct.pack(">I", claimed) + b"\x00" * sent
    at = 0
    while at < len(data) and not stop.is_set():
        try:
            at += raw.sock.send(data[at : at + 65536])
        except TimeoutError:
            continue  # the broker stopped reading: the socket buffers are full
        except OSError:
            break
    stop.wait(30)
    raw.close()


def test_unfinished_frames_are_bounded_in_total_and_in_time(tmp_path: Path) -> None:
    args = ("--no-sync", "--max-buffered-bytes", str(8 << 20), "--frame-timeout-s", "2")
    with running_broker(tmp_path / "data", *args) as broker:
        client = _client(broker)
        _round_trip(client, "warm", 3)
        before = _rss_kib(broker)
        stop = threading.Event()
        claimed = 5 * 1024 * 1024
        attackers = [
            threading.Thread(target=_hold_unfinished_frame, args=(broker.url, claimed, claimed - 16, stop))
            for _ in range(40)
        ]
        try:
            for t in attackers:
                t.start()
            time.sleep(1.0)
            grown = _rss_kib(broker) - before
            _round_trip(client, "during", 20)  # the good client keeps every message meanwhile
            # 40 x 5 MiB were offered: the broker took about its 8 MiB cap plus one read per connection.
            assert grown < 48 * 1024, f"RSS grew by {grown} KiB"
            time.sleep(3.0)  # past the frame timeout: the attackers were closed
            assert len(os.listdir(f"/proc/{broker.proc.pid}/fd")) < 40  # type: ignore[union-attr]
        finally:
            stop.set()
            for t in attackers:
                t.join()
            client.close()


def test_a_connection_without_connect_is_closed_after_the_frame_timeout(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--no-sync", "--frame-timeout-s", "1") as broker:
        host, port = broker.url.removeprefix("pulsar://").rsplit(":", 1)
        silent = socket.create_connection((host, int(port)), timeout=5)
        started = time.monotonic()
        assert silent.recv(100) == b""
        assert time.monotonic() - started < 4
        silent.close()


def test_idle_topics_are_closed_and_reopened_with_their_state(tmp_path: Path) -> None:
    args = ("--no-sync", "--max-open-topics", "10", "--topic-idle-s", "0.5", "--topic-loads-per-s", "1000")
    args += ("--max-topic-loads-per-s", "1000")
    with running_broker(tmp_path / "data", *args) as broker:
        client = _client(broker)
        try:
            consumer = client.subscribe("kept", "s", consumer_type=pulsar.ConsumerType.Shared)
            producer = client.create_producer("kept")
            for i in range(5):
                producer.send(f"m{i}".encode())
            producer.close()
            first = consumer.receive(timeout_millis=5000)
            consumer.acknowledge(first)
            consumer.close()  # m1..m4 unacked; "kept" is idle now
            fds = _fds(broker)
            raw = Raw(broker.url)
            raw.connect()
            _visit_topics(raw, "flood", 60)  # through one connection, 10 open at most
            raw.close()
            assert _fds(broker) <= fds + 10 * 8, "file descriptors grew with the topics"
            # "kept" was closed to make room (or idle); its state comes back with it.
            again = client.subscribe("kept", "s", consumer_type=pulsar.ConsumerType.Shared)
            got = sorted(again.receive(timeout_millis=5000).data() for _ in range(4))
            assert got == [b"m1", b"m2", b"m3", b"m4"]
        finally:
            client.close()


def test_all_topics_in_use_refuses_a_new_one_with_service_not_ready(tmp_path: Path) -> None:
    args = ("--no-sync", "--max-open-topics", "3", "--topic-loads-per-s", "1000")
    with running_broker(tmp_path / "data", *args) as broker:
        raw = Raw(broker.url)
        raw.connect()
        for i in range(3):
            assert _subscribe(raw, f"held-{i}", i + 1, i + 1).type == _T.SUCCESS
        reply = _subscribe(raw, "one-more", 9, 9)
        assert reply.type == _T.ERROR and reply.error.error == api.ServiceNotReady
        assert not (broker.data / "topics" / "public" / "default" / "one-more").exists()
        raw.send(
            _T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=1, request_id=20))
        )
        assert raw.receive().type == _T.SUCCESS
        assert _subscribe(raw, "one-more", 10, 21).type == _T.SUCCESS  # held-0 made room
        raw.close()


def test_topic_loads_are_rate_limited_per_connection(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--no-sync", "--topic-loads-per-s", "5") as broker:
        flood = Raw(broker.url)
        flood.connect()
        answers = [_subscribe(flood, f"rate-{i}", i + 1, i + 1) for i in range(20)]
        refused = [a for a in answers if a.type == _T.ERROR]
        assert refused and all(a.error.error == api.ServiceNotReady for a in refused)
        assert (
            len(answers) - len(refused) <= 10 + 2
        )  # the burst (twice the rate), and what refilled meanwhile
        client = _client(broker)  # another connection has its own budget
        try:
            _round_trip(client, "other", 3)
        finally:
            client.close()
            flood.close()


def test_topic_loads_are_rate_limited_over_all_connections(tmp_path: Path) -> None:
    args = ("--no-sync", "--topic-loads-per-s", "1000", "--max-topic-loads-per-s", "3")
    with running_broker(tmp_path / "data", *args) as broker:
        floods = [Raw(broker.url) for _ in range(3)]
        answers = []
        for n, raw in enumerate(floods):
            raw.connect()
            answers += [_subscribe(raw, f"all-{n}-{i}", i + 1, i + 1) for i in range(5)]
            raw.close()
        done = [a for a in answers if a.type == _T.SUCCESS]
        assert all(a.error.error == api.ServiceNotReady for a in answers if a.type != _T.SUCCESS)
        assert 6 <= len(done) <= 6 + 3, len(done)  # twice the rate at once, and what refilled meanwhile


def test_subscriptions_per_topic_are_capped_without_a_trace(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--no-sync", "--max-subscriptions-per-topic", "3") as broker:
        raw = Raw(broker.url)
        raw.connect()
        for i in range(3):
            cmd = api.CommandSubscribe(
                topic="capped", subscription=f"s{i}", subType=0, consumer_id=i, request_id=i
            )
            raw.send(_T(type=_T.SUBSCRIBE, subscribe=cmd))
            assert raw.receive().type == _T.SUCCESS
        cmd = api.CommandSubscribe(topic="capped", subscription="s3", subType=0, consumer_id=3, request_id=3)
        raw.send(_T(type=_T.SUBSCRIBE, subscribe=cmd))
        reply = raw.receive()
        assert reply.type == _T.ERROR and reply.error.error == api.NotAllowedError
        subs = broker.data / "topics" / "public" / "default" / "capped" / "subscriptions"
        assert sorted(p.name for p in subs.iterdir()) == sorted(f"s{i}".encode().hex() for i in range(3))
        raw.close()


def test_descriptors_run_short_and_idle_topics_make_room(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--no-sync", "--topic-loads-per-s", "1000")
    broker.args += ("--max-topic-loads-per-s", "1000")
    broker.start()
    assert broker.proc is not None
    resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (300, 300))  # 300 descriptors from now on
    try:
        client = _client(broker)
        consumer = client.subscribe("kept", "s")
        raw = Raw(broker.url)
        raw.connect()
        _visit_topics(raw, "fd", 150)  # 5 descriptors a topic with its subscription: 750 without closing any
        raw.close()
        assert _fds(broker) < 300
        producer = client.create_producer("kept")
        producer.send(b"still here")
        assert consumer.receive(timeout_millis=5000).data() == b"still here"
        client.close()
    finally:
        broker.stop()


def test_consumers_per_subscription_and_producers_per_topic_are_capped(tmp_path: Path) -> None:
    args = ("--no-sync", "--max-consumers-per-subscription", "2", "--max-producers-per-topic", "2")
    with running_broker(tmp_path / "data", *args) as broker:
        raw = Raw(broker.url)
        raw.connect()
        answers = [_subscribe(raw, "capped", i, i) for i in range(3)]
        assert [a.type for a in answers[:2]] == [_T.SUCCESS, _T.SUCCESS]
        assert answers[2].type == _T.ERROR and answers[2].error.error == api.ConsumerBusy
        produced = []
        for i in range(3):
            cmd = api.CommandProducer(topic="capped", producer_id=i, request_id=10 + i)
            raw.send(_T(type=_T.PRODUCER, producer=cmd))
            produced.append(raw.receive())
        assert [a.type for a in produced[:2]] == [_T.PRODUCER_SUCCESS, _T.PRODUCER_SUCCESS]
        assert produced[2].type == _T.ERROR and produced[2].error.error == api.ProducerBusy
        raw.send(
            _T(type=_T.CLOSE_PRODUCER, close_producer=api.CommandCloseProducer(producer_id=0, request_id=20))
        )
        assert raw.receive().type == _T.SUCCESS
        raw.send(
            _T(type=_T.PRODUCER, producer=api.CommandProducer(topic="capped", producer_id=5, request_id=21))
        )
        assert raw.receive().type == _T.PRODUCER_SUCCESS  # room again
        raw.close()


def test_an_idle_connection_keeps_no_memory_of_its_large_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fixed mmap threshold: glibc returns each large block to the system when it is freed, so the
    # RSS shows what is still held (with its dynamic threshold, freed blocks stay in its heap).
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    with running_broker(tmp_path / "data", "--no-sync") as broker:
        raw_connections = []
        before = _rss_kib(broker)
        for n in range(30):
            raw = Raw(broker.url)
            raw.connect()
            cmd = api.CommandProducer(topic="large", producer_id=1, request_id=1)
            raw.send(_T(type=_T.PRODUCER, producer=cmd))
            assert raw.receive().type == _T.PRODUCER_SUCCESS
            meta = api.MessageMetadata(producer_name=f"p{n}", sequence_id=0, publish_time=1)
            send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0))
            raw.sock.sendall(encode_payload_command(send, pack_stored(meta, b"x" * (4 << 20))))
            assert raw.receive().type == _T.SEND_RECEIPT
            raw_connections.append(raw)  # held open, idle
        grown = _rss_kib(broker) - before
        assert grown < 40 * 1024, f"30 idle connections kept {grown} KiB after one 4 MiB message each"
        for raw in raw_connections:
            raw.close()
