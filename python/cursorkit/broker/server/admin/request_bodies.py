"""Request bodies and query flags of the topic admin paths, read as Pulsar's JAX-RS resources read them.

Bodies are at most ``MAX_BODY`` bytes (aiohttp refuses more with 413), so parsing one on the loop
is bounded. JSON that does not parse, or holds the wrong types, is a 400, as Jackson's is in Pulsar.
"""

from __future__ import annotations

from aiohttp import web

from cursorkit.broker.server.admin.bodies import read_json
from cursorkit.broker.server.admin.errors import RestError

__all__ = ["flag", "partitions_body", "properties_body"]

_JAVA_INT_MAX = 2**31 - 1


def flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter, as JAX-RS reads one: ``true`` in any case is true, anything else false."""
    return request.query.get(name, "false").lower() == "true"


def _java_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RestError(400, f"{what} must be a JSON integer, got {type(value).__name__}")
    if not -_JAVA_INT_MAX - 1 <= value <= _JAVA_INT_MAX:
        raise RestError(400, f"{what} is out of the range of a 32-bit int")
    return value


def _string_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RestError(400, f"{what} must be a JSON object of strings")
    return value


async def partitions_body(request: web.Request) -> int:
    """The partition count a body gives: a bare JSON int (``3``), or ``{"partitions": 3, "properties": {}}``.

    An empty body is 0 (JAX-RS gives a primitive int parameter its default); the properties are
    checked and not kept.
    """
    body = await read_json(request)
    if body is None:
        return 0
    if isinstance(body, dict):
        _string_map(body.get("properties"), "properties")
        return _java_int(body.get("partitions", 0), "partitions")
    return _java_int(body, "the number of partitions")


async def properties_body(request: web.Request) -> dict[str, str]:
    """The optional JSON map of properties a non-partitioned topic is created with (checked, not kept)."""
    return _string_map(await read_json(request), "the topic's properties")
