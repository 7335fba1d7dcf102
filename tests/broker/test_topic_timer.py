"""The topic's one dispatch timer: a subscription arming it later never pushes back another's earlier time."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.topic import Topic


def test_a_later_arming_keeps_the_earlier_time(tmp_path: Path) -> None:
    async def run() -> list[float]:
        topic = Topic(topic_name("timer"), tmp_path, BrokerConfig(data=tmp_path, sync=False))
        loop = asyncio.get_running_loop()
        try:
            now = loop.time()
            topic._schedule_dispatch(1.0)  # one subscription's next delivery
            topic._schedule_dispatch(30.0)  # another's, later: must not push the first back
            first = topic._timer.when() - now if topic._timer else -1.0
            topic._schedule_dispatch(0.2)  # sooner: takes over
            second = topic._timer.when() - now if topic._timer else -1.0
            return [first, second]
        finally:
            topic.stop_timers()
            topic.close()

    first, second = asyncio.run(run())
    assert 0.9 <= first <= 1.1
    assert 0.1 <= second <= 0.3
