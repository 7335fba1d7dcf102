"""The topics of each namespace, as GET_TOPICS_OF_NAMESPACE lists them for regex subscriptions.

The broker keeps the persistent topics it knows in memory, per namespace: those on disk when it
started (listed once, off the event loop, while it already listens: answers wait for that list),
each topic it opens or creates since, and every partition of the partitioned topics it was told of.
Brokers sharing a data directory list the namespace's directory again for each request (another
broker may have made topics there), off the loop. Answers follow Pulsar's: full names, partitions
as ``<topic>-partition-<N>``; filtered by the client's pattern when it sends one (see
:mod:`.topic_patterns`); with the CRC-32C hash of the sorted names, and no names but
``changed=false`` when the client already holds that hash.

Bounds: one list is built at a time per broker (off the loop), at most ``MAX_WAITING`` more wait
(TooManyRequests past that); a pattern is run over the names only when ``states x characters``
stays within ``MATCH_BUDGET`` (otherwise the answer is every topic, unfiltered, and the client
filters); an answer larger than the message size limit is refused (NotAllowedError).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cursorkit.broker.protocol.checksum import crc32c
from cursorkit.broker.server.names import TopicName
from cursorkit.broker.server.paths import listed_segment, segment_component
from cursorkit.broker.server.topic_patterns import TopicPattern
from cursorkit.errors import CursorkitError, ProtocolError

__all__ = ["MATCH_BUDGET", "MAX_WAITING", "NamespaceTopics", "TopicList", "topic_list", "topics_hash"]

log = logging.getLogger("cursorkit.broker")

MATCH_BUDGET = 2_000_000
"""RE2 program steps one answer may spend matching a pattern (well under a second of one core)."""
MAX_WAITING = 64
"""Topic-list requests waiting for their turn, over all connections, past which TooManyRequests."""
_PARTITION_SUFFIX = "-partition-"
_ANSWER_ROOM = 10 * 1024
"""What an answer's frame holds beyond the names (the command's other fields, each name's tag)."""

Namespace = tuple[str, str]


@dataclass(frozen=True, slots=True)
class TopicList:
    """A GET_TOPICS_OF_NAMESPACE answer: the names, whether filtered, their hash, whether changed."""

    topics: list[str]
    filtered: bool
    topics_hash: str
    changed: bool


