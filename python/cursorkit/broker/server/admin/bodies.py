"""Request bodies read with a bound on their size and on how long they take to arrive.

Handlers read a JSON body with :func:`read_json`, never with ``request.json()`` (unbounded in
time); :func:`bounded_bodies` refuses a declared length over the limit before any handler runs.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from cursorkit.broker.server.admin.errors import Handler, RestError
from cursorkit.broker.server.admin.http_limits import BODY_TIMEOUT_S, HttpLimits

__all__ = ["HTTP_LIMITS", "bounded_bodies", "read_json"]

HTTP_LIMITS: web.AppKey[HttpLimits] = web.AppKey("http_limits", HttpLimits)
"""The limits of the server an application runs in (``request.app[HTTP_LIMITS]``)."""


def _too_large(size: int | None, limit: int) -> RestError:
    of = f" of {size} bytes" if size is not None else ""
    return RestError(413, f"Request body{of} over the limit of {limit} bytes")


@web.middleware
async def bounded_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    """413 for a ``Content-Length`` over the server's body limit, whatever the path, body unread."""
    declared = request.content_length
    if declared is not None and declared > request.client_max_size:
        raise _too_large(declared, request.client_max_size)
    return await handler(request)


async def read_json(request: web.Request, max_bytes: int | None = None) -> object:
    """The request's JSON body, read once; ``None`` for an empty body (or JSON ``null``).

    At most ``max_bytes`` (the server's body limit by default; 413 past it, a chunked body as soon
    as it grows past it), within the server's ``body_timeout_s`` (408); 400 for a body that is not
    JSON (or nests too deep) or ends early. The caller still checks the value's type and fields.
    """
    limit = request.client_max_size if max_bytes is None else max_bytes
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(declared, limit)
    limits = request.config_dict.get(HTTP_LIMITS)
    timeout = limits.body_timeout_s if limits is not None else BODY_TIMEOUT_S
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            while chunk := await request.content.readany():
                body += chunk
                if len(body) > limit:
                    raise _too_large(None, limit)
    except TimeoutError as e:
        raise RestError(408, f"Request body not received within {timeout:g} s") from e
    except (web.RequestPayloadError, ConnectionError) as e:
        raise RestError(400, f"Request body ended early or is malformed: {e}") from e
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise RestError(400, f"Malformed JSON body: {str(e)[:200]}") from e
