"""A batch-index ACK learns its batch's size without a disk read on the event loop.

The official client (``batch_index_ack_enabled``) acks part of a batch: the subscription knows the
size of a batch it sent from memory, and reads one it does not know (acked after a restart, before
it was sent again) on a worker thread, applying the ACK once read as it would have at once. An
in-process broker, whose ``MessageLog.read`` calls are recorded with their thread.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cursorkit import Position
from cursorkit.broker.log import MessageLog
from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.broker.server import batch_sizes
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.subscription import Subscription
from cursorkit.proto import pulsar_api_pb2 as api
from in_process_broker import InProcess
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, nothing_more, receive_all  # noqa: E402

_T = api.BaseCommand
Reads = list[tuple[threading.Thread, Position]]


@pytest.fixture
def log_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Reads]:
    """Every ``MessageLog.read``: the thread it ran on and the position read."""
    reads: Reads = []
    real = MessageLog.read

    def read(self: MessageLog, position: Position) -> Any:
        reads.append((threading.current_thread(), position))
        return real(self, position)

    monkeypatch.setattr(MessageLog, "read", read)
    yield reads


def _on_loop(broker: InProcess, topic: str, look: Callable[[Subscription], Any]) -> Any:
    """``look`` at subscription "s" of ``topic``, on the broker's loop."""

    async def run() -> Any:
        found = [t for name, t in broker.broker.topics.items() if name.full.endswith("/" + topic)]
        return look(found[0].subscriptions["s"])

    return broker.call(run())


def _unacked_words(broker: InProcess, topic: str, position: Position, want: int) -> int | None:
    """The unacked-index bits the cursor holds for a partly acked batch, once they are ``want``."""
    deadline = time.monotonic() + 5
    bits = None
    while time.monotonic() < deadline:
        batch = _on_loop(broker, topic, lambda sub: sub.cursor.batch(position))
        bits = None if batch is None else int.from_bytes(batch[1], "little")
        if bits == want:
            break
        time.sleep(0.05)
    return bits


def _batched_producer(c: pulsar.Client, topic: str, batch: int) -> pulsar.Producer:
    return c.create_producer(
        topic, batching_enabled=True, batching_max_messages=batch, batching_max_publish_delay_ms=1000
    )


def _position(msg: pulsar.Message) -> Position:
    return Position(msg.message_id().ledger_id(), msg.message_id().entry_id())


def test_a_batch_index_ack_of_a_batch_sent_reads_nothing(tmp_path: Path, log_reads: Reads) -> None:
    """Part of a batch acked: the cursor holds the rest, and the log was not read at all."""
    broker = InProcess(BrokerConfig(data=tmp_path, port=0, sync=False))
    try:
        c = client(broker.url)
        consumer = c.subscribe(
            "sent", "s", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
        )
        producer = _batched_producer(c, "sent", 10)
        for i in range(10):
            producer.send_async(f"{i}".encode(), None)
        producer.flush()
        got = receive_all(consumer, 10, ack=False)
        assert len({_position(m) for m in got}) == 1  # one entry
        for m in got[:4]:
            consumer.acknowledge(m)
        assert _unacked_words(broker, "sent", _position(got[0]), 0b1111110000) == 0b1111110000
        assert log_reads == []  # neither on the loop nor off it: the size came from the send
        c.close()
    finally:
        broker.stop()


