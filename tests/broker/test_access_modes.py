"""Producer access modes against the broker: the official client, then raw frames for what it hides.

Shared beside an Exclusive producer is ProducerBusy, Exclusive beside a Shared one is ProducerFenced
(both at once, not after the client's operation timeout); a WaitForExclusive producer gets the topic
when its holder closes; an ExclusiveWithFencing one closes the holder, whose client comes back with
its older epoch and is fenced for good. Raw frames show the two answers a waiter gets (not ready,
then ready with the epoch), that a waiter which leaves or whose connection closes leaves no trace,
and that a refused PRODUCER takes no name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.proto import pulsar_api_pb2 as api
from pulsar_helpers import receive_all
from raw_client import Raw

_T = api.BaseCommand
Mode = pulsar.ProducerAccessMode
PROMPT_S = 2.0
"""A refusal must come well before the client's operation timeout (3 s here)."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("access") / "data", "--no-sync") as b:
        yield b


@pytest.fixture
def clients(broker: BrokerProcess) -> Iterator[list[pulsar.Client]]:
    """Three clients (three connections), closed after the test."""
    made = [
        pulsar.Client(
            broker.url, operation_timeout_seconds=3, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        for _ in range(3)
    ]
    yield made
    for c in made:
        c.close()


def _topic(name: str) -> str:
    return f"persistent://public/default/access-{name}"


def _refused(
    client: pulsar.Client, topic: str, mode: pulsar.ProducerAccessMode, error: type[Exception]
) -> None:
    started = time.monotonic()
    with pytest.raises(error):
        client.create_producer(topic, access_mode=mode)
    assert time.monotonic() - started < PROMPT_S


def test_shared_is_busy_while_an_exclusive_producer_holds(clients: list[pulsar.Client]) -> None:
    a, b, _ = clients
    topic = _topic("shared-busy")
    holder = a.create_producer(topic, access_mode=Mode.Exclusive)
    _refused(b, topic, Mode.Shared, pulsar.ProducerBusy)
    _refused(b, topic, Mode.Exclusive, pulsar.ProducerFenced)
    holder.send(b"still mine")
    holder.close()
    b.create_producer(topic).send(b"shared again")  # the exclusive one closed: the topic is open


def test_exclusive_is_fenced_while_a_shared_producer_exists(clients: list[pulsar.Client]) -> None:
    a, b, _ = clients
    topic = _topic("exclusive-fenced")
    shared = a.create_producer(topic)
    _refused(b, topic, Mode.Exclusive, pulsar.ProducerFenced)
    shared.send(b"still open")
    b.create_producer(topic).send(b"and shared")


def test_wait_for_exclusive_gets_the_topic_when_the_holder_closes(clients: list[pulsar.Client]) -> None:
    a, b, c = clients
    topic = _topic("wait")
    consumer = c.subscribe(topic, "s")
    holder = a.create_producer(topic, access_mode=Mode.Exclusive)
    got: list[pulsar.Producer] = []
    waiter = threading.Thread(
        target=lambda: got.append(b.create_producer(topic, access_mode=Mode.WaitForExclusive))
    )
    waiter.start()
    waiter.join(1.0)
    assert waiter.is_alive(), "the waiter must wait while the topic is held"
    holder.send(b"first")
    holder.close()
    waiter.join(5.0)
    assert got, "the waiter was not granted the topic"
    got[0].send(b"second")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"first", b"second"]
    _refused(a, topic, Mode.Shared, pulsar.ProducerBusy)  # the waiter now holds it exclusively


def test_exclusive_with_fencing_takes_the_topic(clients: list[pulsar.Client]) -> None:
    a, b, c = clients
    topic = _topic("fencing")
    consumer = c.subscribe(topic, "s")
    old = a.create_producer(topic, access_mode=Mode.Exclusive, send_timeout_millis=3000)
    old.send(b"old")
    new = b.create_producer(topic, access_mode=Mode.ExclusiveWithFencing)
    new.send(b"new")
    deadline = time.monotonic() + 5
    while old.is_connected() and time.monotonic() < deadline:  # told by the broker, before any send
        time.sleep(0.05)
    assert not old.is_connected()
    with pytest.raises(pulsar.ProducerFenced):
        old.send(b"too late")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"old", b"new"]
    new.close()
    a.create_producer(topic).send(b"shared again")


