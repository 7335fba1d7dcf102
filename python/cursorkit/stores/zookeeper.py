"""ZooKeeper sessions for the shared stores: one kazoo client per ensemble, calls with a deadline.

A broker holds one ZooKeeper session, not one per cursor: :meth:`ZkSession.acquire` hands every
store opened on the same hosts with the same options the same started client, and stops it when the
last store releases it. Every call goes out asynchronously and is waited for at most
``operation_timeout`` seconds, so a paused or unreachable server makes a call fail in bounded time
(``StoreUnavailable`` for reads, :class:`InDoubt` for writes whose outcome is unknown) instead of
hanging the caller. kazoo is imported here only, when a ``zk://`` store is first opened.

A lost connection is retried at least every :data:`RECONNECT_MAX_DELAY` seconds (plus 20% jitter)
for as long as it takes: kazoo's own default doubles the pause up to an hour, which left a store
unusable for tens of seconds after ZooKeeper came back from a one-minute outage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cursorkit.errors import InvalidArgument, StoreUnavailable

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from kazoo.interfaces import IAsyncResult

__all__ = ["InDoubt", "ZkSession", "kazoo_errors"]

DEFAULT_OPERATION_TIMEOUT = 10.0
"""Seconds a single ZooKeeper call may take before it counts as failed."""
DEFAULT_CONNECT_TIMEOUT = 15.0
"""Seconds to wait for the first connection of a new session."""
RECONNECT_FIRST_DELAY = 0.1
"""Seconds before the first reconnect attempt; each later pause doubles, up to the maximum."""
RECONNECT_MAX_DELAY = 0.5
"""Longest pause between reconnect attempts (20% jitter on top, so at most 0.6 s): a flush works
again within about a second of ZooKeeper's return, however long it was gone."""


class InDoubt(Exception):
    """A write whose outcome is unknown: the connection was lost or the call timed out after sending.

    The write may still land, later, with the version it was given; a store treats its state as
    unconfirmed and resolves it by re-reading before its next write.
    """


_EXCEPTIONS: Any = None


def kazoo_errors() -> Any:
    """The kazoo exception module (imported on first use)."""
    global _EXCEPTIONS
    if _EXCEPTIONS is None:
        try:
            from kazoo import exceptions
        except ModuleNotFoundError as e:  # pragma: no cover - the dev venv has kazoo
            raise ModuleNotFoundError(
                "zk:// stores need kazoo: pip install 'cursorkit[zookeeper]'", name="kazoo"
            ) from e
        _EXCEPTIONS = exceptions
    return _EXCEPTIONS


def _transient(e: BaseException) -> bool:
    """Whether ``e`` says the call's fate is unknown (connection lost, session gone, timed out)."""
    kex = kazoo_errors()
    from kazoo.handlers.threading import KazooTimeoutError

    return isinstance(
        e,
        kex.ConnectionLoss
        | kex.SessionExpiredError
        | kex.ConnectionClosedError
        | kex.OperationTimeoutError
        | kex.SessionMovedError
        | KazooTimeoutError,
    )


def _raise_transient(e: Exception, what: str, *, write: bool) -> None:
    """Raises ``InDoubt`` (a write) or ``StoreUnavailable`` (a read) for a call whose fate is unknown."""
    if _transient(e):
        if write:
            raise InDoubt(f"{what}: {type(e).__name__} {e}".rstrip()) from e
        raise StoreUnavailable(f"{what}: ZooKeeper did not answer ({type(e).__name__} {e})") from e


def _fast_path(client: Any) -> tuple[Any, Any] | None:
    """Kazoo's request type and path helper when its request queue is as expected, else None."""
    try:
        from kazoo.protocol.paths import _prefix_root
        from kazoo.protocol.serialization import SetData
        from kazoo.protocol.states import KeeperState
    except ImportError:  # pragma: no cover - another kazoo layout
        return None
    queue = getattr(client, "_queue", None)
    connection = getattr(client, "_connection", None)
    if queue is None or not hasattr(queue, "append") or getattr(connection, "_write_sock", None) is None:
        return None
    if getattr(client, "_state", None) != KeeperState.CONNECTED:
        return None
    return SetData, _prefix_root


def _reconnect_policy(handler: Any) -> Any:
    """Reconnect forever, pausing 0.1 s doubling to :data:`RECONNECT_MAX_DELAY` (20% jitter)."""
    from kazoo.retry import KazooRetry

    return KazooRetry(
        max_tries=-1,
        delay=RECONNECT_FIRST_DELAY,
        backoff=2,
        max_jitter=0.2,
        max_delay=RECONNECT_MAX_DELAY,
        sleep_func=handler.sleep_func if handler is not None else time.sleep,
    )


