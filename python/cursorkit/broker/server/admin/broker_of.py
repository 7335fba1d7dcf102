"""The broker an admin request serves, for route modules (which may not import ``http_server``).

``http_server`` imports the routes, so a route module importing its ``BROKER`` key closes an import
cycle: the broker is found among the application's values, by its type, instead (one value).
"""

from __future__ import annotations

from aiohttp import web

from cursorkit.broker.server.broker import Broker

__all__ = ["broker_of"]


def broker_of(request: web.Request) -> Broker:
    """The :class:`~cursorkit.broker.server.broker.Broker` of the request's application."""
    for value in request.app.values():
        if isinstance(value, Broker):
            return value
    raise web.HTTPInternalServerError(reason="the admin application has no broker")
