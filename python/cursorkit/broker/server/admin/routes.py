"""Every admin route, gathered from the modules that serve them (one module per concern)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["routes"]


def routes() -> list[web.RouteDef]:
    """The route table: topics, subscriptions, stats, metrics."""
    from cursorkit.broker.server.admin import metrics, stats, subscriptions, topics

    return [*topics.routes(), *subscriptions.routes(), *stats.routes(), *metrics.routes()]
