"""Misuse beside a live consumer on the same connection: refused or ignored as Pulsar does, never a close.

Only framing errors close a connection. Each bad command here arrives on a connection that also
holds a producer and a consumer; afterwards the consumer still receives on it without reconnecting.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.protocol.frames import encode_payload_command, pack_stored
from cursorkit.proto import pulsar_api_pb2 as api
from raw_client import Raw

_T = api.BaseCommand
_MAX = (1 << 64) - 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("misuse") / "data", "--no-sync") as b:
        yield b


def _ack(consumer_id: int, *ids: tuple[int, int], cumulative: bool = False, ack_set: bool = False) -> _T:
    kind = api.CommandAck.Cumulative if cumulative else api.CommandAck.Individual
    ack = api.CommandAck(consumer_id=consumer_id, ack_type=kind)
    for ledger, entry in ids:
        mid = ack.message_id.add(ledgerId=ledger, entryId=entry)
        if ack_set:
            mid.ack_set.extend([0, 5])
    return _T(type=_T.ACK, ack=ack)


def _send(sequence_id: int, body: bytes) -> bytes:
    meta = api.MessageMetadata(producer_name="raw", sequence_id=sequence_id, publish_time=1)
    cmd = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id))
    return encode_payload_command(cmd, pack_stored(meta, body))


class Live:
    """One raw connection holding producer 1 and Shared consumer 1 on ``topic``; frames in arrival order."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        self.raw = Raw(broker.url)
        assert self.raw.connect().type == _T.CONNECTED
        self.pending: list[_T] = []
        self.request(
            _T(type=_T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1)),
            _T.PRODUCER_SUCCESS,
        )
        sub = api.CommandSubscribe(
            topic=topic, subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=2
        )
        self.request(_T(type=_T.SUBSCRIBE, subscribe=sub), _T.SUCCESS)
        self.raw.send(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=1000)))

    def next(self, kind: int) -> _T:
        """The next frame of type ``kind`` (others kept for later)."""
        for i, cmd in enumerate(self.pending):
            if cmd.type == kind:
                return self.pending.pop(i)
        while True:
            data = self.raw.sock.recv(65536)
            if not data:
                raise ConnectionError(f"closed while waiting for {_T.Type.Name(kind)}")
            for frame in self.raw.decoder.feed(data):
                self.pending.append(frame.command)
            for i, cmd in enumerate(self.pending):
                if cmd.type == kind:
                    return self.pending.pop(i)

    def request(self, cmd: _T, kind: int) -> _T:
        self.raw.send(cmd)
        return self.next(kind)

    def publish(self, sequence_id: int, body: bytes) -> api.MessageIdData:
        self.raw.sock.sendall(_send(sequence_id, body))
        return self.next(_T.SEND_RECEIPT).send_receipt.message_id


def _misuse(live: Live, sent: api.MessageIdData) -> None:
    """Every kind of bad command that has no place closing the connection, with their expected answers."""
    ledger = sent.ledgerId
    for cmd in (
        _ack(1, (ledger, 999_999)),  # an entry the broker never wrote
        _ack(1, (_MAX, _MAX)),  # the sentinels of MessageId.earliest/latest
        _ack(1, (1 << 63, 0), (ledger, 1 << 40)),
        _ack(1, (ledger, 999_999), ack_set=True),
        _ack(1, (ledger, sent.entryId), cumulative=True),  # cumulative on Shared: NotAllowed, ignored
        _ack(77, (ledger, 0)),  # a consumer never subscribed
        _T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=77, messagePermits=10)),
        _T(
            type=_T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=api.CommandRedeliverUnacknowledgedMessages(
                consumer_id=1, message_ids=[api.MessageIdData(ledgerId=_MAX, entryId=_MAX)]
            ),
        ),
        _T(
            type=_T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=api.CommandRedeliverUnacknowledgedMessages(consumer_id=77),
        ),
        _T(type=_T.PONG, pong=api.CommandPong()),
    ):
        live.raw.send(cmd)
    answers = {
        11: _T(type=_T.SEEK, seek=api.CommandSeek(consumer_id=77, request_id=11, message_publish_time=1)),
        12: _T(
            type=_T.GET_LAST_MESSAGE_ID,
            getLastMessageId=api.CommandGetLastMessageId(consumer_id=77, request_id=12),
        ),
        13: _T(type=_T.UNSUBSCRIBE, unsubscribe=api.CommandUnsubscribe(consumer_id=77, request_id=13)),
        14: _T(
            type=_T.GET_TOPICS_OF_NAMESPACE,
            getTopicsOfNamespace=api.CommandGetTopicsOfNamespace(request_id=14, namespace="no namespace"),
        ),
        15: _T(type=_T.PRODUCER, producer=api.CommandProducer(topic="x", producer_id=1, request_id=15)),
        16: _T(
            type=_T.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic="non-persistent://a/../b", subscription="s", subType=0, consumer_id=5, request_id=16
            ),
        ),
    }
    for cmd in answers.values():
        live.raw.send(cmd)
    for request_id in answers:
        error = live.next(_T.ERROR).error
        assert error.request_id == request_id, error
    ok = live.request(
        _T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=77, request_id=17)),
        _T.SUCCESS,
    )
    assert ok.success.request_id == 17


def test_misuse_beside_a_live_consumer_keeps_the_connection(broker: BrokerProcess) -> None:
    live = Live(broker, "misuse")
    first = live.publish(0, b"m0")
    assert live.next(_T.MESSAGE).message.message_id.entryId == first.entryId
    _misuse(live, first)
    # The same connection, its producer and its consumer serve on: no reconnect, nothing lost.
    later = live.publish(1, b"m1")
    got = live.next(_T.MESSAGE).message.message_id
    assert (got.ledgerId, got.entryId) == (later.ledgerId, later.entryId)
    live.raw.send(_ack(1, (first.ledgerId, first.entryId), (later.ledgerId, later.entryId)))
    pong = live.request(_T(type=_T.PING, ping=api.CommandPing()), _T.PONG)
    assert pong.type == _T.PONG
    live.raw.close()


def test_a_command_over_the_size_limit_is_refused_on_a_live_connection(broker: BrokerProcess) -> None:
    live = Live(broker, "misuse-big")
    first = live.publish(0, b"m0")
    assert live.next(_T.MESSAGE).message.message_id.entryId == first.entryId
    props = [api.KeyValue(key=f"k{i}", value="v") for i in range(100_000)]  # ~1.4 MB, walked per element
    big = api.CommandSubscribe(
        topic="misuse-big", subscription="t", subType=0, consumer_id=2, request_id=31, metadata=props
    )
    error = live.request(_T(type=_T.SUBSCRIBE, subscribe=big), _T.ERROR).error
    assert error.request_id == 31 and error.error == api.NotAllowedError
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual, request_id=32)
    for i in range(60_000):
        ack.message_id.add(ledgerId=first.ledgerId, entryId=i)
    answer = live.request(_T(type=_T.ACK, ack=ack), _T.ACK_RESPONSE).ackResponse
    assert answer.request_id == 32 and answer.error == api.NotAllowedError
    later = live.publish(1, b"m1")  # the connection, its producer and its consumer serve on
    assert live.next(_T.MESSAGE).message.message_id.entryId == later.entryId
    live.raw.close()
