"""``AdminClient``: Pulsar's admin REST v2 paths for persistent topics and subscriptions, over the stdlib.

One method per ``pulsar-admin topics`` verb, each one HTTP request as Pulsar's Java admin client
makes it (the same paths, query parameters and JSON bodies), so it works against a Pulsar broker as
against ``cursorkit broker --http-port``. A refusal raises :class:`AdminError` with the HTTP status
and the broker's ``reason``; no answer at all raises :class:`AdminUnreachable`. ``http.client`` is
imported on the first request, not before: ``cursorkit admin --help`` does not pay for it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

from cursorkit.admin.names import LATEST, MessageId, Topic, namespace_path, topic
from cursorkit.errors import CursorkitError, InvalidArgument

if TYPE_CHECKING:
    from http.client import HTTPConnection

__all__ = ["DEFAULT_URL", "AdminClient", "AdminError", "AdminUnreachable"]

DEFAULT_URL = "http://127.0.0.1:8080"
"""pulsar-admin's default ``--admin-url`` (a Pulsar standalone's web service port)."""
_REDIRECTS = 5
"""Redirects followed per request (Pulsar answers 307 with the owning broker's URL)."""


class AdminError(CursorkitError):
    """The broker refused the request: its HTTP status and the reason it gave (Pulsar's ``{"reason"}``)."""

    def __init__(self, status: int, reason: str, method: str = "", path: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.method = method
        self.path = path


class AdminUnreachable(CursorkitError, ConnectionError):
    """No answer from the admin URL: the connection was refused, timed out or dropped."""


TopicLike = str | Topic


def _topic(name: TopicLike) -> Topic:
    return name if isinstance(name, Topic) else topic(name)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _cursor_data(message_id: MessageId, *, excluded: bool = False) -> dict[str, Any]:
    """The JSON of Pulsar's ``ResetCursorData`` as the Java admin client writes it."""
    return {
        "ledgerId": message_id.ledger_id,
        "entryId": message_id.entry_id,
        "partitionIndex": -1,
        "excluded": excluded,
        "batchIndex": -1,
    }


class AdminClient:
    """Pulsar's admin REST v2 at ``url`` (``http://host:port``, the broker's ``--http-port``).

    Topics are given as pulsar-admin takes them (``persistent://t/ns/x``, ``t/ns/x`` or ``x``).
    """

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 30.0) -> None:
        """``timeout``: seconds to connect, and to wait for each answer."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(f"admin URL {url!r}: use http://HOST:PORT")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"AdminClient({self.url!r})"

    # -- one request -------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, *, body: object = None, query: dict[str, str] | None = None
    ) -> Any:
        """One request to ``path`` (under the admin URL); its JSON answer, its text, or None (204).

        ``body`` is sent as JSON when not None. Raises :class:`AdminError` for a 4xx or 5xx answer,
        :class:`AdminUnreachable` when there is none.
        """
        target = self.url + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for _ in range(_REDIRECTS + 1):
            status, phrase, content_type, location, raw = self._exchange(method, target, data, headers)
            if status in (301, 302, 303, 307, 308) and location:
                target = urljoin(target, location)
                continue
            if status >= 400:
                raise AdminError(status, _reason(status, phrase, content_type, raw), method, path)
            if status == 204 or not raw:
                return None
            text = raw.decode("utf-8", errors="replace")
            if content_type.split(";")[0].strip() == "application/json":
                try:
                    return json.loads(text)
                except ValueError:
                    raise AdminError(
                        status, f"the answer is not JSON: {text[:200]!r}", method, path
                    ) from None
            return text
        raise AdminError(310, f"more than {_REDIRECTS} redirects", method, path)

    def _exchange(
        self, method: str, url: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str, str, str, bytes]:
        """Sends one request; ``(status, reason phrase, content type, location, body)``."""
        import http.client

        parts = urlsplit(url)
        conn: HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        where = f"{parts.scheme}://{parts.netloc}"
        try:
            conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), data, headers)
            resp = conn.getresponse()
            raw = resp.read()
            return (
                resp.status,
                resp.reason,
                resp.getheader("Content-Type", ""),
                resp.getheader("Location", ""),
                raw,
            )
        except (OSError, http.client.HTTPException) as e:
            why = getattr(e, "strerror", None) or str(e) or type(e).__name__
            raise AdminUnreachable(f"cannot reach {where}: {why}") from e
        finally:
            conn.close()

    # -- namespaces --------------------------------------------------------------------------------

    def list_topics(self, namespace: str) -> list[str]:
        """The persistent topics of ``TENANT/NAMESPACE`` (partitions as ``x-partition-N``)."""
        return list(self.request("GET", namespace_path(namespace)) or [])

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        """The partitioned topics of ``TENANT/NAMESPACE`` (their base names)."""
        return list(self.request("GET", namespace_path(namespace, "partitioned")) or [])

    # -- topics ------------------------------------------------------------------------------------

    def create(self, name: TopicLike) -> None:
        """Creates a non-partitioned topic (409 when it exists)."""
        self.request("PUT", _topic(name).path())

    def delete(self, name: TopicLike, *, force: bool = False) -> None:
        """Deletes a topic (412 while it has producers or subscriptions, unless ``force``)."""
        self.request("DELETE", _topic(name).path(), query={"force": _flag(force)})

    def create_partitioned_topic(self, name: TopicLike, partitions: int) -> None:
        """Creates a partitioned topic of ``partitions`` partitions."""
        self.request("PUT", _topic(name).path("partitions"), body=partitions)

    def update_partitioned_topic(self, name: TopicLike, partitions: int, *, force: bool = False) -> None:
        """Raises a partitioned topic's partition count to ``partitions``."""
        query = {"updateLocalTopicOnly": "false", "force": _flag(force)}
        self.request("POST", _topic(name).path("partitions"), body=partitions, query=query)

    def get_partitioned_topic_metadata(self, name: TopicLike) -> dict[str, Any]:
        """``{"partitions": N, ...}``; N is 0 for a non-partitioned topic."""
        return dict(self.request("GET", _topic(name).path("partitions")) or {})

    def delete_partitioned_topic(self, name: TopicLike, *, force: bool = False) -> None:
        """Deletes a partitioned topic and its partitions."""
        self.request("DELETE", _topic(name).path("partitions"), query={"force": _flag(force)})

    def stats(
        self,
        name: TopicLike,
        *,
        precise_backlog: bool = False,
        subscription_backlog_size: bool = False,
        earliest_time_in_backlog: bool = False,
    ) -> dict[str, Any]:
        """The topic's stats (Pulsar's ``TopicStats`` JSON: rates, publishers, subscriptions)."""
        query = {
            "getPreciseBacklog": _flag(precise_backlog),
            "subscriptionBacklogSize": _flag(subscription_backlog_size),
            "getEarliestTimeInBacklog": _flag(earliest_time_in_backlog),
        }
        return dict(self.request("GET", _topic(name).path("stats"), query=query) or {})

    def partitioned_stats(self, name: TopicLike, *, per_partition: bool = False) -> dict[str, Any]:
        """A partitioned topic's stats, summed over its partitions (and each one's with ``per_partition``)."""
        query = {"perPartition": _flag(per_partition)}
        return dict(self.request("GET", _topic(name).path("partitioned-stats"), query=query) or {})

    def internal_stats(self, name: TopicLike, *, metadata: bool = False) -> dict[str, Any]:
        """The topic's internal stats (Pulsar's ``PersistentTopicInternalStats``: ledgers, cursors)."""
        query = {"metadata": _flag(metadata)}
        return dict(self.request("GET", _topic(name).path("internalStats"), query=query) or {})

    def last_message_id(self, name: TopicLike) -> dict[str, Any]:
        """The topic's last message id (``ledgerId``, ``entryId``, ...)."""
        return dict(self.request("GET", _topic(name).path("lastMessageId")) or {})

    # -- subscriptions -----------------------------------------------------------------------------

    def subscriptions(self, name: TopicLike) -> list[str]:
        """The topic's subscriptions."""
        return list(self.request("GET", _topic(name).path("subscriptions")) or [])

    def create_subscription(
        self, name: TopicLike, subscription: str, *, message_id: MessageId = LATEST, replicated: bool = False
    ) -> None:
        """Creates a durable subscription at ``message_id`` (``LATEST``, ``EARLIEST`` or a position)."""
        self.request(
            "PUT",
            _topic(name).path("subscription", _sub(subscription)),
            body=_cursor_data(message_id),
            query={"replicated": _flag(replicated)},
        )

    def unsubscribe(self, name: TopicLike, subscription: str, *, force: bool = False) -> None:
        """Deletes a subscription (412 while it has consumers, unless ``force``)."""
        path = _topic(name).path("subscription", _sub(subscription))
        self.request("DELETE", path, query={"force": _flag(force)})

    def skip(self, name: TopicLike, subscription: str, count: int) -> None:
        """Skips the subscription's next ``count`` messages."""
        self.request("POST", _topic(name).path("subscription", _sub(subscription), "skip", str(count)))

    def clear_backlog(self, name: TopicLike, subscription: str) -> None:
        """Skips every message of the subscription's backlog."""
        self.request("POST", _topic(name).path("subscription", _sub(subscription), "skip_all"))

    def expire_messages(self, name: TopicLike, subscription: str, seconds: int) -> None:
        """Acknowledges the subscription's messages published more than ``seconds`` ago."""
        path = _topic(name).path("subscription", _sub(subscription), "expireMessages", str(seconds))
        self.request("POST", path)

    def expire_messages_to(
        self, name: TopicLike, subscription: str, message_id: MessageId, *, excluded: bool = False
    ) -> None:
        """Acknowledges the subscription's messages up to ``message_id`` (before it, with ``excluded``)."""
        path = _topic(name).path("subscription", _sub(subscription), "expireMessages")
        self.request("POST", path, body=_cursor_data(message_id, excluded=excluded))

    def reset_cursor(
        self,
        name: TopicLike,
        subscription: str,
        *,
        timestamp_ms: int | None = None,
        message_id: MessageId | None = None,
        excluded: bool = False,
    ) -> None:
        """Moves the subscription to a time or a position; its consumers are disconnected first.

        ``timestamp_ms``: the first message published at or after it; ``message_id``: that message
        (the one after it, with ``excluded``).
        """
        if (timestamp_ms is None) == (message_id is None):
            raise InvalidArgument("reset_cursor takes either timestamp_ms or message_id")
        base = _topic(name).path("subscription", _sub(subscription), "resetcursor")
        if timestamp_ms is not None:
            self.request("POST", f"{base}/{timestamp_ms}")
        else:
            assert message_id is not None
            self.request("POST", base, body=_cursor_data(message_id, excluded=excluded))

    # -- the broker --------------------------------------------------------------------------------

    def metrics(self) -> str:
        """The Prometheus text of ``/metrics``."""
        return str(self.request("GET", "/metrics") or "")


def _sub(subscription: str) -> str:
    """A subscription as one path segment."""
    if not subscription:
        raise InvalidArgument("a subscription name is required")
    return quote(subscription, safe="")


def _reason(status: int, phrase: str, content_type: str, raw: bytes) -> str:
    """What the broker said: the ``reason`` of its JSON error, else its text, else the status line."""
    text = raw.decode("utf-8", errors="replace").strip()
    if content_type.split(";")[0].strip() == "application/json":
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("reason"), str) and doc["reason"]:
            return str(doc["reason"])
    elif text and len(text) <= 500 and "<" not in text:
        return text
    return f"HTTP {status} {phrase}".rstrip()
