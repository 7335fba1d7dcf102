"""Where shared state lives: ``zk://`` cursor locations and Pulsar's metadata-store paths.

A cursor znode sits where Pulsar's broker keeps it:
``/managed-ledgers/<tenant>/<namespace>/persistent/<encoded local name>/<encoded subscription>``, the
names URL-encoded as Java's ``URLEncoder`` does (Pulsar's ``Codec.encode``), so a Pulsar broker
and cursorkit find each other's cursors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import quote_plus

from cursorkit.errors import InvalidArgument, InvalidInputType

__all__ = [
    "MANAGED_LEDGERS",
    "ZkLocation",
    "cursor_znode_path",
    "is_zk_location",
    "java_url_encode",
    "managed_ledger_path",
    "parse_zk_location",
]

MANAGED_LEDGERS = "/managed-ledgers"
"""Root of Pulsar's managed-ledger metadata (``MetaStoreImpl.BASE_NODE``)."""

_MAX_PATH_BYTES = 4096
# ZooKeeper refuses these code points in a path (PathUtils.validatePath).
_BAD_PATH_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?$")


@dataclass(frozen=True, slots=True)
class ZkLocation:
    """A parsed ``zk://host:port[,host:port...]/path``: the ensemble and the znode."""

    hosts: str
    """``host:port`` pairs joined by commas, as kazoo takes them ("" when none were given)."""
    path: str
    """The znode's absolute path."""

    def __str__(self) -> str:
        return f"zk://{self.hosts}{self.path}"


def is_zk_location(location: object) -> bool:
    """Whether ``location`` is a ``zk://`` string (anything else is a file-system path)."""
    return isinstance(location, str) and location.startswith("zk://")


def _check_path(path: str, where: str) -> str:
    if not path.startswith("/") or path == "/":
        raise InvalidArgument(f"{where}: the znode path must be absolute and not the root, got {path!r}")
    if len(path.encode("utf-8", "surrogatepass")) > _MAX_PATH_BYTES:
        raise InvalidArgument(f"{where}: the znode path is longer than {_MAX_PATH_BYTES} bytes")
    bad = _BAD_PATH_CHAR.search(path)
    if bad:
        raise InvalidArgument(f"{where}: the znode path holds {bad.group()!r}, which ZooKeeper refuses")
    if path == "/zookeeper" or path.startswith("/zookeeper/"):
        raise InvalidArgument(f"{where}: /zookeeper is ZooKeeper's own subtree")
    if any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise InvalidArgument(f"{where}: the znode path has an empty, '.' or '..' segment")
    return path


def parse_zk_location(location: str | os.PathLike[str]) -> ZkLocation:
    """The ensemble and path of a ``zk://`` location; ``InvalidArgument`` naming what is wrong."""
    if not isinstance(location, str):
        raise InvalidInputType(f"a zk location must be a str, got {type(location).__name__}")
    if not location.startswith("zk://"):
        raise InvalidArgument(f"not a zk:// location: {location!r}")
    rest = location[len("zk://") :]
    slash = rest.find("/")
    if slash < 0:
        raise InvalidArgument(f"{location!r}: no znode path after the hosts")
    hosts, path = rest[:slash], rest[slash:]
    if "?" in path or "#" in path:
        raise InvalidArgument(f"{location!r}: options go in keyword arguments, not in the location")
    _check_hosts(hosts, location)
    return ZkLocation(hosts, _check_path(path, repr(location)))


def parse_zk_root(location: str) -> ZkLocation:
    """The ensemble and chroot of ``zk://hosts[/chroot]`` (``path`` is ``""`` for the root)."""
    if not is_zk_location(location):
        raise InvalidArgument(f"not a zk:// location: {location!r}")
    hosts, _, chroot = location[len("zk://") :].partition("/")
    if not hosts:
        raise InvalidArgument(f"{location!r}: no ZooKeeper host")
    if not chroot.strip("/"):
        return ZkLocation(_check_hosts(hosts, location), "")
    return parse_zk_location(f"zk://{hosts}/{chroot.strip('/')}")


def _check_hosts(hosts: str, location: str) -> str:
    for host in filter(None, hosts.split(",")):
        if not _HOST.fullmatch(host):
            raise InvalidArgument(f"{location!r}: {host!r} is not host[:port]")
        port = host.rpartition(":")[2] if host.count(":") == 1 or "]:" in host else ""
        if port and not 0 < int(port) < 65536:
            raise InvalidArgument(f"{location!r}: port {port} is out of range")
    return hosts


def java_url_encode(name: str) -> str:
    """``name`` as ``java.net.URLEncoder.encode(name, UTF-8)`` writes it (Pulsar's ``Codec.encode``).

    Letters, digits and ``.-*_`` stay; a space becomes ``+``; every other UTF-8 byte is ``%XX``.
    """
    if not isinstance(name, str):
        raise InvalidInputType(f"a name must be a str, got {type(name).__name__}")
    try:
        return quote_plus(name, safe="*", encoding="utf-8", errors="strict").replace("~", "%7E")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{name!r} is not encodable as UTF-8") from e


def managed_ledger_path(topic: str) -> str:
    """The managed-ledger znode of a persistent topic (``persistent://tenant/ns/name``, or a short name).

    A short name (``orders``) is ``persistent://public/default/orders``, as in Pulsar. Partitions are
    topics of their own (``orders-partition-3``). Non-persistent topics have no managed ledger.
    """
    if not isinstance(topic, str):
        raise InvalidInputType(f"topic must be a str, got {type(topic).__name__}")
    if "://" not in topic:
        if "/" in topic:
            raise InvalidArgument(f"topic {topic!r}: a short name has no '/'; give the full name")
        topic = f"persistent://public/default/{topic}"
    domain, _, rest = topic.partition("://")
    if domain != "persistent":
        raise InvalidArgument(f"topic {topic!r}: only persistent topics have a managed ledger")
    parts = rest.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise InvalidArgument(f"topic {topic!r} is not persistent://tenant/namespace/name")
    tenant, namespace, local = parts
    for what, value in (("tenant", tenant), ("namespace", namespace)):
        if not re.fullmatch(r"[-=:.\w]+", value):
            raise InvalidArgument(f"topic {topic!r}: {what} {value!r} has characters Pulsar does not allow")
    return f"{MANAGED_LEDGERS}/{tenant}/{namespace}/persistent/{java_url_encode(local)}"


def cursor_znode_path(topic: str, subscription: str) -> str:
    """The znode of a subscription's cursor: the managed-ledger path plus the encoded subscription."""
    given: object = subscription
    if not isinstance(given, str) or not given:
        raise InvalidArgument(f"subscription must be a non-empty str, got {given!r}")
    return _check_path(f"{managed_ledger_path(topic)}/{java_url_encode(subscription)}", f"topic {topic!r}")
