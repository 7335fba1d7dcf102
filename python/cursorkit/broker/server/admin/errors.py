"""Admin errors answered as Pulsar's ``RestException``: a status and ``{"reason": ...}`` as JSON."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = ["RestError", "json_errors"]

log = logging.getLogger("cursorkit.broker.admin")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RestError(Exception):
    """A refusal with Pulsar's HTTP status (404 unknown, 409 exists, 412 precondition, 400 bad input...)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def error_response(status: int, reason: str) -> web.Response:
    """The JSON body pulsar-admin shows as the error's text."""
    return web.json_response({"reason": reason}, status=status)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as Pulsar's JSON error.

    A refusal keeps its status, aiohttp's own (unknown path, body too large) theirs; a fault of the
    broker's is a 500, logged, and the loop and the other requests go on.
    """
    try:
        return await handler(request)
    except RestError as e:
        return error_response(e.status, e.reason)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error_response(e.status, e.reason or e.text or "")
    except Exception:
        log.exception("admin %s %s failed", request.method, request.path)
        return error_response(500, "internal error of the broker (logged)")
