"""The event loop never waits for a disk: with every fsync taking 300 ms, other clients are served at once.

An in-process broker whose fsyncs (``os.fsync``/``os.fdatasync``) sleep: a producer's SENDs, a
consumer's acks (their cursor flushes), an UNSUBSCRIBE and a GET_LAST_MESSAGE_ID all reach the
disk while a second connection pings; every PONG comes back well before one fsync would end, and
the receipts still wait for theirs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.proto import pulsar_api_pb2 as api
from in_process_broker import InProcess
from raw_client import Raw

_T = api.BaseCommand
SLOW_S = 0.3
TOPIC = "persistent://public/default/slow-disk"


@pytest.fixture
def slow_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every fsync sleeps ``SLOW_S``; the times they were made are recorded."""
    made: list[float] = []
    real_fsync, real_datasync = os.fsync, getattr(os, "fdatasync", os.fsync)

    def slow(real: Any) -> Any:
        def sync(fd: int) -> None:
            made.append(time.monotonic())
            time.sleep(SLOW_S)
            real(fd)

        return sync

    monkeypatch.setattr(os, "fsync", slow(real_fsync))
    monkeypatch.setattr(os, "fdatasync", slow(real_datasync))
    yield made


def _request(raw: Raw, cmd: _T) -> _T:
    raw.send(cmd)
    return raw.receive()


def test_pings_are_answered_while_the_disk_is_slow(tmp_path: Path, slow_disk: list[float]) -> None:
    broker = InProcess(BrokerConfig(data=tmp_path, port=0, sync=True, flush_interval_ms=50))
    try:
        worker = Raw(broker.url)
        assert worker.connect().type == _T.CONNECTED
        sub = api.CommandSubscribe(
            topic=TOPIC, subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=1
        )
        assert _request(worker, _T(type=_T.SUBSCRIBE, subscribe=sub)).type == _T.SUCCESS
        producer = api.CommandProducer(topic=TOPIC, producer_id=1, request_id=2)
        assert _request(worker, _T(type=_T.PRODUCER, producer=producer)).type == _T.PRODUCER_SUCCESS
        pinger = Raw(broker.url)
        assert pinger.connect().type == _T.CONNECTED
        slow_disk.clear()

        rtts: list[float] = []
        done = threading.Event()

        def ping() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                assert _request(pinger, _T(type=_T.PING, ping=api.CommandPing())).type == _T.PONG
                rtts.append(time.monotonic() - t0)
                time.sleep(0.01)

        thread = threading.Thread(target=ping, daemon=True)
        thread.start()
        sent = time.monotonic()
        meta = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
        send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0))
        worker.sock.sendall(encode_payload_command(send, pack_stored(meta, b"m")))
        receipt = worker.receive()
        assert receipt.type == _T.SEND_RECEIPT and time.monotonic() - sent >= SLOW_S  # durable first
        worker.send(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=10)))
        message = worker.receive()
        assert message.type == _T.MESSAGE
        ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual)
        ack.message_id.add(
            ledgerId=message.message.message_id.ledgerId, entryId=message.message.message_id.entryId
        )
        worker.send(_T(type=_T.ACK, ack=ack))  # its cursor flush syncs within flush_interval_ms
        last = _T(
            type=_T.GET_LAST_MESSAGE_ID,
            getLastMessageId=api.CommandGetLastMessageId(consumer_id=1, request_id=3),
        )
        assert _request(worker, last).type == _T.GET_LAST_MESSAGE_ID_RESPONSE
        unsubscribe = _T(type=_T.UNSUBSCRIBE, unsubscribe=api.CommandUnsubscribe(consumer_id=1, request_id=4))
        assert _request(worker, unsubscribe).type == _T.SUCCESS
        time.sleep(2 * SLOW_S)
        done.set()
        thread.join(5)
        assert len(slow_disk) >= 2, "the disk was not reached: the test shows nothing"
        assert rtts and max(rtts) < SLOW_S / 2, (max(rtts), len(rtts), len(slow_disk))
    finally:
        broker.stop()
