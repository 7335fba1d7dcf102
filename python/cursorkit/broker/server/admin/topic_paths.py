"""The tenant, namespace, topic and subscription a REST path names, read as data (never as paths)."""

from __future__ import annotations

from urllib.parse import unquote_plus

from aiohttp import web

from cursorkit.broker.server.admin.errors import RestError
from cursorkit.broker.server.names import TopicName, namespace_name, subscription_name, topic_name
from cursorkit.errors import CursorkitError

__all__ = ["PERSISTENT", "namespace_of", "subscription_of", "topic_of"]

PERSISTENT = "/admin/v2/persistent/{tenant}/{namespace}"
"""Where every persistent-topic path starts; ``{topic}`` follows (URL-decoded by aiohttp)."""


def namespace_of(request: web.Request) -> tuple[str, str]:
    """``(tenant, namespace)`` of the path; 412 for a name Pulsar refuses."""
    m = request.match_info
    try:
        return namespace_name(f"{m['tenant']}/{m['namespace']}")
    except CursorkitError as e:
        raise RestError(412, f"Invalid namespace name: {e}") from e


_TOPIC_SEGMENT = 6
"""Where ``{topic}`` is among the raw path's ``/``-separated parts (``""``, admin, v2, persistent, ...)."""
_SUBSCRIPTION_SEGMENT = 8
"""Where ``{subscription}`` is (after ``{topic}/subscription/``)."""


def _decoded(request: web.Request, key: str, index: int) -> str:
    """A path part as Pulsar decodes it: ``URLDecoder``, so ``+`` is a space and ``%2B`` a plus.

    aiohttp's own decoding keeps ``+``: the part is decoded again from the raw path.
    """
    parts = request.raw_path.split("?", 1)[0].split("/")
    if len(parts) > index:
        return unquote_plus(parts[index])
    return request.match_info[key]


def topic_of(request: web.Request) -> TopicName:
    """The persistent topic the path names; 412 for a name Pulsar refuses."""
    tenant, namespace = namespace_of(request)
    try:
        return topic_name(f"persistent://{tenant}/{namespace}/{_decoded(request, 'topic', _TOPIC_SEGMENT)}")
    except CursorkitError as e:
        raise RestError(412, f"Invalid topic name: {e}") from e


def subscription_of(request: web.Request) -> str:
    """The subscription the path names; 400 for one Pulsar refuses."""
    try:
        return subscription_name(_decoded(request, "subscription", _SUBSCRIPTION_SEGMENT))
    except CursorkitError as e:
        raise RestError(400, f"Invalid subscription name: {e}") from e
