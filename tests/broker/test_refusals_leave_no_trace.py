"""Every SUBSCRIBE the broker refuses leaves the subscription and consumer tables as they were.

An in-process broker, so the tables themselves are compared: the topic's subscriptions and each
one's consumers, the connection's consumer ids, and the subscription directories on disk. Each
refusal gets the error code the official client acts on, and the connection stays open.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cursorkit.broker.server.config import BrokerConfig
from cursorkit.proto import pulsar_api_pb2 as api
from in_process_broker import InProcess
from raw_client import Raw

_T = api.BaseCommand
_S = api.CommandSubscribe
TOPIC = "persistent://public/default/trace"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcess]:
    b = InProcess(BrokerConfig(data=tmp_path, port=0, sync=False, max_consumers_per_subscription=2))
    yield b
    b.stop()


def _subscribe(raw: Raw, consumer_id: int, name: str, kind: int = _S.Shared, **fields: Any) -> _T:
    q = _S(
        topic=TOPIC,
        subscription=name,
        subType=kind,
        consumer_id=consumer_id,
        request_id=consumer_id,
        **fields,
    )
    raw.send(_T(type=_T.SUBSCRIBE, subscribe=q))
    return raw.receive()


def _sticky(*ranges: tuple[int, int]) -> api.KeySharedMeta:
    return api.KeySharedMeta(
        keySharedMode=api.STICKY, hashRanges=[api.IntRange(start=a, end=b) for a, b in ranges]
    )


_REFUSED: list[tuple[str, int, dict[str, Any], int]] = [
    ("", _S.Shared, {}, api.ProducerBusy),
    ("pulsar.dedup", _S.Shared, {}, api.ProducerBusy),
    ("pulsar.repl.x", _S.Shared, {}, api.ProducerBusy),
    ("held", _S.Exclusive, {}, api.ConsumerBusy),
    ("held", _S.Shared, {"durable": False}, api.NotAllowedError),
    ("reader-x", _S.Exclusive, {}, api.NotAllowedError),
    ("full", _S.Shared, {}, api.ConsumerBusy),
    ("ex", _S.Exclusive, {}, api.ConsumerBusy),
    (
        "new-ks",
        _S.Key_Shared,
        {"keySharedMeta": api.KeySharedMeta(keySharedMode=api.STICKY)},
        api.ConsumerAssignError,
    ),
    ("new-ks", _S.Key_Shared, {"keySharedMeta": _sticky((10, 5))}, api.ConsumerAssignError),
    ("new-ks", _S.Key_Shared, {"keySharedMeta": _sticky((0, 10), (5, 20))}, api.ConsumerAssignError),
    ("ks", _S.Key_Shared, {"keySharedMeta": _sticky((50, 200))}, api.ConsumerAssignError),
    ("ks", _S.Key_Shared, {}, api.ConsumerBusy),
    (
        "ks",
        _S.Key_Shared,
        {"keySharedMeta": _sticky((500, 600), (700, 800), (80, 90))},
        api.ConsumerAssignError,
    ),
]


def test_each_refused_subscribe_leaves_the_tables_as_they_were(broker: InProcess) -> None:
    raw = Raw(f"pulsar://127.0.0.1:{broker.broker.port}")
    assert raw.connect().type == _T.CONNECTED
    setup = [
        ("held", _S.Shared, {}),
        (
            "reader-x",
            _S.Exclusive,
            {
                "durable": False,
                "start_message_id": api.MessageIdData(ledgerId=(1 << 64) - 1, entryId=(1 << 64) - 1),
            },
        ),
        ("full", _S.Shared, {}),
        ("full", _S.Shared, {}),
        ("ex", _S.Exclusive, {}),
        ("ks", _S.Key_Shared, {"keySharedMeta": _sticky((0, 100))}),
    ]
    for i, (name, kind, fields) in enumerate(setup, start=1):
        assert _subscribe(raw, i, name, kind, **fields).type == _T.SUCCESS, name
    before = broker.tables()
    assert set(before["subscriptions"][TOPIC]) == {"held", "reader-x", "full", "ex", "ks"}
    for j, (name, kind, fields, error) in enumerate(_REFUSED, start=100):
        answer = _subscribe(raw, j, name, kind, **fields)
        assert answer.type == _T.ERROR and answer.error.error == error, (name, fields, answer)
        assert broker.tables() == before, (name, fields)
    # The consumer id in use is refused too, and the connection still serves.
    answer = _subscribe(raw, 1, "other")
    assert answer.type == _T.ERROR and answer.error.error == api.ConsumerBusy
    assert broker.tables() == before
    assert _subscribe(raw, 200, "ks", _S.Key_Shared, keySharedMeta=_sticky((101, 65535))).type == _T.SUCCESS
    raw.close()


def test_a_reader_subscription_goes_with_its_last_consumer(broker: InProcess) -> None:
    raw = Raw(f"pulsar://127.0.0.1:{broker.broker.port}")
    assert raw.connect().type == _T.CONNECTED
    assert _subscribe(raw, 1, "reader-y", _S.Exclusive, durable=False).type == _T.SUCCESS
    assert "reader-y" in broker.tables()["subscriptions"][TOPIC]
    raw.send(_T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=1, request_id=9)))
    assert raw.receive().type == _T.SUCCESS
    tables = broker.tables()
    assert "reader-y" not in tables["subscriptions"][TOPIC]
    assert not any("reader" in p for p in tables["disk"])
    raw.close()