# -- raw frames ------------------------------------------------------------------------------------


class Conn:
    """A raw connection: commands out, frames in arrival order (kept until asked for)."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.raw = Raw(broker.url)
        assert self.raw.connect().type == _T.CONNECTED
        self.pending: list[_T] = []

    def next(self, kind: int | None = None) -> _T:
        """The next frame (of type ``kind``, others kept for later)."""
        while True:
            for i, cmd in enumerate(self.pending):
                if kind is None or cmd.type == kind:
                    return self.pending.pop(i)
            data = self.raw.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.pending.extend(f.command for f in self.raw.decoder.feed(data))

    def nothing(self, wait_s: float = 0.3) -> bool:
        """Whether no frame arrives within ``wait_s``."""
        self.raw.sock.settimeout(wait_s)
        try:
            data = self.raw.sock.recv(65536)
        except TimeoutError:
            return not self.pending
        finally:
            self.raw.sock.settimeout(5)
        self.pending.extend(f.command for f in self.raw.decoder.feed(data))
        return False

    def producer(self, topic: str, pid: int, mode: int = api.Shared, **fields: object) -> _T:
        """Sends PRODUCER (request id = producer id) and returns its first answer."""
        q = api.CommandProducer(topic=topic, producer_id=pid, request_id=pid)
        q.producer_access_mode = mode  # type: ignore[assignment]  # the enum's values are ints
        for name, value in fields.items():
            setattr(q, name, value)
        self.raw.send(_T(type=_T.PRODUCER, producer=q))
        return self.answer(pid)

    def answer(self, request_id: int) -> _T:
        """The next PRODUCER_SUCCESS or ERROR for ``request_id``."""
        while True:
            for i, cmd in enumerate(self.pending):
                if (cmd.type == _T.PRODUCER_SUCCESS and cmd.producer_success.request_id == request_id) or (
                    cmd.type == _T.ERROR and cmd.error.request_id == request_id
                ):
                    return self.pending.pop(i)
            data = self.raw.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.pending.extend(f.command for f in self.raw.decoder.feed(data))

    def close_producer(self, pid: int) -> None:
        cmd = _T(
            type=_T.CLOSE_PRODUCER,
            close_producer=api.CommandCloseProducer(producer_id=pid, request_id=900 + pid),
        )
        self.raw.send(cmd)
        assert self.next(_T.SUCCESS).success.request_id == 900 + pid


def _ok(answer: _T, *, ready: bool = True, epoch: int | None = None) -> None:
    assert answer.type == _T.PRODUCER_SUCCESS, answer
    s = answer.producer_success
    assert s.producer_ready is ready
    assert (s.topic_epoch if s.HasField("topic_epoch") else None) == epoch


def _error(answer: _T, code: int) -> None:
    assert answer.type == _T.ERROR, answer
    assert answer.error.error == code, answer


def test_a_waiter_is_answered_twice_and_each_grant_moves_the_epoch(broker: BrokerProcess) -> None:
    topic = _topic("raw-epochs")
    a, b, c = Conn(broker), Conn(broker), Conn(broker)
    _ok(a.producer(topic, 1, api.Exclusive), epoch=0)
    _ok(b.producer(topic, 2, api.WaitForExclusive), ready=False)
    _ok(c.producer(topic, 3, api.WaitForExclusive), ready=False)
    _error(c.producer(topic, 4, api.Shared), api.ProducerBusy)  # a waiter holds Shared ones off too
    assert b.nothing()
    a.close_producer(1)
    _ok(b.answer(2), epoch=1)  # the first waiter, on its own request id
    assert c.nothing()
    b.close_producer(2)
    _ok(c.answer(3), epoch=2)
    _error(a.producer(topic, 5, api.Exclusive, topic_epoch=1), api.ProducerFenced)  # superseded
    c.close_producer(3)
    _ok(a.producer(topic, 6, api.Shared), epoch=2)  # Shared producers are told the epoch


def test_a_waiter_that_leaves_or_whose_connection_closes_leaves_no_trace(broker: BrokerProcess) -> None:
    topic = _topic("raw-leavers")
    a, b, c = Conn(broker), Conn(broker), Conn(broker)
    _ok(a.producer(topic, 1, api.Exclusive), epoch=0)
    _ok(b.producer(topic, 2, api.WaitForExclusive), ready=False)
    _ok(c.producer(topic, 3, api.WaitForExclusive), ready=False)
    b.raw.close()
    c.close_producer(3)
    time.sleep(0.2)  # the broker notices b's close
    a.close_producer(1)
    _ok(a.producer(topic, 4, api.Shared), epoch=0)  # no waiter took the topic
    assert c.nothing()


def test_a_refused_producer_takes_no_name(broker: BrokerProcess) -> None:
    topic = _topic("raw-names")
    a, b = Conn(broker), Conn(broker)
    _ok(a.producer(topic, 1, api.Exclusive), epoch=0)
    named = {"producer_name": "n", "user_provided_producer_name": True}
    _error(b.producer(topic, 2, api.Shared, **named), api.ProducerBusy)
    a.close_producer(1)
    _ok(b.producer(topic, 2, api.Shared, **named), epoch=0)  # neither the id nor the name was kept


def test_fencing_closes_holders_and_refuses_waiters(broker: BrokerProcess) -> None:
    topic = _topic("raw-fencing")
    a, b, c = Conn(broker), Conn(broker), Conn(broker)
    _ok(a.producer(topic, 1, api.Shared))
    _ok(a.producer(topic, 2, api.Shared))
    _ok(b.producer(topic, 3, api.WaitForExclusive), ready=False)
    _ok(c.producer(topic, 4, api.ExclusiveWithFencing), epoch=0)
    closed = {a.next(_T.CLOSE_PRODUCER).close_producer.producer_id for _ in range(2)}
    assert closed == {1, 2}
    _error(b.answer(3), api.ProducerFenced)
    _error(a.producer(topic, 1, api.Shared), api.ProducerBusy)  # the fenced come back to a held topic
    c.close_producer(4)
    _ok(a.producer(topic, 1, api.Shared), epoch=0)
    a.close_producer(1)
    _ok(c.producer(topic, 5, api.Exclusive), epoch=1)
    _error(b.producer(topic, 6, api.ExclusiveWithFencing, topic_epoch=0), api.ProducerFenced)
    assert c.nothing()  # a fencer with a stale epoch fences nobody


def test_waiters_count_against_the_producer_limit(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "--no-sync", "--max-producers-per-topic", "2") as broker:
        topic = _topic("raw-limit")
        a, b = Conn(broker), Conn(broker)
        _ok(a.producer(topic, 1, api.Exclusive), epoch=0)
        _ok(b.producer(topic, 2, api.WaitForExclusive), ready=False)
        _error(b.producer(topic, 3, api.WaitForExclusive), api.ProducerBusy)  # a queue has a bound
        b.close_producer(2)
        _ok(b.producer(topic, 3, api.WaitForExclusive), ready=False)


def test_sends_already_on_their_way_from_a_fenced_producer_are_ignored(broker: BrokerProcess) -> None:
    """As Pulsar ignores a recently closed producer's SENDs: the connection (and its other work) stays."""
    from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored

    topic = _topic("raw-late-sends")
    a, b = Conn(broker), Conn(broker)
    _ok(a.producer(topic, 1, api.Exclusive), epoch=0)
    _ok(b.producer(topic, 2, api.ExclusiveWithFencing), epoch=1)
    assert a.next(_T.CLOSE_PRODUCER).close_producer.producer_id == 1
    meta = api.MessageMetadata(producer_name="late", sequence_id=0, publish_time=1)
    send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0))
    a.raw.sock.sendall(encode_payload_command(send, pack_stored(meta, b"late")))
    a.raw.send(_T(type=_T.PING, ping=api.CommandPing()))
    assert a.next(_T.PONG).type == _T.PONG  # still connected
    assert a.nothing()  # no receipt, no error
