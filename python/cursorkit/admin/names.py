"""What ``pulsar-admin`` accepts on its command line: topic and namespace names, message ids, durations.

Read as pulsar-admin reads them, so its commands work unchanged: a short topic ``x`` is
``persistent://public/default/x``, ``t/ns/x`` is ``persistent://t/ns/x``; a message id is
``LEDGER:ENTRY`` (or ``earliest`` / ``latest``); a duration is a whole number with an optional unit
(``s`` the default, ``m``, ``h``, ``d``, ``w``, ``y``), as Pulsar's ``RelativeTimeUtil`` reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from cursorkit.errors import InvalidArgument

__all__ = [
    "EARLIEST",
    "LATEST",
    "MessageId",
    "Topic",
    "namespace",
    "namespace_path",
    "parse_duration_s",
    "parse_message_id",
    "topic",
]

_DOMAINS = ("persistent", "non-persistent")
_DURATION = re.compile(r"(\d{1,18})([A-Za-z]?)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
_MAX_LONG = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic as the admin paths name it: domain, tenant, namespace and local name."""

    domain: str
    tenant: str
    namespace: str
    local: str

    @property
    def full(self) -> str:
        """``domain://tenant/namespace/local``."""
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    def path(self, *rest: str) -> str:
        """``/admin/v2/<domain>/<tenant>/<namespace>/<encoded local name>[/rest...]``."""
        parts = [self.domain, _segment(self.tenant), _segment(self.namespace), _segment(self.local), *rest]
        return "/admin/v2/" + "/".join(parts)


@dataclass(frozen=True, slots=True)
class MessageId:
    """A position as the admin body carries it (``ResetCursorData``): ledger and entry ids."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


EARLIEST = MessageId(-1, -1)
"""Pulsar's ``MessageId.earliest``."""
LATEST = MessageId(_MAX_LONG, _MAX_LONG)
"""Pulsar's ``MessageId.latest``."""


def _segment(text: str) -> str:
    """One path segment, percent-encoded (``/``, ``%``, spaces and every non-ASCII byte included)."""
    return quote(text, safe="")


def topic(name: str) -> Topic:
    """The topic ``name`` names, completed as pulsar-admin completes it; ``InvalidArgument`` otherwise."""
    if not name:
        raise InvalidArgument("a topic name is required")
    domain, sep, rest = name.partition("://")
    if not sep:
        parts = name.split("/")
        if len(parts) == 1:
            return Topic("persistent", "public", "default", name)
        if len(parts) == 3 and all(parts):
            return Topic("persistent", *parts)
        raise InvalidArgument(
            f"invalid short topic name {name!r}: use <tenant>/<namespace>/<topic> or <topic>"
        )
    if domain not in _DOMAINS:
        raise InvalidArgument(
            f"invalid topic domain {domain!r} in {name!r}: use persistent:// or non-persistent://"
        )
    parts = rest.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise InvalidArgument(f"invalid topic name {name!r}: use {domain}://<tenant>/<namespace>/<topic>")
    return Topic(domain, *parts)


def namespace(name: str) -> tuple[str, str]:
    """``(tenant, namespace)`` of ``TENANT/NAMESPACE``; ``InvalidArgument`` for any other form."""
    parts = name.split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidArgument(f"invalid namespace {name!r}: use <tenant>/<namespace>")
    return parts[0], parts[1]


def namespace_path(name: str, *rest: str, domain: str = "persistent") -> str:
    """``/admin/v2/<domain>/<tenant>/<namespace>[/rest...]``."""
    tenant, ns = namespace(name)
    return "/admin/v2/" + "/".join([domain, _segment(tenant), _segment(ns), *rest])


def parse_message_id(text: str) -> MessageId:
    """``earliest``, ``latest`` or ``LEDGER:ENTRY`` (integers, as pulsar-admin takes them)."""
    if text == "earliest":
        return EARLIEST
    if text == "latest":
        return LATEST
    ledger, sep, entry = text.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        return MessageId(int(ledger), int(entry))
    except ValueError:
        raise InvalidArgument(f"invalid message id {text!r}: use LEDGER:ENTRY, earliest or latest") from None


def parse_duration_s(text: str) -> int:
    """Seconds of a relative time: ``30`` or ``30s``, ``10m``, ``1h``, ``2d``, ``5w``, ``1y``."""
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        raise InvalidArgument(f"invalid time {text!r}: use a whole number with s, m, h, d, w or y (e.g. 10m)")
    unit = (m.group(2) or "s").lower()
    if unit not in _UNIT_S:
        raise InvalidArgument(f"invalid time unit {m.group(2)!r} in {text!r}: use s, m, h, d, w or y")
    return int(m.group(1)) * _UNIT_S[unit]
