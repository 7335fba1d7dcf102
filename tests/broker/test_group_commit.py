"""The topic's group commit: every SEND waiting is told where it was stored, or why it was not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cursorkit import Position
from cursorkit.broker.protocol.frames import pack_stored
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.topic import Topic
from cursorkit.proto import pulsar_api_pb2 as api


def _stored(i: int) -> bytes:
    return pack_stored(api.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1), b"x")


def test_sends_are_told_in_order_and_a_failed_append_fails_only_its_group(tmp_path: Path) -> None:
    async def run() -> list[Position | Exception]:
        topic = Topic(topic_name("t"), tmp_path, BrokerConfig(data=tmp_path, sync=False))
        told: list[Position | Exception] = []
        real_append = topic.log.append

        def failing(rows: object) -> object:
            raise OSError("disk full")

        topic.log.append = failing  # type: ignore[method-assign,assignment]  # a disk fault, once
        for i in range(3):
            topic.publish(_stored(i), 1, 1, told.append)
        await asyncio.sleep(0.05)
        topic.log.append = real_append  # type: ignore[method-assign]
        for i in range(3, 6):
            topic.publish(_stored(i), 1, 1, told.append)
        await asyncio.sleep(0.05)
        topic.close()
        return told

    told = asyncio.run(run())
    assert [type(t) for t in told[:3]] == [OSError] * 3
    positions = told[3:]
    assert all(isinstance(p, Position) for p in positions)
    assert positions == sorted(positions, key=lambda p: (p.ledger_id, p.entry_id))  # type: ignore[union-attr]
