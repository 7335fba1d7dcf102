"""Topic ownership between brokers sharing a ZooKeeper: an ephemeral znode per topic names its owner.

A broker owns a topic while ``<root>/owners/<encoded topic>`` exists in its ZooKeeper session and
holds its ``pulsar://`` URL; the first broker to create it wins. The session is short (a few
seconds), so the claims of a broker that dies vanish soon after, and another broker takes the
topics over. A broker that may have lost its session (expired, or out of touch for longer than its
timeout) gives its topics up at once: :class:`Ownership` tells it through ``on_lost``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cursorkit.broker.server.cursor_stores import ZkCursorStores
from cursorkit.broker.server.names import TopicName
from cursorkit.stores.location import java_url_encode, parse_zk_root
from cursorkit.stores.zookeeper import ZkSession, kazoo_errors

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["Ownership"]


class Ownership:
    """This broker's claims on topics, in one ZooKeeper session of ``session_timeout_s``.

    ``on_lost(name)`` is called (from kazoo's thread) when the claim on ``name`` is gone, and
    ``on_lost(None)`` when every claim may be: the session expired, or the connection stayed lost
    for a whole session timeout.
    """

    def __init__(
        self, metadata: str, url: str, session_timeout_s: float, on_lost: Callable[[TopicName | None], None]
    ) -> None:
        where = parse_zk_root(metadata)
        self.hosts = where.hosts
        self.root = where.path
        self.url = url
        self._on_lost = on_lost
        self._timeout = session_timeout_s
        self._session = ZkSession.acquire(self.hosts, timeout=session_timeout_s)
        self.client: KazooClient = self._session.client
        self._suspended: threading.Timer | None = None
        from kazoo.retry import KazooRetry

        # Calls made while the session is being replaced (after it expired) are tried again.
        self._retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=2 * session_timeout_s)
        self.client.add_listener(self._state_changed)

    def path(self, name: TopicName) -> str:
        """The topic's owner znode."""
        return f"{self.root}/owners/{java_url_encode(name.full)}"

    def _mine(self, stat: Any) -> bool:
        return bool(stat.ephemeralOwner == self.client.client_id[0])

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._retry.copy()(fn, *args)

    def claim(self, name: TopicName) -> str:
        """The owner's URL once the topic has one: this broker's when its claim won (blocking)."""
        return str(self._call(self._claim, name))

    def _claim(self, name: TopicName) -> str:
        kex = kazoo_errors()
        path = self.path(name)
        while True:
            try:
                self.client.create(path, self.url.encode(), ephemeral=True, makepath=True)
            except kex.NodeExistsError:
                pass
            else:
                return self.url
            try:
                data, stat = self.client.get(path)
            except kex.NoNodeError:
                continue  # released meanwhile: claim it again
            return self.url if self._mine(stat) else bytes(data).decode()

    def owner(self, name: TopicName) -> str | None:
        """The owner's URL, None when the topic has none (blocking)."""
        try:
            data, _stat = self._call(self.client.get, self.path(name))
        except kazoo_errors().NoNodeError:
            return None
        return bytes(data).decode()

    def watch(self, name: TopicName) -> None:
        """Calls ``on_lost(name)`` once the claim on ``name`` is gone (deleted, or another session's)."""

        def changed(data: bytes | None, stat: Any) -> bool:
            if data is None or not self._mine(stat):
                self._on_lost(name)
                return False
            return True

        self.client.DataWatch(self.path(name), changed)

    def release(self, name: TopicName) -> None:
        """Deletes this broker's claim on ``name`` (after it closed the topic)."""
        kex = kazoo_errors()
        path = self.path(name)
        try:
            _data, stat = self._call(self.client.get, path)
            if self._mine(stat):
                self._call(self.client.delete, path, stat.version)
        except (kex.NoNodeError, kex.BadVersionError):
            pass

    def cursor_stores(self, name: TopicName) -> ZkCursorStores:
        """Where the topic's subscriptions keep their cursors: znodes under the same root and session."""
        return ZkCursorStores(self.client, self.hosts, self.root, name.full, self.url)

    def _state_changed(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if self._suspended is not None:
            self._suspended.cancel()
            self._suspended = None
        if state == KazooState.LOST:
            self._on_lost(None)
        elif state == KazooState.SUSPENDED:  # the session may expire unseen: give up after its timeout
            self._suspended = threading.Timer(self._timeout, self._on_lost, (None,))
            self._suspended.daemon = True
            self._suspended.start()

    def close(self) -> None:
        """Ends the session (every claim left goes with it)."""
        self.client.remove_listener(self._state_changed)
        if self._suspended is not None:
            self._suspended.cancel()
        self._session.release()
