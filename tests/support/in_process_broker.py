"""A broker on its own event-loop thread in the test process, so a test can read its tables."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from cursorkit.broker.server.broker import Broker
from cursorkit.broker.server.config import BrokerConfig

if TYPE_CHECKING:
    from cursorkit.broker.server.admin.http_server import AdminServer, HttpLimits


class InProcess:
    """A broker on its own event loop thread; its tables are read on that loop.

    With ``admin`` (True, or the :class:`HttpLimits` to serve with), its admin HTTP server as well,
    on 127.0.0.1 and a free port (``.admin``, ``.admin_url``).
    """

    def __init__(self, config: BrokerConfig, admin: bool | HttpLimits = False) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.broker = Broker(config)
        self.call(self.broker.start())
        self.admin: AdminServer | None = None
        if admin is not False:
            self.admin = self.call(_serve_admin(self.broker, None if admin is True else admin))

    @property
    def admin_url(self) -> str:
        """``http://127.0.0.1:port`` of the admin server ("" without one)."""
        return f"http://127.0.0.1:{self.admin.port}" if self.admin is not None else ""

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
        if self.admin is not None:
            self.call(self.admin.stop())
        self.call(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


async def _serve_admin(broker: Broker, limits: HttpLimits | None) -> AdminServer:
    """The broker's admin server, made and started on its loop."""
    from cursorkit.broker.server.admin.http_server import AdminServer

    server = AdminServer(broker, limits)
    await server.start("127.0.0.1", 0)
    return server
