"""What an admin handler finds in its application: the broker it serves.

A module of its own, so that route modules reach the broker without importing ``http_server``
(which imports the route table: that would be an import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from cursorkit.broker.server.broker import Broker

__all__ = ["BROKER", "broker_of"]

BROKER: web.AppKey[Broker] = web.AppKey("broker")
"""The broker an admin handler serves (``request.app[BROKER]``)."""


def broker_of(request: web.Request) -> Broker:
    """The :class:`~cursorkit.broker.server.broker.Broker` the request's application serves."""
    return request.app[BROKER]
