"""The admin port's connections: how many are served, how long a request head may take, quiet refusals.

aiohttp (3.14) bounds a head's size and closes idle kept-alive connections, but has no deadline on
reading a head: :class:`GuardedHandler` adds one, answers a malformed request with Pulsar's JSON
error (logged at debug level: a client's mistake is no broker fault) and drops a response its
client does not take. :class:`Gate` makes each connection's protocol and refuses those past the
limits before aiohttp sees them. It relies on aiohttp's ``RequestHandler`` internals
(``_request_count``, ``finish_response``, ``handle_error``): tests/broker/test_admin_hostile.py
shows when an aiohttp upgrade changes them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from cursorkit.broker.server.admin.errors import error_response
from cursorkit.broker.server.admin.http_limits import HttpLimits

if TYPE_CHECKING:
    from aiohttp.web_request import BaseRequest

    from cursorkit.broker.server.limits import Descriptors, Warnings

__all__ = ["Gate", "GuardedHandler"]

log = logging.getLogger("cursorkit.broker.admin")

INTERNAL = "internal error of the broker (logged)"


class GuardedHandler(web.RequestHandler):
    """aiohttp's HTTP/1.1 protocol with a head deadline, a send deadline and quiet JSON 400s."""

    def __init__(
        self, gate: Gate, manager: web.Server, limits: HttpLimits, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(
            manager,
            loop=loop,
            keepalive_timeout=limits.keep_alive_s,
            access_log=None,  # type: ignore[arg-type]  # None turns it off (aiohttp's types say Logger)
            logger=log,
            max_line_size=limits.max_line_size,
            max_field_size=limits.max_field_size,
            max_headers=limits.max_headers,
            lingering_time=limits.linger_s,
        )
        self._gate = gate
        self._limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._answered = 0
        """Requests answered: equal to the heads parsed while the connection waits for the next."""
        self._released = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Starts the head deadline of the first request."""
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Parses; a whole head stops the deadline, the first byte of a later head starts it."""
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed:
            self._disarm()
        elif data and self._deadline is None and self._request_count == self._answered:
            self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        """Frees the connection's place at the gate; ends its task unless a request is in hand."""
        self._disarm()
        task = self._task_handler
        answered = self._request_count == self._answered
        super().connection_lost(exc)
        if answered and task is not None:  # idle, or discarding an unread body: nothing to answer
            task.cancel()
        if not self._released:
            self._released = True
            self._gate.released()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self._loop.call_later(self._limits.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        if self._request_count == self._answered and self.transport is not None:
            log.debug("admin: closing a connection whose request head is late (%s)", self.peername)
            self.force_close()

    async def finish_response(
        self, request: BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        """Sends the response within ``send_timeout_s``, or closes the connection."""
        try:
            async with asyncio.timeout(self._limits.send_timeout_s):
                return await super().finish_response(request, resp, start_time)
        except TimeoutError:
            log.debug("admin: dropping a connection whose client does not take its response")
            transport = self.transport
            self.force_close()
            if transport is not None:  # close() would wait for the unsent bytes: drop them
                transport.abort()
            return resp, True
        finally:
            self._answered += 1

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A malformed request (400), logged at debug level; a fault of the broker's (500), logged."""
        if status >= 500:
            log.error("admin %s %s failed", request.method, request.path, exc_info=exc)
            reason = INTERNAL
        else:
            detail = message or (str(exc) if exc is not None else "")
            reason = f"Bad request: {' '.join(detail.split())[:200]}"
            log.debug("admin: a malformed request from %s: %s", request.remote, reason)
        if request.writer.output_size > 0:  # part of a response went: no other one can follow
            raise ConnectionError("response already started")
        resp = error_response(status, reason)
        resp.force_close()
        return resp


class _Refused(asyncio.Protocol):
    """A connection past the limits: a 503 ``{"reason"}`` and closed, nothing read."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        body = json.dumps({"reason": self._reason}).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(head.encode() + body)
        transport.close()


class Gate:
    """The admin port's protocol factory: counts connections, refuses those past the limits."""

    def __init__(
        self,
        manager: web.Server,
        limits: HttpLimits,
        descriptors: Descriptors | None,
        warnings: Warnings | None,
    ) -> None:
        self._manager = manager
        self._limits = limits
        self._descriptors = descriptors
        self._warnings = warnings
        self._loop = asyncio.get_running_loop()
        self.open = 0
        """Connections served now (from their protocol's making to their close)."""

    def __call__(self) -> asyncio.Protocol:
        """The protocol of a new connection: served, or refused with a 503."""
        refused = self._refusal()
        if refused is not None:
            if self._warnings is not None:
                self._warnings.warn("admin connections", "refusing an admin connection: %s", refused)
            return _Refused(refused)
        self.open += 1
        return GuardedHandler(self, self._manager, self._limits, self._loop)

    def _refusal(self) -> str | None:
        limit = self._limits.max_connections
        if self.open >= limit:
            return f"Reached the maximum number of admin connections ({limit})"
        descriptors = self._descriptors
        if descriptors is not None and descriptors.short(self._limits.descriptor_share):
            return f"Reached the maximum number of admin connections (file descriptors: {descriptors.limit})"
        return None

    def released(self) -> None:
        """A served connection closed."""
        self.open -= 1
