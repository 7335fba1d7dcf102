"""Admin routes: metrics (filled in by its issue's work)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["routes"]


def routes() -> list[web.RouteDef]:
    """This module's routes."""
    return []
