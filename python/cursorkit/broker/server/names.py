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

__all__ = ["TopicName", "namespace_name", "subscription_name", "topic_name"]

_PART = re.compile(r"(.*)-partition-(0|[1-9][0-9]{0,9})", re.DOTALL)
_NAMED_ENTITY = re.compile(r"[A-Za-z0-9_.=:-]+")
"""A tenant or namespace, as Pulsar's ``NamedEntity`` allows them (``[-=:.\\w]``, ASCII)."""
_MAX_LENGTH = 1024
"""Longer full topic names are not served: NotAllowedError (Pulsar sets no limit, so not InvalidTopicName)."""
_DOMAINS = frozenset({"persistent", "non-persistent"})
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
    def namespace_key(self) -> tuple[str, str]:
        """Tenant and namespace: the namespace the topic is listed in."""
        return (self.tenant, self.namespace)

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
    """Parses a topic as the client sends it, as Pulsar's ``TopicName`` parses it.

    ``ProtocolError`` with InvalidTopicName for a name Pulsar refuses; with NotAllowedError (final:
    the client does not retry it) for a name Pulsar accepts and this broker does not serve: a
    non-persistent topic, a legacy name with a cluster (``tenant/cluster/namespace/topic``), a name
    over 1024 characters. The local name may hold any character (``@``, ``+``, ``é``...): its
    directory is chosen by :mod:`~cursorkit.broker.server.paths`.
    """
    from cursorkit.proto import pulsar_api_pb2 as api

    def invalid(why: str) -> ProtocolError:
        return ProtocolError(f"invalid topic name {text!r:.200}: {why}", server_error=api.InvalidTopicName)

    def not_served(why: str) -> ProtocolError:
        return ProtocolError(
            f"topic {text!r:.200} is not served by this broker: {why}", server_error=api.NotAllowedError
        )

    if not isinstance(text, str):
        raise invalid("not UTF-8")
    domain, rest = _domain_and_rest(text)
    if domain is None:
        raise invalid("the domain is neither persistent nor non-persistent")
    if rest is None:
        raise invalid("a short name is <topic> or <tenant>/<namespace>/<topic>")
    parts = rest.split("/", 3)  # as Pulsar: a fourth part is a local name, slashes and all
    if len(parts) < 3 or not parts[-1] or not all(_NAMED_ENTITY.fullmatch(p) for p in parts[:-1]):
        raise invalid("expected tenant/namespace/topic, tenant and namespace of [A-Za-z0-9_.=:-]")
    if domain != "persistent":
        raise not_served("it is non-persistent (as Pulsar with enableNonPersistentTopics=false)")
    if len(parts) == 4:
        raise not_served("it is a legacy name with a cluster (tenant/cluster/namespace/topic)")
    name = TopicName(*parts)
    if len(name.full) > _MAX_LENGTH:
        raise not_served(f"its full name is over {_MAX_LENGTH} characters")
    return name


def _domain_and_rest(text: str) -> tuple[str | None, str | None]:
    """The domain (lower case) and what follows ``://``, a short name completed as Pulsar completes it.

    None for the domain: not one of Pulsar's; None for the rest: a short name of neither form.
    """
    if "://" in text:
        domain, _, rest = text.partition("://")
        domain = domain.lower()  # Pulsar's TopicDomain ignores case
        return (domain if domain in _DOMAINS else None), rest
    tokens = [t for t in text.split("/") if t]  # StringUtils.split: empty tokens dropped
    if len(tokens) == 3:
        return "persistent", text  # the text itself: an empty segment in it is refused later
    if len(tokens) == 1:
        return "persistent", f"public/default/{tokens[0]}"
    return "persistent", None


def namespace_name(text: object) -> tuple[str, str]:
    """A namespace as GET_TOPICS_OF_NAMESPACE names it (``tenant/namespace``), checked as Pulsar does.

    InvalidTopicName for a name Pulsar refuses; NotAllowedError for a legacy one with a cluster.
    """
    from cursorkit.proto import pulsar_api_pb2 as api

    def refused(why: str, error: int) -> ProtocolError:
        return ProtocolError(f"namespace {text!r:.200}: {why}", server_error=error)

    if not isinstance(text, str):
        raise refused("not UTF-8", api.InvalidTopicName)
    parts = text.split("/")
    while parts and not parts[-1]:  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) not in (2, 3) or not all(_NAMED_ENTITY.fullmatch(p) for p in parts):
        raise refused("expected tenant/namespace of [A-Za-z0-9_.=:-]", api.InvalidTopicName)
    if len(parts) == 3:
        raise refused("legacy namespaces with a cluster are not served", api.NotAllowedError)
    return parts[0], parts[1]


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
