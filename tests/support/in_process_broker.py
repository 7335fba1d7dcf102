"""A broker on its own event-loop thread in the test process, so a test can read its tables."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from cursorkit.broker.server.broker import Broker
from cursorkit.broker.server.config import BrokerConfig


class InProcess:
    """A broker on its own event loop thread; its tables are read on that loop."""

    def __init__(self, config: BrokerConfig) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.broker = Broker(config)
        self.call(self.broker.start())

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker.port}"

    def tables(self) -> dict[str, Any]:
        """Subscriptions per topic (type, durable, consumers), consumer ids per connection, the disk."""

        async def read() -> dict[str, Any]:
            subs = {
                str(name.full): {
                    s: (sub.type_name, sub.is_durable, sorted(c.consumer_id for c in sub.consumers))
                    for s, sub in topic.subscriptions.items()
                }
                for name, topic in self.broker.topics.items()
            }
            conns = sorted(sorted(conn.consumers) for conn in self.broker.connections)
            return {"subscriptions": subs, "connections": conns}

        tables: dict[str, Any] = self.call(read())
        tables["disk"] = sorted(
            str(p.relative_to(self.broker.root)) for p in self.broker.root.rglob("subscriptions/*")
        )
        return tables

    def stop(self) -> None:
        self.call(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
