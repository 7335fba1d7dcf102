"""The admin HTTP server: an aiohttp application on the broker's event loop, no thread per request.

What one HTTP client may cost is bounded by :class:`~.http_limits.HttpLimits` (its module's table:
connections, descriptors, head size and deadline, keep-alive, body size and deadline, sending):
a client past a limit gets Pulsar's ``{"reason"}`` JSON with 400, 408, 413 or 503 and, where its
connection can no longer be trusted, the connection closes. :class:`~.connections.Gate` counts
connections, :class:`~.connections.GuardedHandler` adds the deadlines aiohttp lacks, and
:mod:`~.bodies` reads bodies. Nothing here waits on the binary port's connections, nor they on it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from cursorkit.broker.server.admin.app_keys import BROKER
from cursorkit.broker.server.admin.bodies import HTTP_LIMITS, bounded_bodies
from cursorkit.broker.server.admin.connections import Gate
from cursorkit.broker.server.admin.errors import json_errors
from cursorkit.broker.server.admin.http_limits import (
    KEEP_ALIVE_S,
    MAX_BODY,
    MAX_CONNECTIONS,
    HttpLimits,
)
from cursorkit.broker.server.admin.routes import routes

if TYPE_CHECKING:
    from cursorkit.broker.server.broker import Broker

__all__ = ["BROKER", "KEEP_ALIVE_S", "MAX_BODY", "MAX_CONNECTIONS", "AdminServer", "HttpLimits"]


SHUTDOWN_S = 5.0
"""How long stopping waits for the requests in progress before closing their connections."""


class AdminServer:
    """Pulsar's admin REST paths and ``/metrics`` for one broker, on its event loop."""

    def __init__(self, broker: Broker, limits: HttpLimits | None = None) -> None:
        self.broker = broker
        self.limits = limits if limits is not None else HttpLimits()
        self.app = web.Application(
            client_max_size=self.limits.max_body, middlewares=[json_errors, bounded_bodies]
        )
        """The application (routes may be added until :meth:`start`)."""
        self.app[BROKER] = broker
        self.app[HTTP_LIMITS] = self.limits
        self.app.add_routes(routes())
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=SHUTDOWN_S)
        self._server: asyncio.Server | None = None
        self.gate: Gate | None = None
        """The connections served (set by :meth:`start`)."""

    async def start(self, host: str, port: int) -> None:
        """Listens on ``host``:``port`` (0: a free port)."""
        await self._runner.setup()
        manager = self._runner.server
        assert manager is not None
        self.gate = Gate(manager, self.limits, self.broker.descriptors, self.broker.warnings)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.gate, host, port, backlog=self.limits.backlog)

    @property
    def port(self) -> int:
        """The port listened on."""
        sockets = self._server.sockets if self._server is not None else ()
        return int(sockets[0].getsockname()[1]) if sockets else 0

    @property
    def url(self) -> str:
        """``http://host:port`` of the admin API."""
        return f"http://{self.broker.config.host}:{self.port}"

    async def stop(self) -> None:
        """Stops listening and closes the connections."""
        if self._server is not None:
            self._server.close()
        await asyncio.shield(self._runner.cleanup())
