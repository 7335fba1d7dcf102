"""``ZkCursorStore``: the store a broker opens, wiring the znode, its claims, state objects and flushes."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.store.api import CursorStore
from cursorkit.ackstate.store.redelivery_journal import JournalReport
from cursorkit.ackstate.store.zookeeper.claims import DEFAULT_OWNERS_ROOT, Claims
from cursorkit.ackstate.store.zookeeper.flush import FlushWriter, PendingFlush, send_together
from cursorkit.ackstate.store.zookeeper.node import CursorZnode, owner_label
from cursorkit.ackstate.store.zookeeper.opening import Opened, create_node, open_node
from cursorkit.ackstate.store.zookeeper.properties import ZkCursorProperties
from cursorkit.ackstate.store.zookeeper.redeliveries import read_counts
from cursorkit.ackstate.store.zookeeper.reports import ZkFlushResult, ZkRecoveryReport
from cursorkit.ackstate.store.zookeeper.state_objects import StateObjects
from cursorkit.ackstate.store.zookeeper.znode import CursorState, read_znode
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    CursorkitError,
    InvalidArgument,
    InvalidInputType,
)
from cursorkit.stores.location import ZkLocation, parse_zk_location
from cursorkit.stores.objects import ObjectStore
from cursorkit.stores.zookeeper import ZkSession

__all__ = ["DEFAULT_MAX_ZNODE_BYTES", "ZkCursorStore", "flush_many"]

DEFAULT_MAX_ZNODE_BYTES = 512 * 1024
"""Largest znode a flush writes (ZooKeeper's ``jute.maxbuffer`` is 1 MB by default)."""
_MAX_ZNODE_BYTES = 0xFFFFF - 1024


def _positive_int(name: str, value: object, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= upper:
        raise InvalidArgument(f"{name} must be an int in 1..{upper}, got {value!r}")
    return value


class ZkCursorStore(CursorStore):
    """A cursor's ack state in its Pulsar znode: versioned, fenced writes; large state on object storage.

    ``CursorStore.create("zk://host:2181/managed-ledgers/t/ns/persistent/orders/sub")`` and
    ``CursorStore.open(...)`` return one. Keyword arguments:

    * ``objects``: an :class:`~cursorkit.stores.objects.ObjectStore` or its location (``s3://...``)
      for the state the znode does not hold; ``object_options`` are its settings (endpoint,
      credentials). Without it, what does not fit is cut as Pulsar cuts it, and reported.
    * ``read_only`` (``open`` only): read without taking ownership (flushes are refused).
    * ``owner``: a label for operators, kept in the znode with host and process.
    * ``max_znode_bytes``: byte budget of the znode (default 512 KiB). Nothing larger is ever sent
      (ZooKeeper would drop the shared connection): a record is written plain when it fits, else in
      Pulsar's ZLIB form (``ManagedCursorInfoMetadata`` header, which Pulsar reads), else with the
      ranges that fit (reported in the flush result, or :attr:`ZkRecoveryReport.ranges_left_out`).
    * ``client``: a started ``KazooClient`` to share (the caller keeps and stops it, and its
      reconnect policy); ``operation_timeout``, ``connect_timeout`` (seconds); anything else goes to
      ``KazooClient`` (``timeout`` = session timeout, ``auth_data``, ``connection_retry``...).
      Stores on the same hosts with the same options share one ZooKeeper session, which reconnects
      forever with pauses of 0.1 s doubling to 0.5 s (20% jitter; kazoo's default grows to an hour),
      so a flush succeeds again within about a second of ZooKeeper's return.
    """

    def __init__(
        self,
        location: ZkLocation,
        session: ZkSession,
        *,
        name: str,
        objects: ObjectStore | None,
        owner: str | None,
        max_znode_bytes: int,
        read_only: bool,
        claim_path: str,
    ) -> None:
        label = owner_label(owner)
        state_objects = StateObjects(objects, location.path) if objects is not None else None
        if state_objects is not None:
            state_objects.collect_due = not read_only
        self._node = CursorZnode(location, session, name=name, label=label, objects=state_objects)
        self._claims = Claims(session, claim_path, label, self._node.who)
        self._session = session
        self._read_only = read_only
        self._lock = threading.RLock()
        self._writer = FlushWriter(self._node, self._lock, self._check_writable, max_znode_bytes)
        self._closed = False
        self._state: CursorState | None = None
        self._report: ZkRecoveryReport | None = None
        self._properties = ZkCursorProperties(str(location), {}, self._writer.write_strings)
        self._counts: tuple[RedeliveryCounts, JournalReport] | None = None

    # -- construction ------------------------------------------------------------------------------

    @staticmethod
    def _split_options(
        options: dict[str, Any], *, allow_read_only: bool
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        store_keys = {"objects", "object_options", "owner", "max_znode_bytes", "owners_root"}
        if allow_read_only:  # open(): read-only, and the cursor's name when the znode has none
            store_keys.update(("read_only", "name"))
        store = {k: options.pop(k) for k in list(options) if k in store_keys}
        if "read_only" in options:
            raise InvalidArgument("read_only= is an option of open(), not create()")
        return store, options

    @classmethod
    def _build(
        cls, location: str | os.PathLike[str], name: str, store_options: dict[str, Any], zk: dict[str, Any]
    ) -> ZkCursorStore:
        loc = parse_zk_location(os.fspath(location))
        given: object = name
        if not isinstance(given, str) or not given:
            raise InvalidArgument(f"name must be a non-empty str, got {given!r}")
        objects = store_options.get("objects")
        object_options = store_options.get("object_options") or {}
        if not isinstance(object_options, dict):
            raise InvalidInputType(f"object_options must be a dict, got {type(object_options).__name__}")
        if isinstance(objects, str):
            objects = ObjectStore(objects, **object_options)
        elif objects is not None and not isinstance(objects, ObjectStore):
            raise InvalidInputType(
                f"objects must be an ObjectStore or a location, got {type(objects).__name__}"
            )
        owner = store_options.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise InvalidInputType(f"owner must be a str, got {type(owner).__name__}")
        max_bytes = _positive_int(
            "max_znode_bytes", store_options.get("max_znode_bytes", DEFAULT_MAX_ZNODE_BYTES), _MAX_ZNODE_BYTES
        )
        if max_bytes < 1024:
            raise InvalidArgument(f"max_znode_bytes must be at least 1024, got {max_bytes}")
        read_only = store_options.get("read_only", False)
        if not isinstance(read_only, bool):
            raise InvalidInputType(f"read_only must be a bool, got {type(read_only).__name__}")
        owners_root = store_options.get("owners_root", DEFAULT_OWNERS_ROOT)
        if not isinstance(owners_root, str):
            raise InvalidInputType(f"owners_root must be a str, got {type(owners_root).__name__}")
        claim = parse_zk_location(f"zk://{loc.hosts}{owners_root.rstrip('/')}{loc.path}").path
        session = ZkSession.acquire(loc.hosts, **zk)
        return cls(
            loc,
            session,
            name=name,
            objects=objects,
            owner=owner,
            max_znode_bytes=max_bytes,
            read_only=read_only,
            claim_path=claim,
        )

    @classmethod
    def _create(cls, location: str | os.PathLike[str], *, name: str, **options: Any) -> ZkCursorStore:
        """A new cursor znode (parents made as needed); ``FileExistsError`` if it exists."""
        store_options, zk = cls._split_options(dict(options), allow_read_only=False)
        store = cls._build(location, name, store_options, zk)
        try:
            opened = create_node(store._node, store._claims, max_bytes=store._writer.max_bytes)
            if isinstance(opened, int):  # another opener claimed it meanwhile: write our epoch in
                opened = store._open_node(name_given=True, claimed=opened)
            store._install(opened)
        except BaseException:
            store._release()
            raise
        return store

    @classmethod
    def _open(cls, location: str | os.PathLike[str], **options: Any) -> ZkCursorStore:
        """The cursor znode at ``location``, recovered and (unless ``read_only``) owned by this store."""
        store_options, zk = cls._split_options(dict(options), allow_read_only=True)
        name = store_options.pop("name", None)
        store = cls._build(location, name or "cursor", store_options, zk)
        try:
            store._install(store._open_node(name_given=name is not None))
        except BaseException:
            store._release()
            raise
        return store

    def _open_node(self, *, name_given: bool, claimed: int | None = None) -> Opened:
        return open_node(
            self._node,
            self._claims,
            max_bytes=self._writer.max_bytes,
            read_only=self._read_only,
            name_given=name_given,
            claimed=claimed,
        )

    def _install(self, opened: Opened) -> None:
        self._state = opened.state
        self._report = opened.report
        self._writer.strings = dict(opened.strings)
        self._properties = ZkCursorProperties(self.location, opened.strings, self._writer.write_strings)

    # -- state -------------------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """``zk://hosts/path``."""
        return str(self._node.location)

    @property
    def name(self) -> str:
        """The cursor's name, as recorded in the znode."""
        return self._node.name

    @property
    def path(self) -> str:
        """The znode's path."""
        return self._node.path

    @property
    def report(self) -> ZkRecoveryReport:
        """What :meth:`open` found."""
        assert self._report is not None
        return self._report

    @property
    def sequence(self) -> int:
        """Write number of the znode's content this store last wrote or read."""
        return self._node.sequence

    @property
    def version(self) -> int:
        """The znode version this store's next write expects."""
        return self._node.version

    @property
    def owner_epoch(self) -> int:
        """This store's owner epoch (0: read-only)."""
        return 0 if self._read_only else self._node.epoch

    @property
    def fenced(self) -> bool:
        """Whether another owner has taken the znode over (every later write raises ``Fenced``)."""
        return self._node.fenced is not None or self._claims.claimed > self._node.epoch

    @property
    def objects(self) -> ObjectStore | None:
        """The object store of the state objects, if any."""
        return self._node.objects.store if self._node.objects is not None else None

    @property
    def cursor_properties(self) -> ZkCursorProperties:
        """Pulsar's string ``cursorProperties`` of this cursor, durable in the znode on every change.

        The bucket delayed-delivery tracker keeps its bucket keys here, as Pulsar does.
        """
        return self._properties

    def _load_counts(self) -> tuple[RedeliveryCounts, JournalReport]:
        with self._lock:
            if self._closed:
                raise InvalidArgument(f"{self._node.who}: the store is closed")
            if self._counts is None:
                record = None
                try:
                    if self._node.last_data:  # what this owner wrote or took over
                        record = read_znode(self._node.last_data, self._node.who).cursorkit
                    elif self._read_only:  # a reader keeps no copy: the znode as it is now
                        record = self._node.read()[0].cursorkit
                except (CorruptSnapshot, FileNotFoundError):
                    record = None
                self._counts = read_counts(record, self._node.who)
                self._writer.counts = self._counts[0]
            return self._counts

    @property
    def redelivery_counts(self) -> RedeliveryCounts:
        """The cursor's redelivery counts, in the znode's cursorkit record (loaded on first use).

        Once loaded, every flush writes them (compressed, within a quarter of ``max_znode_bytes``;
        a cut is counted in ``ZkFlushResult.redelivery_runs_left_out``), and a flush is not skipped
        while they changed. An ownership take-over carries them to the new owner.
        """
        return self._load_counts()[0]

    @property
    def redelivery_report(self) -> JournalReport:
        """What reading the znode's redelivery counts found."""
        return self._load_counts()[1]

    def _check_writable(self) -> None:
        if self._closed:
            raise InvalidArgument(f"{self._node.who}: the store is closed")
        if self._read_only:
            raise InvalidArgument(f"{self._node.who}: opened read-only")
        self._claims.keep_watching()
        self._node.raise_if_fenced(self._claims.claimed)

    # -- recovery ----------------------------------------------------------------------------------

    # -- recovery ----------------------------------------------------------------------------------

    def recover(
        self,
        *,
        ledger_sizes: Mapping[int, int] | None = None,
        limits: PersistLimits | None = None,
        pulsar_quirks: bool = False,
    ) -> Cursor:
        """The cursor as the znode (or its state object) holds it.

        Cross-ledger ranges a Pulsar broker wrote are expanded with ``ledger_sizes``.
        """
        with self._lock:
            if self._closed:
                raise InvalidArgument(f"{self._node.who}: the store is closed")
            state = self._state
            assert state is not None
            acked = state.acked
            report = self.report
            if (
                ledger_sizes is not None
                and report.state_source == "znode"
                and not report.ranges_left_out
                and self._node.last_data
            ):
                content = read_znode(self._node.last_data, self._node.who, ledger_sizes)
                if content.state is not None:
                    acked = content.state.acked
            cursor = Cursor(
                state.mark_delete,
                name=self._node.name,
                pulsar_quirks=pulsar_quirks,
                ledger_sizes=ledger_sizes,
                limits=limits,
                properties=state.properties,
            )
            try:
                cursor.restore(state.mark_delete, acked.copy(), state.batches)
            except BudgetExceeded:
                raise
            except (ValueError, TypeError, KeyError) as e:
                raise CorruptSnapshot(f"{self._node.who}: {e}") from e
            cursor.clear_dirty()
            self._writer.bind(cursor, cursor.mutations, dict(cursor.properties))
            return cursor

    # -- flush -------------------------------------------------------------------------------------

    def flush(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> ZkFlushResult:
        """Writes the cursor's state to the znode (and a state object if needed); durable on return.

        Skips the write when nothing changed since the last flush of this cursor, unless ``full``
        or ``force``. Raises ``Fenced`` when another owner holds the znode, ``PersistFailed`` when
        ZooKeeper or the object store did not take the write (the previous flush stays recoverable).
        """
        return self.flush_async(cursor, full=full, force=force).result()

    def flush_async(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> PendingFlush:
        """Sends the flush and returns at once; ``.result()`` waits for ZooKeeper's answer.

        Flushes of many stores sent this way travel together on the session (one round trip
        for all); flushes of one store are still applied in order.
        """
        pending = self._writer.prepare(cursor, full=full, force=force)
        self._writer.send(pending)
        return pending

    def collect_garbage(self) -> int:
        """Deletes state objects nothing can publish any more; returns how many (best effort).

        Kept: the one the znode names, every object of a newer owner, and this owner's objects
        from writes not yet settled.
        """
        with self._lock:
            if self._read_only:
                return 0
            return self._node.collect()

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Waits for a flush in flight, then releases the ZooKeeper session (nothing new is written)."""
        with self._lock:
            if self._closed:
                return
            self._writer.settle_inflight()
            self._release()

    def _release(self) -> None:
        self._closed = True
        self._claims.stop()
        self._session.release()

    def __repr__(self) -> str:
        node = self._node
        state = "closed" if self._closed else f"epoch {node.epoch}, version {node.version}"
        return f"ZkCursorStore({str(node.location)!r}, name={node.name!r}, {state})"


def flush_many(items: Iterable[tuple[ZkCursorStore, Cursor]]) -> list[ZkFlushResult | CursorkitError]:
    """Flushes many cursors with their writes in flight together; one result or error per item.

    The errors are those :meth:`ZkCursorStore.flush` raises (``Fenced``, ``PersistFailed``, a closed
    store's ``InvalidArgument``...), returned in place so one cursor's failure does not hide the rest.
    """
    pending: list[PendingFlush | CursorkitError] = []
    for store, cursor in items:  # every flush encoded first, then all sent back to back
        try:
            pending.append(store._writer.prepare(cursor, full=False, force=False))
        except CursorkitError as e:
            pending.append(e)
    send_together([p for p in pending if isinstance(p, PendingFlush)])
    out: list[ZkFlushResult | CursorkitError] = []
    for p in pending:
        if isinstance(p, CursorkitError):
            out.append(p)
            continue
        try:
            out.append(p.result())
        except CursorkitError as e:
            out.append(e)
    return out


CursorStore.register("zk", ZkCursorStore)
