"""``ZkCursorStore``: a cursor's ack state in a ZooKeeper znode, written by one owner at a time.

The znode is the one Pulsar's broker keeps for the cursor (``/managed-ledgers/<tenant>/<ns>/
persistent/<topic>/<cursor>``) and holds a ``ManagedCursorInfo`` that Pulsar's parser reads
(:mod:`cursorkit.ackstate.znode`). What Pulsar's metadata-store limit leaves out (beyond 1,000 ranges
by default, or the znode's byte budget) goes first to an immutable state object on an object store
(``objects=``), which the znode then names with its SHA-256.

**Ownership.** Opening for writing advances an *owner epoch* kept in the znode, with a versioned
write. Every write is versioned too; one that meets a newer epoch raises :class:`~cursorkit.errors.Fenced`
and publishes nothing. A version conflict is settled by re-reading the znode, never by giving up:
a newer epoch fences, the store's own earlier write (a reply lost with the connection) is
recognised, anything else is overwritten by the owner.

**Size.** No write passes ``max_znode_bytes``: a record is written plain when it fits, else in
Pulsar's ZLIB form, else with ranges cut (reported); ZooKeeper would drop the connection of a
request past its ``jute.maxbuffer`` and fail the calls of every store on the session.

**Failures.** A call ZooKeeper does not answer within ``operation_timeout`` fails with
``PersistFailed`` (a write) or ``StoreUnavailable`` (a read); the previous flush stays what a
reader recovers, and the store stays usable. A lost connection is retried at least every
0.6 s (:data:`~cursorkit.stores.zookeeper.RECONNECT_MAX_DELAY`), so flushes work again
within about a second of ZooKeeper's return. A write whose outcome is unknown may still land later;
the next write settles it. State objects are deleted only once nothing can publish them again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate import persist
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.store_api import CursorStore
from cursorkit.ackstate.znode import (
    CursorState,
    EncodedZnode,
    ZnodeContent,
    cursor_info_bytes,
    encode_znode,
    fit_record,
    object_id,
    object_key,
    read_state_object,
    read_znode,
    state_object,
)
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    CursorkitError,
    Fenced,
    InvalidArgument,
    InvalidInputType,
    PersistFailed,
    StoreUnavailable,
)
from cursorkit.proto import cursor_znode_pb2 as zpb
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.stores.location import ZkLocation, parse_zk_location
from cursorkit.stores.objects import ObjectStore
from cursorkit.stores.zookeeper import InDoubt, ZkSession, kazoo_errors

if TYPE_CHECKING:
    from kazoo.interfaces import IAsyncResult
    from kazoo.protocol.states import ZnodeStat

__all__ = [
    "DEFAULT_MAX_ZNODE_BYTES",
    "ZkCursorProperties",
    "ZkCursorStore",
    "ZkFlushResult",
    "ZkRecoveryReport",
    "flush_many",
]

DEFAULT_MAX_ZNODE_BYTES = 512 * 1024
"""Largest znode a flush writes (ZooKeeper's ``jute.maxbuffer`` is 1 MB by default)."""
DEFAULT_OWNERS_ROOT = "/cursorkit/owners"
"""Where claim znodes live: ``<root><cursor path>``, outside Pulsar's ``/managed-ledgers``."""
_CLAIM = struct.Struct(">Q")
_MAX_ZNODE_BYTES = 0xFFFFF - 1024
_CONFLICT_RETRIES = 16
_LOST_RETRIES = 3
"""Ownership writes ZooKeeper may leave unconfirmed (connection lost) before opening gives up."""
_INITIAL = Position(0, -1)
_BYTES_ONLY = PersistLimits(
    max_unacked_ranges_to_persist=2**62,
    max_unacked_ranges_to_persist_in_metadata_store=2**62,
    max_batch_deleted_index_to_persist=2**62,
    max_entry_bytes=2**62,
)
"""Limits that leave only the byte budget to cut a record (an ownership write keeps what it read)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkRecoveryReport:
    """What :meth:`ZkCursorStore.open` found in the znode, and everything it had to step over."""

    location: str
    version: int
    """The znode's version once this store holds it."""
    owner_epoch: int
    """This store's epoch (0: opened read-only)."""
    previous_epoch: int
    """The epoch the znode held (0: never owned by cursorkit)."""
    previous_owner: str | None
    sequence: int
    """Write number of the content recovered."""
    written_by: str
    """``cursorkit``, or ``pulsar`` for a znode with no cursorkit record."""
    state_source: str
    """Where the state came from: ``znode``, ``object`` or ``mark-delete only``."""
    state_object: str | None
    """Key of the state object the znode names, if any."""
    mark_delete: Position
    ranges: int
    """Ack ranges recovered."""
    ranges_recorded: int
    """Ack ranges the writer recorded (more than :attr:`ranges` when state was lost or cut)."""
    batches: int
    batches_recorded: int
    properties: int
    cursor_properties: int
    compression: str | None = None
    """Pulsar's codec when the znode was compressed."""
    conflicts: int = 0
    """Versioned writes retried while taking ownership (other writers at the same time)."""
    znode_bytes: int = 0
    """Bytes of the ownership write (0: opened read-only)."""
    written_compression: str | None = None
    """``ZLIB`` when the ownership write took Pulsar's compressed form (the plain record passed
    ``max_znode_bytes``)."""
    ranges_left_out: int = 0
    """Recovered ranges the ownership write could not keep in the znode (neither form fit
    ``max_znode_bytes``, and no state object holds them): the store holds them, and its next flush
    writes them out or reports the cut."""
    batches_left_out: int = 0
    """Recovered partial batches the ownership write left out, as for :attr:`ranges_left_out`."""
    fallbacks: tuple[str, ...] = ()
    """Why recovery used less than the writer recorded, one line each; empty when nothing was lost."""

    @property
    def damaged(self) -> bool:
        """Whether recovery fell back to less state than was recorded."""
        return bool(self.fallbacks)

    @property
    def rewound(self) -> bool:
        """Whether acks recorded by the writer are missing (they will be redelivered)."""
        return self.ranges < self.ranges_recorded or self.batches < self.batches_recorded or self.damaged


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkFlushResult:
    """One flush to ZooKeeper: what it wrote, and what (if anything) no durable copy holds."""

    skipped: bool
    bytes_written: int
    """Znode and state-object bytes."""
    znode_bytes: int
    object_bytes: int
    version: int
    """The znode's version after the write."""
    sequence: int
    ranges_total: int
    ranges_inline: int
    """Ranges in the znode itself (Pulsar's view)."""
    ranges_cut: int
    """Ranges no durable copy holds (no object store, and more than the znode takes)."""
    batches_cut: int
    conflicts: int
    """Versioned writes retried because another writer had changed the znode."""
    duration_s: float
    compression: str | None = None
    """``ZLIB`` when the znode was written in Pulsar's compressed form (the plain one passed the budget)."""

    @property
    def truncated(self) -> bool:
        """Whether part of the state was left out of everything durable."""
        return self.ranges_cut > 0 or self.batches_cut > 0


def _owner_label(label: str | None) -> str:
    base = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    return f"{label} ({base})" if label else base


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _positive_int(name: str, value: object, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= upper:
        raise InvalidArgument(f"{name} must be an int in 1..{upper}, got {value!r}")
    return value


class _Pending:
    """A flush sent to ZooKeeper and not yet confirmed; :meth:`result` waits for it."""

    def __init__(
        self,
        store: ZkCursorStore,
        call: IAsyncResult | None,
        *,
        data: bytes,
        sequence: int,
        ref: zpb.StateObject | None,
        cursor: Cursor | None,
        mutations: int,
        properties: dict[str, int],
        sizes: tuple[int, int, int, int, int],
        started: float,
        skipped: ZkFlushResult | None = None,
        compression: str | None = None,
    ) -> None:
        self.store = store
        self.call = call
        self.data = data
        self.sequence = sequence
        self.ref = ref
        self.cursor = cursor
        self.mutations = mutations
        self.properties = properties
        self.sizes = sizes  # object bytes, ranges total, ranges inline, ranges cut, batches cut
        self.started = started
        self.compression = compression
        self.outcome: ZkFlushResult | BaseException | None = skipped

    def result(self) -> ZkFlushResult:
        """The flush's result once ZooKeeper confirmed it; raises what made it fail."""
        with self.store._lock:
            if self.outcome is None and self.call is None:
                self.store._send(self)
            if self.outcome is None:
                try:
                    self.outcome = self.store._settle(self)
                except Exception as e:
                    self.outcome = e
            if self.store._inflight is self:
                self.store._inflight = None
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def not_sent(self, e: Exception) -> None:
        """Records that the flush never left (its state object, if any, is taken back)."""
        self.store._drop_object(self.ref)
        self.outcome = PersistFailed(errno.EIO, f"{self.store._who}: flush not sent ({type(e).__name__} {e})")

    def done(self) -> bool:
        """Whether the outcome is known (it may still have to be collected by :meth:`result`)."""
        return self.outcome is not None or (self.call is not None and self.call.ready())


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
        self._location = location
        self._claim_path = claim_path
        self._claimed = 0  # the highest epoch an opener has claimed, as the claim watch saw it
        self._watch_gen = -1  # the session generation the claim watch was armed in (-1: not armed)
        self._who = f"cursor znode {location}"
        self._session = session
        self._client = session.client
        self._path = location.path
        self._name = name
        self._objects = objects
        self._object_dir = "cursors/" + hashlib.sha256(location.path.encode()).hexdigest()[:32]
        self._label = _owner_label(owner)
        self._max_bytes = max_znode_bytes
        self._read_only = read_only
        self._lock = threading.RLock()
        self._closed = False
        self._fenced: Fenced | None = None
        self._epoch = 0
        self._version = -1
        self._sequence = 0
        self._sent = 0  # highest write number handed out: never reused, even by a write that failed
        self._last_data = b""
        self._strings: dict[str, str] = {}
        self._ref: zpb.StateObject | None = None
        self._state: CursorState | None = None
        self._raw_state: bytes | None = None
        self._bound: Cursor | None = None
        self._bound_mutations = -1
        self._bound_props: dict[str, int] | None = None
        self._gc_due = not read_only
        self._inflight: _Pending | None = None
        self._conflicts = 0
        self._report: ZkRecoveryReport | None = None
        self._properties = ZkCursorProperties(self)

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
            store._create_node()
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
            store._open_node(name_given=name is not None)
        except BaseException:
            store._release()
            raise
        return store

    def _next_sequence(self) -> int:
        """A write number above every one sent so far (a write in doubt may still land with its own)."""
        self._sent = max(self._sent, self._sequence) + 1
        return self._sent

    def _where(self) -> str:
        return self._who

    def _record(self, sequence: int, ref: zpb.StateObject | None = None) -> zpb.CursorkitState:
        ck = zpb.CursorkitState(
            format_version=1,
            owner_epoch=self._epoch,
            sequence=sequence,
            owner=self._label,
            written_at_ms=_now_ms(),
            cursor_name=self._name,
        )
        if ref is not None:
            ck.state.CopyFrom(ref)
        return ck

    def _read_claim(self) -> tuple[int, int | None]:
        """The epoch in the claim znode and its version (``0, None`` when there is none)."""
        kex = kazoo_errors()
        what = f"{self._who}: read claim"
        try:
            data, stat = self._session.call(self._client.get_async, self._claim_path, what=what)
        except kex.NoNodeError:
            return 0, None
        except kex.KazooException as e:
            raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
        return (_CLAIM.unpack_from(data)[0] if len(data) >= _CLAIM.size else 0), stat.version

    def _claim(self, floor: int) -> int:
        """Claims the cursor: an epoch above ``floor`` and every earlier claim, in the claim znode.

        The claim znode holds nothing but the newest owner epoch; owners watch it, and one that sees
        a newer claim stops writing at once, so a new owner never has to out-race a busy old one.
        The fencing itself is the versioned write of the epoch into the cursor znode.
        """
        kex = kazoo_errors()
        what = f"{self._who}: claim"
        for _ in range(_CONFLICT_RETRIES):
            current, version = self._read_claim()
            epoch = max(current, floor) + 1
            data = _CLAIM.pack(epoch) + self._label.encode()
            try:
                if version is None:
                    self._session.call(
                        self._client.create_async,
                        self._claim_path,
                        data,
                        None,
                        False,
                        False,
                        True,
                        what=what,
                        write=True,
                    )
                else:
                    self._session.call(
                        self._client.set_async, self._claim_path, data, version, what=what, write=True
                    )
            except (kex.NodeExistsError, kex.BadVersionError):
                continue
            except InDoubt:
                again, _ = self._read_claim()
                if again != epoch:
                    continue
            except kex.KazooException as e:
                raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
            return epoch
        raise StoreUnavailable(f"{what}: other openers kept claiming the cursor ({_CONFLICT_RETRIES} tries)")

    def _watch_claims(self) -> None:
        """Arms a one-shot watch on the claim znode: a newer claim fences this store before its next write.

        Nothing here blocks: the read and the re-arm are asynchronous, and a watch lost with the
        session is armed again before the next flush.
        """
        self._watch_gen = self._session.generation
        try:
            result = self._client.get_async(self._claim_path, watch=self._claim_changed)
        except Exception:  # noqa: BLE001 - not connected: armed again before the next flush
            self._watch_gen = -1
            return
        result.rawlink(self._claim_read)

    def _claim_changed(self, _event: object) -> None:
        self._watch_gen = -1
        if not self._closed:
            self._watch_claims()

    def _claim_read(self, result: IAsyncResult) -> None:
        if not result.successful():
            self._watch_gen = -1  # no claim znode (or no answer): no watch is set
            return
        data, _stat = result.value
        if len(data) >= _CLAIM.size:
            self._claimed = max(self._claimed, _CLAIM.unpack_from(data)[0])

    def _create_node(self) -> None:
        kex = kazoo_errors()
        self._epoch = self._read_claim()[0] + 1
        encoded = encode_znode(
            mark_delete=_INITIAL,
            acked=RangeSet(),
            batches=[],
            properties={},
            string_properties={},
            cursorkit=self._record(1),
            limits=PersistLimits(),
            max_bytes=self._max_bytes,
            last_active_ms=_now_ms(),
            who=self._where(),
        )
        what = f"{self._where()}: create"
        try:
            self._session.call(
                self._client.create_async,
                self._path,
                encoded.data,
                None,
                False,
                False,
                True,
                what=what,
                write=True,
            )
        except kex.NodeExistsError as e:
            raise FileExistsError(errno.EEXIST, "a cursor znode already exists", str(self._location)) from e
        except InDoubt as e:
            # Ours if the znode now holds our owner label; anything else is someone else's cursor.
            content, _stat = self._read(ledger_sizes=None)
            if content.cursorkit is None or content.cursorkit.owner != self._label:
                raise FileExistsError(
                    errno.EEXIST, "a cursor znode already exists", str(self._location)
                ) from e
        except kex.KazooException as e:
            raise PersistFailed(errno.EIO, f"{what} failed ({type(e).__name__} {e})") from e
        self._version = 0
        self._sequence = 1
        self._last_data = encoded.data
        self._state = CursorState(_INITIAL, RangeSet(), [], {})
        self._gc_due = False
        claimed = self._claim(self._epoch - 1)
        if claimed != self._epoch:  # another opener claimed it meanwhile: write our epoch in
            self._open_node(name_given=True, claimed=claimed)
            return
        self._watch_claims()
        self._report = ZkRecoveryReport(
            location=str(self._location),
            version=0,
            owner_epoch=self._epoch,
            previous_epoch=0,
            previous_owner=None,
            sequence=1,
            written_by="cursorkit",
            state_source="znode",
            state_object=None,
            mark_delete=_INITIAL,
            ranges=0,
            ranges_recorded=0,
            batches=0,
            batches_recorded=0,
            properties=0,
            cursor_properties=0,
        )

    def _read(self, ledger_sizes: Mapping[int, int] | None) -> tuple[ZnodeContent, ZnodeStat]:
        kex = kazoo_errors()
        what = f"{self._where()}: read"
        try:
            data, stat = self._session.call(self._client.get_async, self._path, what=what)
        except kex.NoNodeError as e:
            raise FileNotFoundError(errno.ENOENT, "no cursor znode", str(self._location)) from e
        except kex.KazooException as e:
            raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
        return read_znode(data, self._where(), ledger_sizes), stat

    def _load_state(
        self, content: ZnodeContent, fallbacks: list[str], reads: dict[tuple[str, bytes], CursorState | str]
    ) -> tuple[CursorState, str]:
        """The state a znode's content leads to (its state object when it names one).

        ``reads`` keeps each state object's outcome by key and digest (objects are immutable), so
        re-reading the znode while opening does not fetch and decode the same object again.
        """
        info = content.info
        ck = content.cursorkit
        if content.state is None:
            md = (
                Position(info.markDeleteLedgerId, info.markDeleteEntryId)
                if info.HasField("markDeleteLedgerId")
                else _INITIAL
            )
            try:
                md = persist.mark_delete_of(md.ledger_id, md.entry_id)
            except ValueError as e:
                raise CorruptSnapshot(f"{self._where()}: {e}") from e
            fallbacks.append(
                f"the ack state lives in BookKeeper cursor ledger {info.cursorsLedgerId}, which cursorkit "
                f"does not read: recovered the znode's mark-delete {md} and properties; acks after "
                "it will be redelivered"
            )
            props = {p.name: p.value for p in info.properties}
            return CursorState(md, RangeSet(), [], props), "mark-delete only"
        if ck is None or not ck.HasField("state"):
            return content.state, "znode"
        if self._objects is None:
            raise InvalidArgument(
                f"{self._where()}: its whole state is in state object {ck.state.key}; "
                "open it with objects= (the object store that holds it)"
            )
        where = f"{self._objects.uri}/{ck.state.key}"
        full = reads.get((ck.state.key, ck.state.sha256))
        if full is None:
            full = reads[(ck.state.key, ck.state.sha256)] = self._read_object(ck.state, where)
        if isinstance(full, str):
            reason = full
        else:
            if full.mark_delete != content.state.mark_delete:
                reason = f"holds mark-delete {full.mark_delete}, the znode {content.state.mark_delete}"
            else:
                return CursorState(
                    full.mark_delete, full.acked, full.batches, content.state.properties
                ), "object"
        fallbacks.append(
            f"state object {where} {reason}: recovered the znode's own state "
            f"({len(content.state.acked)} of {ck.ranges_total} ranges, "
            f"{len(content.state.batches)} of {ck.batches_total} partial batches); "
            "the acks left out will be redelivered"
        )
        return content.state, "znode"

    def _read_object(self, ref: zpb.StateObject, where: str) -> CursorState | str:
        """The state in the object ``ref`` names, or why it cannot be used."""
        assert self._objects is not None
        epoch, sequence = object_id(ref.key) or (-1, -1)
        try:
            data = self._objects.get(ref.key)
            return read_state_object(data, ref, path=self._path, epoch=epoch, sequence=sequence, where=where)
        except FileNotFoundError:
            return "is missing"
        except CorruptSnapshot as e:
            return f"is damaged ({e})"

    def _ownership_record(self, content: ZnodeContent, state: CursorState, sequence: int) -> EncodedZnode:
        """The znode bytes that take ownership: the record as read, with ours, within the budget.

        Plain when it fits ``max_znode_bytes``, else Pulsar's ZLIB form. When neither does (a znode
        Pulsar wrote under a larger ``jute.maxbuffer``), the recovered state is written with the
        ranges and batches that fit; the store still holds all of them (:attr:`ZkRecoveryReport.
        ranges_left_out`). Raises ``BudgetExceeded`` when not even that fits.
        """
        ck = content.cursorkit
        record = self._record(sequence, ck.state if ck is not None and ck.HasField("state") else None)
        if ck is not None:
            record.ranges_total = ck.ranges_total
            record.batches_total = ck.batches_total
            record.batch_sizes.extend(ck.batch_sizes)
        info = ml.ManagedCursorInfo()
        info.CopyFrom(content.info)
        info.cursorkit.CopyFrom(record)
        raw = info.SerializeToString()
        data, codec = fit_record(raw, self._max_bytes)
        held = content.state
        if len(data) <= self._max_bytes:
            ranges = len(held.acked) if held is not None else 0
            batches = len(held.batches) if held is not None else 0
            return EncodedZnode(data, ranges, ranges, batches, batches, codec)
        refused = BudgetExceeded(
            f"{self._where()}: taking ownership needs a {len(raw):,}-byte record ({len(data):,} bytes "
            f"compressed), more than max_znode_bytes {self._max_bytes:,}; not sent (ZooKeeper drops "
            "the connection of a request past its jute.maxbuffer)"
        )
        if held is None:  # the state lives in a cursor ledger: the record is not cursorkit's to cut
            raise refused
        record.ClearField("batch_sizes")  # encode_znode writes those of the batches it keeps
        try:
            return encode_znode(
                mark_delete=state.mark_delete,
                acked=state.acked,
                batches=state.batches,
                properties=state.properties,
                string_properties=content.string_properties,
                cursorkit=record,
                limits=_BYTES_ONLY,
                max_bytes=self._max_bytes,
                last_active_ms=info.lastActive if info.HasField("lastActive") else _now_ms(),
                who=self._who,
            )
        except InvalidArgument as e:  # its properties alone pass the budget
            raise refused from e

    def _open_node(self, *, name_given: bool, claimed: int | None = None) -> None:
        kex = kazoo_errors()
        conflicts = 0
        lost: list[str] = []
        written: EncodedZnode | None = None
        epoch = claimed
        reads: dict[tuple[str, bytes], CursorState | str] = {}
        for attempt in range(_CONFLICT_RETRIES):
            content, stat = self._read(ledger_sizes=None)
            fallbacks: list[str] = []
            state, source = self._load_state(content, fallbacks, reads)
            ck = content.cursorkit
            previous_epoch = ck.owner_epoch if ck is not None else 0
            sequence = ck.sequence if ck is not None else 0
            if ck is not None and ck.cursor_name and not name_given:
                self._name = ck.cursor_name
            if self._read_only:
                self._version = stat.version
                break
            if epoch is None:  # claim first: the old owner stops writing once its watch sees it
                epoch = self._claim(previous_epoch)
                continue
            if previous_epoch > epoch:
                raise Fenced(
                    f"{self._who}: owner epoch {previous_epoch} took the cursor over while this store "
                    f"was opening it with epoch {epoch}",
                    owner_epoch=epoch,
                    current_epoch=previous_epoch,
                )
            if attempt > 1:
                time.sleep(0.002 * attempt)  # the old owner's last write is still landing
            self._epoch = epoch
            written = self._ownership_record(content, state, sequence + 1)
            data = written.data
            what = f"{self._where()}: take ownership"
            try:
                new = self._session.call(
                    self._client.set_async, self._path, data, stat.version, what=what, write=True
                )
            except kex.BadVersionError:
                conflicts += 1
                continue
            except kex.NoNodeError as e:
                raise FileNotFoundError(errno.ENOENT, "no cursor znode", str(self._location)) from e
            except InDoubt as e:
                check, check_stat = self._read(ledger_sizes=None)
                if check.cursorkit is None or check.cursorkit.owner != self._label:
                    if check_stat.version != stat.version:
                        conflicts += 1  # another writer's change landed: read it again
                        continue
                    lost.append(str(e))  # nothing landed: the connection, not another writer
                    if len(lost) >= _LOST_RETRIES:
                        raise StoreUnavailable(
                            f"{what}: ZooKeeper confirmed none of {len(lost)} tries of the "
                            f"{len(data):,}-byte write (last: {lost[-1]})"
                        ) from e
                    continue
                new = check_stat
            except kex.KazooException as e:
                raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
            self._version = new.version
            sequence += 1
            self._last_data = data
            break
        else:
            raise StoreUnavailable(
                f"{self._where()}: other writers changed the znode {conflicts} times while opening it"
                + (f" (and {len(lost)} writes went unconfirmed: {lost[-1]})" if lost else "")
            )
        if not self._read_only:
            self._watch_claims()
        left_out = (0, 0)
        if written is not None and not (ck is not None and ck.HasField("state")):
            left_out = (
                max(0, len(state.acked) - written.ranges_inline),
                max(0, len(state.batches) - written.batches_inline),
            )
        self._sequence = sequence
        self._state = state
        self._raw_state = None
        self._strings = dict(content.string_properties)
        self._ref = ck.state if ck is not None and ck.HasField("state") else None
        self._conflicts = conflicts
        self._report = ZkRecoveryReport(
            location=str(self._location),
            version=self._version,
            owner_epoch=self._epoch if not self._read_only else 0,
            previous_epoch=previous_epoch,
            previous_owner=ck.owner if ck is not None and ck.HasField("owner") else None,
            sequence=sequence,
            written_by="cursorkit" if ck is not None else "pulsar",
            state_source=source,
            state_object=self._ref.key if self._ref is not None else None,
            mark_delete=state.mark_delete,
            ranges=len(state.acked),
            ranges_recorded=max(ck.ranges_total if ck is not None else 0, len(state.acked)),
            batches=len(state.batches),
            batches_recorded=max(ck.batches_total if ck is not None else 0, len(state.batches)),
            properties=len(state.properties),
            cursor_properties=len(self._strings),
            compression=content.compression,
            conflicts=conflicts,
            znode_bytes=len(written.data) if written is not None else 0,
            written_compression=written.compression if written is not None else None,
            ranges_left_out=left_out[0],
            batches_left_out=left_out[1],
            fallbacks=tuple(fallbacks),
        )

    # -- state -------------------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """``zk://hosts/path``."""
        return str(self._location)

    @property
    def path(self) -> str:
        """The znode's path."""
        return self._path

    @property
    def report(self) -> ZkRecoveryReport:
        """What :meth:`open` found."""
        assert self._report is not None
        return self._report

    @property
    def sequence(self) -> int:
        """Write number of the znode's content this store last wrote or read."""
        return self._sequence

    @property
    def version(self) -> int:
        """The znode version this store's next write expects."""
        return self._version

    @property
    def owner_epoch(self) -> int:
        """This store's owner epoch (0: read-only)."""
        return 0 if self._read_only else self._epoch

    @property
    def fenced(self) -> bool:
        """Whether another owner has taken the znode over (every later write raises ``Fenced``)."""
        return self._fenced is not None or self._claimed > self._epoch

    @property
    def objects(self) -> ObjectStore | None:
        """The object store of the state objects, if any."""
        return self._objects

    @property
    def cursor_properties(self) -> ZkCursorProperties:
        """Pulsar's string ``cursorProperties`` of this cursor, durable in the znode on every change.

        The bucket delayed-delivery tracker keeps its bucket keys here, as Pulsar does.
        """
        return self._properties

    def _check_writable(self) -> None:
        if self._closed:
            raise InvalidArgument(f"{self._where()}: the store is closed")
        if self._read_only:
            raise InvalidArgument(f"{self._where()}: opened read-only")
        if self._watch_gen != self._session.generation:
            self._watch_claims()
        if self._fenced is None and self._claimed > self._epoch:
            self._fenced = Fenced(
                f"{self._who}: fenced: owner epoch {self._claimed} claimed the cursor; "
                f"this store's epoch is {self._epoch}",
                owner_epoch=self._epoch,
                current_epoch=self._claimed,
            )
        if self._fenced is not None:
            raise Fenced(
                str(self._fenced),
                owner_epoch=self._fenced.owner_epoch,
                current_epoch=self._fenced.current_epoch,
            )

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
                raise InvalidArgument(f"{self._where()}: the store is closed")
            state = self._state
            assert state is not None
            acked = state.acked
            report = self.report
            if (
                ledger_sizes is not None
                and report.state_source == "znode"
                and not report.ranges_left_out
                and self._last_data
            ):
                content = read_znode(self._last_data, self._where(), ledger_sizes)
                if content.state is not None:
                    acked = content.state.acked
            cursor = Cursor(
                state.mark_delete,
                name=self._name,
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
                raise CorruptSnapshot(f"{self._where()}: {e}") from e
            cursor.clear_dirty()
            self._bound = cursor
            self._bound_mutations = cursor.mutations
            self._bound_props = dict(cursor.properties)
            return cursor

    # -- flush -------------------------------------------------------------------------------------

    def flush(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> ZkFlushResult:
        """Writes the cursor's state to the znode (and a state object if needed); durable on return.

        Skips the write when nothing changed since the last flush of this cursor, unless ``full``
        or ``force``. Raises ``Fenced`` when another owner holds the znode, ``PersistFailed`` when
        ZooKeeper or the object store did not take the write (the previous flush stays recoverable).
        """
        return self.flush_async(cursor, full=full, force=force).result()

    def flush_async(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> _Pending:
        """Sends the flush and returns at once; ``.result()`` waits for ZooKeeper's answer.

        Flushes of many stores sent this way travel together on the session (one round trip
        for all); flushes of one store are still applied in order.
        """
        pending = self._prepare(cursor, full=full, force=force)
        self._send(pending)
        return pending

    def _prepare(self, cursor: Cursor, *, full: bool, force: bool) -> _Pending:
        """Encodes a flush (and stores its state object, if any); :meth:`_send` sends it."""
        if not isinstance(cursor, Cursor):
            raise InvalidInputType(f"cursor must be a Cursor, got {type(cursor).__name__}")
        started = time.perf_counter()
        with self._lock:
            self._check_writable()
            self._settle_inflight()
            props = persist.checked_properties(cursor.properties, self._who) if cursor.properties else {}
            if (
                not (full or force)
                and cursor is self._bound
                and cursor.mutations == self._bound_mutations
                and props == self._bound_props
            ):
                done = ZkFlushResult(
                    skipped=True,
                    bytes_written=0,
                    znode_bytes=0,
                    object_bytes=0,
                    version=self._version,
                    sequence=self._sequence,
                    ranges_total=cursor.non_contiguous_deleted_ranges,
                    ranges_inline=0,
                    ranges_cut=0,
                    batches_cut=0,
                    conflicts=0,
                    duration_s=time.perf_counter() - started,
                )
                return _Pending(
                    self,
                    None,
                    data=b"",
                    sequence=self._sequence,
                    ref=None,
                    cursor=cursor,
                    mutations=cursor.mutations,
                    properties=props,
                    sizes=(0, 0, 0, 0, 0),
                    started=started,
                    skipped=done,
                )
            md, acked, batches, mutations, _ = self._snapshot(cursor, blobs=False)
            sequence = self._next_sequence()
            encoded = self._encode(md, acked, batches, props, cursor, sequence, None)
            ref: zpb.StateObject | None = None
            object_bytes = 0
            if not encoded.complete and self._objects is not None:
                md, acked, batches, mutations, blobs = self._snapshot(cursor, blobs=True)
                ref, object_bytes = self._put_object(md, blobs, batches, props, sequence)
                encoded = self._encode(md, acked, batches, props, cursor, sequence, ref)
            data = encoded.data
            ranges_cut = 0 if ref is not None else encoded.ranges_total - encoded.ranges_inline
            batches_cut = 0 if ref is not None else encoded.batches_total - encoded.batches_inline
            if ranges_cut or batches_cut:
                cursor.truncations.record(
                    persist.PersistResult(
                        "managed_cursor_info",
                        data,
                        encoded.ranges_total,
                        encoded.ranges_inline,
                        encoded.batches_total,
                        encoded.batches_inline,
                    )
                )
            pending = _Pending(
                self,
                None,
                data=data,
                sequence=sequence,
                ref=ref,
                cursor=cursor,
                mutations=mutations,
                properties=props,
                sizes=(object_bytes, encoded.ranges_total, encoded.ranges_inline, ranges_cut, batches_cut),
                started=started,
                compression=encoded.compression,
            )
            self._inflight = pending
            return pending

    def _send(self, pending: _Pending) -> None:
        """Sends a prepared flush with the version this store holds (nothing to send when skipped)."""
        if pending.outcome is not None:
            return
        try:
            pending.call = self._client.set_async(self._path, pending.data, self._version)
        except Exception as e:  # noqa: BLE001 - the flush's result() reports it
            pending.not_sent(e)

    def _encode(
        self,
        md: Position,
        acked: RangeSet,
        batches: list[persist.BatchRow],
        props: dict[str, int],
        cursor: Cursor,
        sequence: int,
        ref: zpb.StateObject | None,
    ) -> EncodedZnode:
        return encode_znode(
            mark_delete=md,
            acked=acked,
            batches=batches,
            properties=props,
            string_properties=self._strings,
            cursorkit=self._record(sequence, ref),
            limits=cursor.limits,
            max_bytes=self._max_bytes,
            last_active_ms=_now_ms(),
            who=self._who,
        )

    def _snapshot(
        self, cursor: Cursor, *, blobs: bool
    ) -> tuple[Position, RangeSet, list[persist.BatchRow], int, list[tuple[int, bytes]]]:
        """Mark-delete, acked set, partial batches and mutation count from one moment of the cursor.

        ``blobs``: also each ledger's compact bitmap (for a state object), from one call into Rust.
        """
        if not blobs:
            for _ in range(8):
                before = cursor.mutations
                md = cursor.mark_delete_position
                acked = cursor.individually_deleted
                batches = cursor.batches()
                if cursor.mutations == before:
                    return md, acked, batches, before, []
        md, ledgers, _live, batches, mutations = cursor.flush_state(dirty_only=False, clear_dirty=False)
        kept = [(lid, blob) for lid, blob in ledgers if blob is not None]
        acked = RangeSet(cursor.pulsar_quirks)
        for lid, blob in kept:
            acked.set_ledger_bytes(lid, blob)
        return md, acked, batches, mutations, kept

    def _put_object(
        self,
        md: Position,
        blobs: list[tuple[int, bytes]],
        batches: list[persist.BatchRow],
        props: dict[str, int],
        sequence: int,
    ) -> tuple[zpb.StateObject, int]:
        """Stores the whole state as a new immutable object; the znode write that names it comes after."""
        assert self._objects is not None
        body = state_object(
            path=self._path,
            epoch=self._epoch,
            sequence=sequence,
            mark_delete=md,
            blobs=blobs,
            batches=batches,
            properties=props,
        )
        key = object_key(self._object_dir, self._epoch, sequence)
        self._objects.put(key, body)
        ref = zpb.StateObject(key=key, size=len(body), sha256=hashlib.sha256(body).digest())
        return ref, len(body)

    def _drop_object(self, ref: zpb.StateObject | None) -> None:
        """Deletes a state object no znode names (best effort: the collector finds what is left).

        Only an object of this cursor's own directory is ever deleted, whatever key a znode names.
        """
        if ref is None or self._objects is None:
            return
        if ref.key.rpartition("/")[0] != self._object_dir or object_id(ref.key) is None:
            return
        try:
            self._objects.delete(ref.key)
        except (OSError, InvalidArgument):
            self._gc_due = True

    def _settle_inflight(self) -> None:
        pending = self._inflight
        if pending is not None:
            with contextlib.suppress(Exception):  # its own caller gets the error from result()
                pending.result()

    def _landed(
        self,
        answer: Callable[[], ZnodeStat],
        data: bytes,
        sequence: int,
        ref: zpb.StateObject | None,
        what: str,
    ) -> tuple[ZnodeStat, int]:
        """The znode's stat once the versioned write ``answer`` waits for has landed, and its conflicts.

        Conflicts are settled by re-reading; every failure is ``PersistFailed`` (or ``Fenced``).
        """
        kex = kazoo_errors()
        try:
            return answer(), 0
        except kex.BadVersionError:
            return self._write_over_conflict(data, sequence, ref, what)
        except kex.NoNodeError as e:
            self._drop_object(ref)
            raise PersistFailed(errno.ENOENT, f"{what}: the znode was deleted (cursor removed)") from e
        except InDoubt as e:
            self._gc_due = True
            raise PersistFailed(
                errno.EIO, f"{what}: outcome unknown ({e}); the previous flush stays recoverable"
            ) from e
        except kex.KazooException as e:
            self._drop_object(ref)
            raise PersistFailed(errno.EIO, f"{what} refused ({type(e).__name__} {e})") from e

    def _settle(self, pending: _Pending) -> ZkFlushResult:
        """Waits for a sent flush and resolves a version conflict; called with the lock held."""
        call = pending.call
        assert call is not None
        what = f"{self._where()}: flush"
        stat, conflicts = self._landed(
            lambda: self._session.wait(call, what, write=True),
            pending.data,
            pending.sequence,
            pending.ref,
            what,
        )
        self._confirm(stat.version, pending.sequence, pending.data, pending.ref, replace_ref=True)
        if pending.cursor is not None:
            self._bound = pending.cursor
            self._bound_mutations = pending.mutations
            self._bound_props = pending.properties
        object_bytes, total, inline, ranges_cut, batches_cut = pending.sizes
        return ZkFlushResult(
            skipped=False,
            bytes_written=len(pending.data) + object_bytes,
            znode_bytes=len(pending.data),
            object_bytes=object_bytes,
            version=stat.version,
            sequence=pending.sequence,
            ranges_total=total,
            ranges_inline=inline,
            ranges_cut=ranges_cut,
            batches_cut=batches_cut,
            conflicts=conflicts,
            duration_s=time.perf_counter() - pending.started,
            compression=pending.compression,
        )

    def _write_over_conflict(
        self, data: bytes, sequence: int, ref: zpb.StateObject | None, what: str
    ) -> tuple[ZnodeStat, int]:
        """After a version conflict: fenced by a newer owner, our own write landed, or write again."""
        kex = kazoo_errors()
        conflicts = 0
        for _ in range(_CONFLICT_RETRIES):
            conflicts += 1
            try:
                content, stat = self._read(ledger_sizes=None)
            except StoreUnavailable as e:
                self._gc_due = True
                raise PersistFailed(errno.EIO, f"{what}: conflict not settled ({e})") from e
            except FileNotFoundError as e:
                self._drop_object(ref)
                raise PersistFailed(errno.ENOENT, f"{what}: the znode was deleted (cursor removed)") from e
            except CorruptSnapshot:
                content, stat = None, None
                try:
                    _data, stat = self._session.call(self._client.get_async, self._path, what=what)
                except (StoreUnavailable, kex.KazooException) as e:
                    raise PersistFailed(errno.EIO, f"{what}: conflict not settled ({e})") from e
            ck = content.cursorkit if content is not None else None
            epoch = ck.owner_epoch if ck is not None else 0
            if epoch > self._epoch:
                self._drop_object(ref)
                assert ck is not None
                self._fenced = Fenced(
                    f"{self._where()}: fenced: owner epoch {ck.owner_epoch} ({ck.owner}) took the cursor "
                    f"over from this store's epoch {self._epoch}; nothing of this write was published",
                    owner_epoch=self._epoch,
                    current_epoch=ck.owner_epoch,
                )
                raise Fenced(str(self._fenced), owner_epoch=self._epoch, current_epoch=ck.owner_epoch)
            if (
                ck is not None
                and epoch == self._epoch
                and ck.sequence == sequence
                and ck.owner == self._label
            ):
                return stat, conflicts  # our own write had landed (its reply was lost)
            self._gc_due = True
            try:
                new = self._session.call(
                    self._client.set_async, self._path, data, stat.version, what=what, write=True
                )
            except kex.BadVersionError:
                continue
            except InDoubt as e:
                raise PersistFailed(errno.EIO, f"{what}: outcome unknown ({e})") from e
            except kex.KazooException as e:
                raise PersistFailed(errno.EIO, f"{what} refused ({type(e).__name__} {e})") from e
            self._conflicts += 1
            return new, conflicts
        raise PersistFailed(
            errno.EAGAIN, f"{what}: other writers kept changing the znode ({conflicts} tries)"
        )

    def _confirm(
        self, version: int, sequence: int, data: bytes, ref: zpb.StateObject | None, *, replace_ref: bool
    ) -> None:
        self._version = version
        self._sequence = sequence
        self._last_data = data
        if replace_ref:
            previous = self._ref
            self._ref = ref
            if previous is not None and (ref is None or previous.key != ref.key):
                self._drop_object(previous)
        if self._gc_due:
            self.collect_garbage()

    def collect_garbage(self) -> int:
        """Deletes state objects nothing can publish any more; returns how many (best effort).

        Kept: the one the znode names, every object of a newer owner, and this owner's objects
        from writes not yet settled.
        """
        with self._lock:
            if self._objects is None or self._read_only:
                return 0
            current = self._ref.key if self._ref is not None else None
            try:
                listed = self._objects.list(self._object_dir)
            except (StoreUnavailable, InvalidArgument):
                return 0
            removed = 0
            for item in listed:
                found = object_id(item.key)
                if item.key == current or found is None:
                    continue
                epoch, sequence = found
                if epoch > self._epoch or (epoch == self._epoch and sequence >= self._sequence):
                    continue
                try:
                    removed += self._objects.delete(item.key)
                except (OSError, InvalidArgument):
                    return removed
            self._gc_due = False
            return removed

    # -- cursor properties -------------------------------------------------------------------------

    def _write_strings(self, new: dict[str, str]) -> None:
        """Rewrites the znode's cursorProperties, the ack state untouched; durable on return."""
        with self._lock:
            self._check_writable()
            self._settle_inflight()
            info = ml.ManagedCursorInfo.FromString(cursor_info_bytes(self._last_data, self._where()))
            info.ClearField("cursorProperties")
            for key, value in new.items():
                info.cursorProperties.add(name=key, value=value)
            sequence = self._next_sequence()
            ck = info.cursorkit
            ck.sequence = sequence
            ck.owner_epoch = self._epoch
            ck.owner = self._label
            ck.written_at_ms = _now_ms()
            raw = info.SerializeToString()
            data, _codec = fit_record(raw, self._max_bytes)
            if len(data) > self._max_bytes:
                raise InvalidArgument(
                    f"{self._where()}: cursor properties would make the znode {len(raw):,} bytes "
                    f"({len(data):,} compressed; budget max_znode_bytes {self._max_bytes:,})"
                )
            what = f"{self._where()}: cursor properties"
            version = self._version
            stat, _ = self._landed(
                lambda: self._session.call(
                    self._client.set_async, self._path, data, version, what=what, write=True
                ),
                data,
                sequence,
                None,
                what,
            )
            self._confirm(stat.version, sequence, data, self._ref, replace_ref=False)
            self._strings = dict(new)

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Waits for a flush in flight, then releases the ZooKeeper session (nothing new is written)."""
        with self._lock:
            if self._closed:
                return
            self._settle_inflight()
            self._release()

    def _release(self) -> None:
        self._closed = True
        self._session.release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"epoch {self._epoch}, version {self._version}"
        return f"ZkCursorStore({str(self._location)!r}, name={self._name!r}, {state})"


class ZkCursorProperties(MutableMapping[str, str]):
    """Pulsar's ``cursorProperties`` of a ZooKeeper cursor store: each change one fenced znode write.

    Implements the ``CursorProperties`` contract the bucket tracker needs (``apply`` of several keys
    as one durable step); a failed change leaves the map as it was.
    """

    def __init__(self, store: ZkCursorStore) -> None:
        self._store = store

    def _data(self) -> dict[str, str]:
        return self._store._strings

    def __getitem__(self, key: str) -> str:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._data()))

    def __len__(self) -> int:
        return len(self._data())

    def __contains__(self, key: object) -> bool:
        return key in self._data()

    def __setitem__(self, key: str, value: str) -> None:
        self.apply({key: value})

    def __delitem__(self, key: str) -> None:
        if key not in self._data():
            raise KeyError(key)
        self.apply({}, [key])

    def apply(self, set_items: Mapping[str, str], delete_keys: Iterable[str] = ()) -> None:
        """Sets and deletes keys in one durable znode write."""
        new = dict(self._data())
        for key in delete_keys:
            if not isinstance(key, str):
                raise InvalidInputType(f"cursor property key must be a str, got {type(key).__name__}")
            new.pop(key, None)
        items: list[tuple[object, object]] = list(set_items.items())
        for k, v in items:
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidInputType("cursor property keys and values must be str")
            new[k] = v
        if new != self._data():
            self._store._write_strings(new)

    def clear(self) -> None:
        """Deletes every key in one durable write."""
        self.apply({}, list(self._data()))

    def __repr__(self) -> str:
        return f"ZkCursorProperties({self._store.location!r}, {len(self)} keys)"


def _send_together(prepared: list[_Pending]) -> None:
    """Sends prepared flushes, those of each ZooKeeper session queued together.

    Then waits for the last of each session (ZooKeeper answers a session's requests in order), so
    the caller collects ready results instead of waking once per answer.
    """
    by_session: dict[int, list[_Pending]] = {}
    for p in prepared:
        if p.outcome is None and p.call is None:
            by_session.setdefault(id(p.store._session), []).append(p)
    for group in by_session.values():
        session = group[0].store._session
        writes = [(p.store._path, p.data, p.store._version) for p in group]
        try:
            calls = session.set_many(writes)
        except Exception as e:  # noqa: BLE001 - each flush reports it
            for p in group:
                p.not_sent(e)
            continue
        for p, call in zip(group, calls, strict=True):
            p.call = call
    for group in by_session.values():
        last = group[-1]
        if last.call is not None:
            last.call.wait(last.store._session.operation_timeout)


def flush_many(items: Iterable[tuple[ZkCursorStore, Cursor]]) -> list[ZkFlushResult | CursorkitError]:
    """Flushes many cursors with their writes in flight together; one result or error per item.

    The errors are those :meth:`ZkCursorStore.flush` raises (``Fenced``, ``PersistFailed``, a closed
    store's ``InvalidArgument``...), returned in place so one cursor's failure does not hide the rest.
    """
    pending: list[_Pending | CursorkitError] = []
    for store, cursor in items:  # every flush encoded first, then all sent back to back
        try:
            pending.append(store._prepare(cursor, full=False, force=False))
        except CursorkitError as e:
            pending.append(e)
    _send_together([p for p in pending if isinstance(p, _Pending)])
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
