"""Where a topic's subscriptions keep their cursors: file stores in its directory, or znodes in ZooKeeper.

One node keeps each cursor in a file store under the subscription's directory. Brokers sharing a
ZooKeeper keep it in the subscription's Pulsar cursor znode instead: the owner epoch a new owner
writes there fences every later flush of the old one.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote_plus

from cursorkit import CursorStore
from cursorkit.broker.server.paths import listed_subscription
from cursorkit.stores.location import cursor_znode_path, managed_ledger_path

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["CursorStores", "FileCursorStores", "ZkCursorStores"]


class CursorStores(Protocol):
    """One topic's cursor stores, by subscription: ``directory`` is the subscription's own."""

    def names(self, subscriptions: Path) -> list[str]:
        """The subscriptions that have a cursor (``subscriptions``: the topic's subscriptions directory)."""
        ...

    def exists(self, directory: Path, name: str) -> bool:
        """Whether the subscription has a cursor store."""
        ...

    def open(self, directory: Path, name: str) -> CursorStore:
        """The subscription's store, recovered (and owned)."""
        ...

    def create(self, directory: Path, name: str) -> CursorStore:
        """A new, empty store for the subscription."""
        ...

    def delete(self, directory: Path, name: str) -> None:
        """Deletes the subscription's store and directory (its store closed)."""
        ...


class FileCursorStores:
    """Each cursor in a file store, ``<subscription directory>/cursor`` (one node)."""

    def names(self, subscriptions: Path) -> list[str]:
        """The subscriptions whose directories hold a cursor, read back from their directory names.

        ``DamagedStore`` for a cursor in a directory that names no subscription (see ``paths``).
        """
        if not subscriptions.is_dir():
            return []
        found = sorted(d for d in subscriptions.iterdir() if (d / "cursor").is_dir())
        return [listed_subscription(d) for d in found]

    def exists(self, directory: Path, name: str) -> bool:
        """Whether ``<directory>/cursor`` exists."""
        return (directory / "cursor").exists()

    def open(self, directory: Path, name: str) -> CursorStore:
        """Opens ``<directory>/cursor``."""
        return CursorStore.open(directory / "cursor")

    def create(self, directory: Path, name: str) -> CursorStore:
        """Creates ``<directory>/cursor``."""
        return CursorStore.create(directory / "cursor", name=name)

    def delete(self, directory: Path, name: str) -> None:
        """Removes the subscription's directory, its store with it."""
        shutil.rmtree(directory, ignore_errors=True)


class ZkCursorStores:
    """Each cursor in its Pulsar znode, ``<root>/managed-ledgers/<tenant>/<ns>/persistent/<topic>/<sub>``.

    Every store goes through the broker's own kazoo client (one ZooKeeper session per broker), and
    names the broker (``owner``) in the znode.
    """

    def __init__(self, client: KazooClient, hosts: str, root: str, topic: str, owner: str) -> None:
        self._client = client
        self._hosts = hosts
        self._root = root
        self._topic = topic
        self._owner = owner
        self._options: dict[str, Any] = {"client": client, "owner": owner}

    def _path(self, name: str) -> str:
        return f"{self._root}{cursor_znode_path(self._topic, name)}"

    def _location(self, name: str) -> str:
        return f"zk://{self._hosts}{self._path(name)}"

    def names(self, subscriptions: Path) -> list[str]:
        """The children of the topic's managed-ledger znode (its cursors), decoded."""
        from kazoo.exceptions import NoNodeError

        try:
            children = self._client.get_children(f"{self._root}{managed_ledger_path(self._topic)}")
        except NoNodeError:
            return []
        return sorted(unquote_plus(c) for c in children)

    def exists(self, directory: Path, name: str) -> bool:
        """Whether the cursor znode exists."""
        return self._client.exists(self._path(name)) is not None

    def open(self, directory: Path, name: str) -> CursorStore:
        """Opens the znode, taking it over with a new owner epoch (the old owner's flushes fail)."""
        return CursorStore.open(self._location(name), name=name, **self._options)

    def create(self, directory: Path, name: str) -> CursorStore:
        """Creates the znode (its parents as needed)."""
        return CursorStore.create(self._location(name), name=name, **self._options)

    def delete(self, directory: Path, name: str) -> None:
        """Deletes the cursor znode and the subscription's directory (its bucket snapshots)."""
        from kazoo.exceptions import NoNodeError

        with contextlib.suppress(NoNodeError):
            self._client.delete(self._path(name))
        shutil.rmtree(directory, ignore_errors=True)