class ZkSession:
    """One started kazoo client, shared by reference count; calls wait at most ``operation_timeout``."""

    _lock = threading.Lock()
    _sessions: dict[tuple[str, tuple[tuple[str, str], ...]], ZkSession] = {}

    def __init__(
        self, key: tuple[str, tuple[tuple[str, str], ...]], client: KazooClient, timeout: float
    ) -> None:
        self._key = key
        self.client = client
        self.operation_timeout = timeout
        self._refs = 0
        self.generation = 0
        """Counts connection state changes: watches armed in an older generation may be gone."""
        client.add_listener(self._state_changed)

    @classmethod
    def acquire(
        cls,
        hosts: str,
        *,
        client: KazooClient | None = None,
        operation_timeout: float = DEFAULT_OPERATION_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        **kazoo_options: Any,
    ) -> ZkSession:
        """The session for ``hosts`` and these options, started on first use.

        ``client`` is a kazoo client the caller started and keeps (shared, never stopped here);
        otherwise ``kazoo_options`` go to ``KazooClient`` (``timeout`` is the session timeout,
        ``auth_data``, ``default_acl``...). ``connection_retry`` replaces the reconnect policy
        (default: attempts at most :data:`RECONNECT_MAX_DELAY` seconds apart, forever).
        """
        given: tuple[tuple[str, object], ...] = (
            ("operation_timeout", operation_timeout),
            ("connect_timeout", connect_timeout),
        )
        for what, value in given:
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidArgument(f"{what} must be a positive number of seconds, got {value!r}")
        key: tuple[str, tuple[tuple[str, str], ...]]
        if client is not None:
            key = (f"client:{id(client)}", (("operation_timeout", repr(operation_timeout)),))
        else:
            if not hosts:
                raise InvalidArgument("a zk:// location needs host:port (or pass client=)")
            options = tuple(sorted((k, repr(v)) for k, v in kazoo_options.items()))
            key = (hosts, (*options, ("operation_timeout", repr(operation_timeout))))
        with cls._lock:
            session = cls._sessions.get(key)
            if session is None:
                started = client if client is not None else cls._start(hosts, connect_timeout, kazoo_options)
                session = cls(key, started, float(operation_timeout))
                session._owned = client is None
                cls._sessions[key] = session
            session._refs += 1
            return session

    _owned = False

    def _state_changed(self, _state: object) -> None:
        self.generation += 1

    @staticmethod
    def _start(hosts: str, connect_timeout: float, kazoo_options: dict[str, Any]) -> KazooClient:
        kazoo_errors()
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        options = dict(kazoo_options)
        if "connection_retry" not in options:
            options["connection_retry"] = _reconnect_policy(options.get("handler"))
        try:
            client = KazooClient(hosts=hosts, **options)
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"zk://{hosts}: {e}") from e
        try:
            client.start(timeout=connect_timeout)
        except KazooTimeoutError as e:
            client.close()
            raise StoreUnavailable(
                f"zk://{hosts}: no ZooKeeper session within {connect_timeout} s ({e})"
            ) from e
        return client

    def release(self) -> None:
        """Drops one reference; the last one stops and closes a client this module started."""
        with self._lock:
            self._refs -= 1
            if self._refs > 0:
                return
            self._sessions.pop(self._key, None)
        if self._owned:
            try:
                self.client.stop()
            finally:
                self.client.close()

    def wait(self, result: IAsyncResult, what: str, *, write: bool) -> Any:
        """The value of an asynchronous call, waited for at most ``operation_timeout``.

        A lost connection, an expired session or a timeout raises :class:`InDoubt` for a write and
        ``StoreUnavailable`` for a read; every other kazoo error propagates for the caller to map.
        """
        try:
            return result.get(timeout=self.operation_timeout)
        except Exception as e:
            _raise_transient(e, what, write=write)
            raise

    def set_many(self, writes: list[tuple[str, bytes, int]]) -> list[IAsyncResult]:
        """Versioned ``set_data`` of many znodes, queued together and sent with one wake-up.

        kazoo wakes its connection thread with one byte per request; queuing the requests and
        writing all their wake-up bytes at once saves a system call and a GIL hand-over per write.
        This uses kazoo's request queue (as kazoo 2.10 and 2.11 lay it out); with any other layout,
        or a client that is not connected, each write goes through ``set_async`` instead.
        """
        client = self.client
        fast = _fast_path(client)
        if fast is None or len(writes) < 2:
            return [client.set_async(path, data, version) for path, data, version in writes]
        set_data, prefix_root = fast
        results: list[IAsyncResult] = []
        queue = client._queue
        for path, data, version in writes:
            result = client.handler.async_result()
            queue.append((set_data(prefix_root(client.chroot, path), data, version), result))
            results.append(result)
        sock = client._connection._write_sock
        try:
            sock.sendall(b"\0" * len(writes))
        except (OSError, AttributeError):
            kex = kazoo_errors()
            for result in results:  # as kazoo's own _call does when the connection is gone
                if not result.ready():
                    result.set_exception(kex.ConnectionClosedError("Connection has been closed"))
        return results

    def call(self, start: Callable[..., IAsyncResult], *args: Any, what: str, write: bool = False) -> Any:
        """Starts ``start(*args)`` (a kazoo ``*_async`` method) and waits for it (see :meth:`wait`)."""
        try:
            result = start(*args)
        except Exception as e:
            _raise_transient(e, what, write=write)
            raise
        return self.wait(result, what, write=write)