def test_batches_acked_are_forgotten_and_past_the_bound_sizes_are_read_off_the_loop(
    tmp_path: Path, log_reads: Reads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches acked in full are forgotten at the next flush; past the bound, sizes are read off the loop.

    Three batches acked in full: a flush later none is remembered. With a bound of 0, a batch sent
    is not remembered, and its partial ACK reads the size on a worker thread, once.
    """
    broker = InProcess(BrokerConfig(data=tmp_path, port=0, sync=False, flush_interval_ms=20))
    try:
        c = client(broker.url)
        consumer = c.subscribe(
            "bound", "s", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
        )
        producer = _batched_producer(c, "bound", 5)
        for i in range(15):
            producer.send_async(f"{i}".encode(), None)
            if i % 5 == 4:
                producer.flush()
        assert len({_position(m) for m in receive_all(consumer, 15)}) == 3
        deadline = time.monotonic() + 5
        while _on_loop(broker, "bound", lambda sub: len(sub.batch_sizes)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _on_loop(broker, "bound", lambda sub: len(sub.batch_sizes)) == 0
        assert log_reads == []

        monkeypatch.setattr(batch_sizes, "BATCH_SIZES_KEPT", 0)
        for i in range(5):
            producer.send_async(f"{i}".encode(), None)
        producer.flush()
        got = receive_all(consumer, 5, ack=False)
        for m in got[:2]:
            consumer.acknowledge(m)
        assert _unacked_words(broker, "bound", _position(got[0]), 0b11100) == 0b11100
        assert [at for _, at in log_reads] == [_position(got[0])]
        assert log_reads[0][0] is not broker.thread
        c.close()
    finally:
        broker.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_partial_batch_acks_after_a_restart_read_the_size_off_the_loop(
    tmp_path: Path, log_reads: Reads
) -> None:
    """A batch received before a restart and acked in part after it, before it was sent again.

    A first batch of 100 messages comes before it, and the consumer's queue is 10: after the
    restart the broker sends only the first batch again. The second one's partial ACK reads its
    size on a worker thread; a later consumer gets exactly its unacked messages.
    """
    config = BrokerConfig(data=tmp_path, port=_free_port(), sync=False)
    broker = InProcess(config)
    c = client(broker.url)
    try:
        consumer = c.subscribe(
            "restart",
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            batch_index_ack_enabled=True,
            receiver_queue_size=10,
        )
        producer = _batched_producer(c, "restart", 100)
        for i in range(100):
            producer.send_async(f"a{i}".encode(), None)
        producer.flush()
        for i in range(10):
            producer.send_async(f"b{i}".encode(), None)
        producer.flush()
        got = receive_all(consumer, 110, ack=False)
        held = [m for m in got if m.data().startswith(b"b")]
        assert [m.data() for m in held] == [f"b{i}".encode() for i in range(10)]
        second = _position(held[0])
        assert len({_position(m) for m in got}) == 2 and {_position(m) for m in held} == {second}
        broker.stop()
        broker = InProcess(config)
        again = consumer.receive(timeout_millis=10_000)  # reconnected: the first batch comes back
        assert again.data() == b"a0"
        for m in held[:4]:
            consumer.acknowledge(m)
        assert _unacked_words(broker, "restart", second, 0b1111110000) == 0b1111110000
        threads = [thread for thread, at in log_reads if at == second]
        assert threads, "the second batch was sent again: the test shows nothing"
        assert broker.thread not in threads
        assert all(thread is not broker.thread for thread, _ in log_reads)
        c.close()
        c = client(broker.url)
        fresh = c.subscribe("restart", "s", consumer_type=pulsar.ConsumerType.Shared)
        left = sorted(m.data() for m in receive_all(fresh, 106) if m.data().startswith(b"b"))
        assert left == [f"b{i}".encode() for i in range(4, 10)]
        assert nothing_more(fresh)
    finally:
        c.close()
        broker.stop()


class _Conn:
    """A raw connection whose frames are kept in order (several may come in one read)."""

    def __init__(self, url: str) -> None:
        self.raw = Raw(url)
        self.raw.sock.settimeout(5)
        self.inbox: list[api.BaseCommand] = []
        assert self.raw.connect().type == _T.CONNECTED

    def next(self, kind: int) -> api.BaseCommand:
        """The next frame of ``kind`` (the ones before it are skipped)."""
        while True:
            while self.inbox:
                cmd = self.inbox.pop(0)
                if cmd.type == kind:
                    return cmd
            self.inbox += [f.command for f in self.raw.decoder.feed(self.raw.sock.recv(65536))]

    def request(self, cmd: _T, kind: int) -> _T:
        self.raw.send(cmd)
        return self.next(kind)


def _subscribe(conn: _Conn, topic: str) -> None:
    cmd = api.CommandSubscribe(
        topic=topic, subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=1
    )
    conn.request(_T(type=_T.SUBSCRIBE, subscribe=cmd), _T.SUCCESS)


def _ack(at: Position, request_id: int, words: list[int] | None = None) -> _T:
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual, request_id=request_id)
    mid = ack.message_id.add(ledgerId=at.ledger_id, entryId=at.entry_id)
    if words is not None:
        mid.ack_set.extend(words)
    return _T(type=_T.ACK, ack=ack)


def test_a_batch_ack_waiting_for_its_read_yields_to_a_whole_ack_and_to_a_seek(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches of 4 never sent, so their sizes are read off the loop, held there until released.

    While the first's partial ACK waits, another connection acks it whole: answered at once, and
    it stays acked whole. While the second's waits, another connection seeks to it: the seek
    forgets every earlier ack, so the partial ACK leaves nothing once it lands.
    """
    broker = InProcess(BrokerConfig(data=tmp_path, port=0, sync=False))
    entered, release = threading.Event(), threading.Event()
    real = MessageLog.read

    def held_read(self: MessageLog, position: Position) -> Any:
        if threading.current_thread() is not broker.thread:
            entered.set()
            release.wait(5)
        return real(self, position)

    first, second = _Conn(broker.url), _Conn(broker.url)
    try:
        producer = api.CommandProducer(topic="held", producer_id=1, request_id=2)
        first.request(_T(type=_T.PRODUCER, producer=producer), _T.PRODUCER_SUCCESS)
        _subscribe(first, "held")
        _subscribe(second, "held")
        batches = []
        for seq in range(2):
            meta = api.MessageMetadata(
                producer_name="raw", sequence_id=seq, publish_time=1, num_messages_in_batch=4
            )
            send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=seq, num_messages=4))
            first.raw.sock.sendall(encode_payload_command(send, pack_stored(meta, b"\x00" * 24)))
            mid = first.next(_T.SEND_RECEIPT).send_receipt.message_id
            batches.append(Position(mid.ledgerId, mid.entryId))
        monkeypatch.setattr(MessageLog, "read", held_read)

        def state(at: Position) -> Any:
            return _on_loop(broker, "held", lambda sub: (sub.cursor.is_acked(at), sub.cursor.batch(at)))

        # 1: a whole ACK while the partial one waits for its read
        first.raw.send(_ack(batches[0], 10, [0b1110]))
        assert entered.wait(5)
        assert second.request(_ack(batches[0], 20), _T.ACK_RESPONSE).ackResponse.request_id == 20
        assert state(batches[0]) == (True, None)
        release.set()
        assert first.next(_T.ACK_RESPONSE).ackResponse.request_id == 10
        assert state(batches[0]) == (True, None)

        # 2: a seek while the partial one waits for its read
        entered.clear()
        release.clear()
        first.raw.send(_ack(batches[1], 11, [0b1110]))
        assert entered.wait(5)
        to = api.MessageIdData(ledgerId=batches[1].ledger_id, entryId=batches[1].entry_id)
        seek = _T(type=_T.SEEK, seek=api.CommandSeek(consumer_id=1, request_id=21, message_id=to))
        assert second.request(seek, _T.SUCCESS).success.request_id == 21
        release.set()
        assert first.next(_T.ACK_RESPONSE).ackResponse.request_id == 11
        assert state(batches[1]) == (False, None)
    finally:
        release.set()
        first.raw.close()
        second.raw.close()
        broker.stop()
