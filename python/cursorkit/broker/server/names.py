"""Names as Pulsar's client writes them, checked as Pulsar checks them: topics and subscriptions.

A short topic ``t`` is ``persistent://public/default/t``; partitions are ``<topic>-partition-<N>``.
Names are data: where one becomes a directory is :mod:`cursorkit.broker.server.paths`'s business.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cursorkit.broker.server.paths import segment_component
from cursorkit.errors import ProtocolError

__all__ = ["TopicName", "subscription_name", "topic_name"]

_PART = re.compile(r"(.*)-partition-(0|[1-9][0-9]{0,9})", re.DOTALL)
_NAMED_ENTITY = re.compile(r"[A-Za-z0-9_.=:-]+")
"""A tenant or namespace, as Pulsar's ``NamedEntity`` allows them (``[-=:.\\w]``, ASCII)."""
_MAX_LENGTH = 1024
_MAX_PARTITION = 2**31 - 1
_DEDUP_CURSOR = "pulsar.dedup"
_REPLICATOR_PREFIX = "pulsar.repl"
_JAVA_SPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NOT_JAVA_SPACE = frozenset("\xa0\u2007\u202f")


@dataclass(frozen=True, slots=True)
class TopicName:
    """A persistent topic: tenant, namespace and local name (with ``-partition-N`` when a partition)."""

    tenant: str
    namespace: str
    local: str

    @property
    def full(self) -> str:
        """``persistent://tenant/namespace/local``."""
        return f"persistent://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def partition(self) -> int | None:
        """The partition index when the name is ``<topic>-partition-<N>`` (N as Pulsar reads it)."""
        m = _partition(self.local)
        return int(m.group(2)) if m else None

    @property
    def base(self) -> TopicName:
        """The partitioned topic a partition belongs to (itself otherwise)."""
        m = _partition(self.local)
        return TopicName(self.tenant, self.namespace, m.group(1)) if m else self

    def partition_name(self, index: int) -> TopicName:
        """Partition ``index`` of this topic."""
        return TopicName(self.tenant, self.namespace, f"{self.local}-partition-{index}")

    @property
    def segments(self) -> tuple[str, str, str]:
        """Tenant, namespace and local name: one directory each."""
        return (self.tenant, self.namespace, self.local)

    @property
    def directory(self) -> str:
        """The topic's directory relative to the topics' (one component per segment, see ``paths``)."""
        return "/".join(segment_component(s) for s in self.segments)


def _partition(local: str) -> re.Match[str] | None:
    """``<base>-partition-<N>``, N without leading zeros and an int as Java's ``parseInt`` reads it."""
    m = _PART.fullmatch(local)
    return m if m is not None and int(m.group(2)) <= _MAX_PARTITION else None


def topic_name(text: object) -> TopicName:
    """Parses a topic as the client sends it; ``ProtocolError`` (InvalidTopicName) when it is not one.

    Tenant and namespace are Pulsar's named entities; the local name is anything but empty (as in
    Pulsar), for its directory is chosen by :mod:`~cursorkit.broker.server.paths`.
    """
    from cursorkit.proto import pulsar_api_pb2 as api

    def bad(why: str) -> ProtocolError:
        return ProtocolError(f"invalid topic name {text!r:.200}: {why}", server_error=api.InvalidTopicName)

    if not isinstance(text, str):
        raise bad("not UTF-8")
    if not text or len(text) > _MAX_LENGTH:
        raise bad("empty or too long")
    rest = text
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "persistent":
            raise bad("only persistent topics are served")
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if len(parts) != 3:
        raise bad("expected tenant/namespace/topic")
    tenant, namespace, local = parts
    for p in (tenant, namespace):
        if not _NAMED_ENTITY.fullmatch(p) or p in {".", ".."}:
            raise bad(f"{p!r} is not a plain name")
    if not local or local in {".", ".."}:
        raise bad("the local name is empty, '.' or '..'")
    return TopicName(tenant, namespace, local)


def _java_blank(text: str) -> bool:
    """Whether ``text`` is blank as Java's ``StringUtils.isBlank`` says (``Character.isWhitespace``)."""
    return all(
        c in _JAVA_SPACE or (unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in _NOT_JAVA_SPACE)
        for c in text
    )


def subscription_name(value: object) -> str:
    """A SUBSCRIBE's subscription name, refused as Pulsar refuses it.

    Blank, ``pulsar.dedup`` and ``pulsar.repl...`` (the broker's own cursors) are Pulsar's
    NamingException, which it answers with ``ProducerBusy``; so is a name that is not UTF-8.
    """
    from cursorkit.proto import pulsar_api_pb2 as api

    if not isinstance(value, str):
        raise ProtocolError("the subscription name is not UTF-8", server_error=api.ProducerBusy)
    if _java_blank(value):
        raise ProtocolError(f"empty subscription name {value[:200]!r}", server_error=api.ProducerBusy)
    if value == _DEDUP_CURSOR or value.startswith(_REPLICATOR_PREFIX):
        raise ProtocolError(f"reserved subscription name {value[:200]!r}", server_error=api.ProducerBusy)
    return value
