"""The topic's group commit: every SEND waiting is told where it was stored, or why it was not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cursorkit import Position
from cursorkit.broker.protocol.frames import pack_stored, read_stored
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.topic import Topic
from cursorkit.proto import pulsar_api_pb2 as api


def _stored(i: int) -> bytes:
    return pack_stored(api.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1), b"x")


def test_sends_are_told_in_order_and_a_failed_append_fails_only_its_group(tmp_path: Path) -> None:
    async def run() -> tuple[list[tuple[int, Position | Exception]], dict[Position, int], int]:
        topic = Topic(topic_name("t"), tmp_path, BrokerConfig(data=tmp_path, sync=False))
        told: list[tuple[int, Position | Exception]] = []
        real_append = topic.log.append

        def failing(rows: object) -> object:
            raise OSError("disk full")

        def send(i: int) -> None:
            topic.publish(_stored(i), 1, 1, lambda result: told.append((i, result)))

        topic.log.append = failing  # type: ignore[method-assign,assignment]  # a disk fault, once
        for i in range(3):
            send(i)
        await asyncio.sleep(0.05)
        topic.log.append = real_append  # type: ignore[method-assign]
        for i in range(3, 6):
            send(i)
        await asyncio.sleep(0.05)
        stored = {
            p: read_stored(topic.log.read(p).data)[0].sequence_id for _, p in told if isinstance(p, Position)
        }
        entries = topic.log.entries
        topic.close()
        return told, stored, entries

    told, stored, entries = asyncio.run(run())
    assert [i for i, _ in told] == list(range(6)), "a send was never told, or told out of order"
    assert [type(result) for _, result in told[:3]] == [OSError] * 3
    positions = [result for _, result in told[3:] if isinstance(result, Position)]
    assert len(positions) == 3, f"a send after the failed group failed: {told[3:]}"
    assert [stored[p] for p in positions] == [3, 4, 5], "a send was told another's position"
    order = [(p.ledger_id, p.entry_id) for p in positions]
    assert order == sorted(order), f"stored out of order: {order}"
    assert entries == 3, "the failed group left entries in the log"