def topics_hash(topics: Iterable[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC-32C of the names sorted as Java sorts strings, ``,``-joined.

    Written as Guava writes a 32-bit hash: its four bytes, least significant first, in hex.
    """
    ordered = sorted(topics, key=_java_order)
    value = crc32c(",".join(ordered).encode("utf-8"))
    return value.to_bytes(4, "little").hex()


def _java_order(name: str) -> bytes:
    """Java's ``String.compareTo`` order: by UTF-16 code units (not by code points, as Python's)."""
    return name.encode("utf-16-be", "surrogatepass")


def _base_without_domain(full: str) -> str:
    """``tenant/namespace/local`` of a full name, partition suffix dropped (what a pattern is matched to)."""
    rest = full.partition("://")[2]
    return TopicName(*rest.split("/", 2)).base.full.partition("://")[2]


def topic_list(
    topics: Iterable[str], pattern: TopicPattern | None, client_hash: str | None, *, max_bytes: int
) -> TopicList:
    """Pulsar's answer for ``topics`` (full names): filtered by ``pattern`` when the budget allows.

    NotAllowedError when the names do not fit in one answer of ``max_bytes``.
    """
    names = sorted(set(topics), key=_java_order)
    filtered = False
    if pattern is not None:
        subjects = [_base_without_domain(n) for n in names]
        if sum(pattern.cost(len(s)) for s in subjects) <= MATCH_BUDGET:
            names = [n for n, s in zip(names, subjects, strict=True) if pattern.matches(s)]
            filtered = True
    size = sum(len(n.encode("utf-8")) + 4 for n in names)
    if size > max_bytes - _ANSWER_ROOM:
        from cursorkit.proto import pulsar_api_pb2 as api

        raise ProtocolError(
            f"{len(names)} topics ({size} bytes of names) do not fit in one answer of at most "
            f"{max_bytes} bytes: subscribe with a narrower pattern, or split the namespace",
            server_error=api.NotAllowedError,
        )
    digest = topics_hash(names)
    if client_hash is not None and client_hash == digest:
        return TopicList([], filtered, digest, changed=False)
    return TopicList(names, filtered, digest, changed=True)


def _log_failed_listing(task: asyncio.Task[None]) -> None:
    """Logs a listing of the topics on disk that failed (the next topic list runs it again)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("listing the topics on disk failed: %s", task.exception())


def _full_names(namespace: Namespace, locals_: Iterable[str]) -> list[str]:
    tenant, ns = namespace
    return [f"persistent://{tenant}/{ns}/{local}" for local in locals_]


def _listed(directory: Path, warned: set[Path]) -> list[tuple[str, Path]]:
    """The segments whose directories are in ``directory``, each with its directory.

    Damage is skipped, and logged once per directory in ``warned``.
    """
    found = []
    try:
        entries = sorted(directory.iterdir())
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.is_dir():
            continue
        try:
            segment = listed_segment(entry)
        except CursorkitError as e:
            if entry not in warned:
                warned.add(entry)
                log.warning("not listing %s as a topic: %s", entry, e)
            continue
        if segment is not None:
            found.append((segment, entry))
    return found


def scan_namespace(topics_dir: Path, namespace: Namespace, warned: set[Path] | None = None) -> set[str]:
    """The local names of the topics on disk in ``namespace`` (blocking: call it off the loop)."""
    tenant, ns = namespace
    directory = topics_dir / segment_component(tenant) / segment_component(ns)
    return {local for local, _ in _listed(directory, set() if warned is None else warned)}


def scan_topics(topics_dir: Path, warned: set[Path] | None = None) -> dict[Namespace, set[str]]:
    """Every namespace's topics on disk (blocking: call it off the loop)."""
    seen: set[Path] = set() if warned is None else warned
    found: dict[Namespace, set[str]] = {}
    for tenant, tenant_dir in _listed(topics_dir, seen):
        for ns, ns_dir in _listed(tenant_dir, seen):
            locals_ = {local for local, _ in _listed(ns_dir, seen)}
            if locals_:
                found[(tenant, ns)] = locals_
    return found


class NamespaceTopics:
    """The topics a broker knows per namespace, and the topic lists it answers from them.

    ``shared``: other brokers write the same data directory, so each request lists the namespace
    on disk again (off the loop).
    """

    def __init__(self, topics_dir: Path, *, shared: bool = False) -> None:
        self.topics_dir = topics_dir
        self.shared = shared
        self._known: dict[Namespace, set[str]] = {}
        self._turn = asyncio.Lock()
        self._waiting = 0
        self._warned: set[Path] = set()
        """Damaged directories already logged (a shared directory is listed again for each request)."""
        self._loading: asyncio.Task[None] | None = None
        """The listing of the topics on disk while it runs (or failed): answers wait for it."""

    async def load(self) -> None:
        """Adds the topics on disk (listed off the loop): done once, as the broker starts."""
        for namespace, locals_ in (
            await asyncio.to_thread(scan_topics, self.topics_dir, self._warned)
        ).items():
            self._known.setdefault(namespace, set()).update(locals_)

    def start_loading(self) -> None:
        """:meth:`load` in the background: the broker listens meanwhile, and :meth:`answer` waits for it.

        Listing many topics (a cold disk, thousands of directories) no longer delays the first connection.
        """
        self._loading = asyncio.get_running_loop().create_task(self.load())
        self._loading.add_done_callback(_log_failed_listing)

    def stop_loading(self) -> None:
        """Cancels a listing still running (the broker stops)."""
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None

    async def _loaded(self) -> None:
        """Waits for the listing of the topics on disk; ServiceNotReady if it failed (it runs again)."""
        task = self._loading
        if task is None:
            return
        try:
            await asyncio.shield(task)
        except Exception as e:
            from cursorkit.proto import pulsar_api_pb2 as api

            self.start_loading()
            raise ProtocolError(
                f"listing the topics on disk failed ({type(e).__name__}: {e}): retry later",
                server_error=api.ServiceNotReady,
            ) from e
        self._loading = None

    def add(self, name: TopicName) -> None:
        """A topic opened or created here."""
        self._known.setdefault(name.namespace_key, set()).add(name.local)

    def add_partitioned(self, name: TopicName, partitions: int) -> None:
        """The partitions of a partitioned topic (listed as Pulsar lists them, each on its own)."""
        self._known.setdefault(name.namespace_key, set()).update(
            f"{name.local}{_PARTITION_SUFFIX}{i}" for i in range(partitions)
        )

    def discard(self, name: TopicName) -> None:
        """A topic deleted here (its namespace stays known, empty or not)."""
        self._known.get(name.namespace_key, set()).discard(name.local)

    def has_namespace(self, namespace: Namespace) -> bool:
        """Whether a topic was ever listed or made in ``namespace`` since the broker started."""
        return namespace in self._known

    def known(self, namespace: Namespace) -> list[str]:
        """The full names known in ``namespace``."""
        return _full_names(namespace, self._known.get(namespace, ()))

    async def answer(
        self,
        namespace: Namespace,
        *,
        persistent: bool,
        pattern: TopicPattern | None,
        client_hash: str | None,
        max_bytes: int,
    ) -> TopicList:
        """The answer to one GET_TOPICS_OF_NAMESPACE, built off the loop, one at a time.

        ``persistent``: whether the mode asks for persistent topics (this broker has no others).
        TooManyRequests when ``MAX_WAITING`` requests already wait.
        """
        if self._waiting >= MAX_WAITING:
            from cursorkit.proto import pulsar_api_pb2 as api

            raise ProtocolError(
                f"{self._waiting} topic-list requests are waiting already: retry later",
                server_error=api.TooManyRequests,
            )
        self._waiting += 1
        try:
            async with self._turn:
                await self._loaded()
                if self.shared and persistent:
                    on_disk = await asyncio.to_thread(
                        scan_namespace, self.topics_dir, namespace, self._warned
                    )
                    self._known.setdefault(namespace, set()).update(on_disk)
                locals_ = frozenset(self._known.get(namespace, ())) if persistent else frozenset()

                def build() -> TopicList:
                    names = _full_names(namespace, locals_)
                    return topic_list(names, pattern, client_hash, max_bytes=max_bytes)

                return await asyncio.to_thread(build)
        finally:
            self._waiting -= 1
