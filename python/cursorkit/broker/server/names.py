"""Topic names as Pulsar's client writes them: ``t`` is ``persistent://public/default/t``; partitions."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cursorkit.errors import ProtocolError

__all__ = ["TopicName", "topic_name"]

_PART = re.compile(r"^(.*)-partition-(\d+)$")
_SEGMENT = re.compile(r"^[A-Za-z0-9_.=:-]+$")
_MAX_LENGTH = 1024


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
        """The partition index when the name is ``<topic>-partition-<N>``."""
        m = _PART.match(self.local)
        return int(m.group(2)) if m else None

    @property
    def base(self) -> TopicName:
        """The partitioned topic a partition belongs to (itself otherwise)."""
        m = _PART.match(self.local)
        return TopicName(self.tenant, self.namespace, m.group(1)) if m else self

    def partition_name(self, index: int) -> TopicName:
        """Partition ``index`` of this topic."""
        return TopicName(self.tenant, self.namespace, f"{self.local}-partition-{index}")

    @property
    def directory(self) -> str:
        """A relative directory that holds only this topic (segments checked to be plain names)."""
        return f"{self.tenant}/{self.namespace}/{self.local}"


def topic_name(text: str) -> TopicName:
    """Parses a topic as the client sends it; ``ProtocolError`` (InvalidTopicName) when it is not one."""
    from cursorkit.proto import pulsar_api_pb2 as api

    def bad(why: str) -> ProtocolError:
        return ProtocolError(f"invalid topic name {text[:200]!r}: {why}", server_error=api.InvalidTopicName)

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
    for p in parts:
        if not _SEGMENT.match(p) or p in {".", ".."}:
            raise bad(f"{p!r} is not a plain name")
    return TopicName(*parts)
