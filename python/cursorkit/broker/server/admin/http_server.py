"""The admin HTTP server: an aiohttp application on the broker's event loop, no thread per request.

What one HTTP client may cost is bounded: a request body over :data:`MAX_BODY` is refused (413),
header lines and fields are limited by aiohttp's parser, idle keep-alive connections are closed
after :data:`KEEP_ALIVE_S`, and connections past :data:`MAX_CONNECTIONS` are refused at once.
None of it waits on the binary protocol's connections, nor they on it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from cursorkit.broker.server.admin.errors import json_errors
from cursorkit.broker.server.admin.routes import routes

if TYPE_CHECKING:
    from cursorkit.broker.server.broker import Broker

__all__ = ["BROKER", "KEEP_ALIVE_S", "MAX_BODY", "MAX_CONNECTIONS", "AdminServer"]

BROKER: web.AppKey[Broker] = web.AppKey("broker")
"""The broker an admin handler serves (``request.app[BROKER]``)."""

MAX_BODY = 64 * 1024
"""The largest request body read (Pulsar's admin bodies are a few hundred bytes)."""
KEEP_ALIVE_S = 15.0
"""An idle keep-alive connection is closed after this long."""
MAX_CONNECTIONS = 512
"""HTTP connections served at once; one past it is closed at once."""


class AdminServer:
    """Pulsar's admin REST paths and ``/metrics`` for one broker, on its event loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        app = web.Application(client_max_size=MAX_BODY, middlewares=[json_errors])
        app[BROKER] = broker
        app.add_routes(routes())
        self._runner = web.AppRunner(app, access_log=None, keepalive_timeout=KEEP_ALIVE_S)
        self._site: web.TCPSite | None = None
        self._open = 0

    async def start(self, host: str, port: int) -> None:
        """Listens on ``host``:``port`` (0: a free port)."""
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host, port, backlog=128)
        await self._site.start()

    @property
    def port(self) -> int:
        """The port listened on."""
        server: Any = self._site._server if self._site is not None else None  # noqa: SLF001
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else 0

    @property
    def url(self) -> str:
        """``http://host:port`` of the admin API."""
        return f"http://{self.broker.config.host}:{self.port}"

    async def stop(self) -> None:
        """Stops listening and closes the connections."""
        await asyncio.shield(self._runner.cleanup())
