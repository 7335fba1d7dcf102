"""The cursor znode one store writes: versioned, fenced writes, and their conflicts settled by re-reading.

Every write names the version it expects. A version conflict is never given up on: a newer owner
epoch in the znode fences this store, the store's own earlier write (a reply lost with the
connection) is recognised, and anything else is overwritten by the owner.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cursorkit.ackstate.store.zookeeper.claims import CONFLICT_RETRIES
from cursorkit.ackstate.store.zookeeper.state_objects import StateObjects
from cursorkit.ackstate.store.zookeeper.znode import ZnodeContent, read_znode
from cursorkit.errors import CorruptSnapshot, Fenced, PersistFailed, StoreUnavailable
from cursorkit.proto import cursor_znode_pb2 as zpb
from cursorkit.stores.location import ZkLocation
from cursorkit.stores.zookeeper import InDoubt, ZkSession, kazoo_errors

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

__all__ = ["CursorZnode", "now_ms", "owner_label"]


def owner_label(label: str | None) -> str:
    """An owner's label for operators: the caller's, with host, process and a random tag."""
    base = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    return f"{label} ({base})" if label else base


def now_ms() -> int:
    """Wall-clock milliseconds, as the znode's timestamps are kept."""
    return time.time_ns() // 1_000_000


class CursorZnode:
    """The znode as this store last saw it (version, write number, bytes) and its versioned writes.

    ``epoch`` is this store's owner epoch, ``ref`` the state object the znode names (if any),
    ``fenced`` the ``Fenced`` error once another owner took the znode over.
    """

    def __init__(
        self, location: ZkLocation, session: ZkSession, *, name: str, label: str, objects: StateObjects | None
    ) -> None:
        self.location = location
        self.session = session
        self.path = location.path
        self.who = f"cursor znode {location}"
        self.name = name
        self.label = label
        self.objects = objects
        self.epoch = 0
        self.version = -1
        self.sequence = 0
        self.last_data = b""
        self.ref: zpb.StateObject | None = None
        self.fenced: Fenced | None = None
        self.conflicts = 0
        self._sent = 0  # highest write number handed out: never reused, even by a write that failed

    def next_sequence(self) -> int:
        """A write number above every one sent so far (a write in doubt may still land with its own)."""
        self._sent = max(self._sent, self.sequence) + 1
        return self._sent

    def record(self, sequence: int, ref: zpb.StateObject | None = None) -> zpb.CursorkitState:
        """Cursorkit's record in the znode for write ``sequence`` (owner, epoch, the state object)."""
        ck = zpb.CursorkitState(
            format_version=1,
            owner_epoch=self.epoch,
            sequence=sequence,
            owner=self.label,
            written_at_ms=now_ms(),
            cursor_name=self.name,
        )
        if ref is not None:
            ck.state.CopyFrom(ref)
        return ck

    def read(self, ledger_sizes: Mapping[int, int] | None = None) -> tuple[ZnodeContent, ZnodeStat]:
        """The znode's content and stat; ``FileNotFoundError`` when there is none."""
        kex = kazoo_errors()
        what = f"{self.who}: read"
        try:
            data, stat = self.session.call(self.session.client.get_async, self.path, what=what)
        except kex.NoNodeError as e:
            raise FileNotFoundError(errno.ENOENT, "no cursor znode", str(self.location)) from e
        except kex.KazooException as e:
            raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
        return read_znode(data, self.who, ledger_sizes), stat

    def set(self, data: bytes, version: int, what: str) -> ZnodeStat:
        """One versioned write, waited for (kazoo's errors and ``InDoubt`` pass through)."""
        stat: ZnodeStat = self.session.call(
            self.session.client.set_async, self.path, data, version, what=what, write=True
        )
        return stat

    def raise_if_fenced(self, claimed: int) -> None:
        """Raises ``Fenced`` once a newer owner claimed the cursor (``claimed``) or took the znode."""
        if self.fenced is None and claimed > self.epoch:
            self.fenced = Fenced(
                f"{self.who}: fenced: owner epoch {claimed} claimed the cursor; "
                f"this store's epoch is {self.epoch}",
                owner_epoch=self.epoch,
                current_epoch=claimed,
            )
        if self.fenced is not None:
            raise Fenced(
                str(self.fenced), owner_epoch=self.fenced.owner_epoch, current_epoch=self.fenced.current_epoch
            )

    def landed(
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
            self._drop(ref)
            raise PersistFailed(errno.ENOENT, f"{what}: the znode was deleted (cursor removed)") from e
        except InDoubt as e:
            self._collect_later()
            raise PersistFailed(
                errno.EIO, f"{what}: outcome unknown ({e}); the previous flush stays recoverable"
            ) from e
        except kex.KazooException as e:
            self._drop(ref)
            raise PersistFailed(errno.EIO, f"{what} refused ({type(e).__name__} {e})") from e

    def _write_over_conflict(
        self, data: bytes, sequence: int, ref: zpb.StateObject | None, what: str
    ) -> tuple[ZnodeStat, int]:
        """After a version conflict: fenced by a newer owner, our own write landed, or write again."""
        kex = kazoo_errors()
        conflicts = 0
        for _ in range(CONFLICT_RETRIES):
            conflicts += 1
            try:
                content, stat = self.read()
            except StoreUnavailable as e:
                self._collect_later()
                raise PersistFailed(errno.EIO, f"{what}: conflict not settled ({e})") from e
            except FileNotFoundError as e:
                self._drop(ref)
                raise PersistFailed(errno.ENOENT, f"{what}: the znode was deleted (cursor removed)") from e
            except CorruptSnapshot:
                content = None
                try:
                    _data, stat = self.session.call(self.session.client.get_async, self.path, what=what)
                except (StoreUnavailable, kex.KazooException) as e:
                    raise PersistFailed(errno.EIO, f"{what}: conflict not settled ({e})") from e
            ck = content.cursorkit if content is not None else None
            epoch = ck.owner_epoch if ck is not None else 0
            if ck is not None and epoch > self.epoch:
                self._drop(ref)
                self.fenced = Fenced(
                    f"{self.who}: fenced: owner epoch {ck.owner_epoch} ({ck.owner}) took the cursor "
                    f"over from this store's epoch {self.epoch}; nothing of this write was published",
                    owner_epoch=self.epoch,
                    current_epoch=ck.owner_epoch,
                )
                raise Fenced(str(self.fenced), owner_epoch=self.epoch, current_epoch=ck.owner_epoch)
            if ck is not None and epoch == self.epoch and ck.sequence == sequence and ck.owner == self.label:
                return stat, conflicts  # our own write had landed (its reply was lost)
            self._collect_later()
            try:
                new = self.set(data, stat.version, what)
            except kex.BadVersionError:
                continue
            except InDoubt as e:
                raise PersistFailed(errno.EIO, f"{what}: outcome unknown ({e})") from e
            except kex.KazooException as e:
                raise PersistFailed(errno.EIO, f"{what} refused ({type(e).__name__} {e})") from e
            self.conflicts += 1
            return new, conflicts
        raise PersistFailed(
            errno.EAGAIN, f"{what}: other writers kept changing the znode ({conflicts} tries)"
        )

    def confirm(
        self, version: int, sequence: int, data: bytes, ref: zpb.StateObject | None, *, replace_ref: bool
    ) -> None:
        """Records a write that landed; with ``replace_ref``, the state object it names replaces the last."""
        self.version = version
        self.sequence = sequence
        self.last_data = data
        if replace_ref:
            previous = self.ref
            self.ref = ref
            if previous is not None and (ref is None or previous.key != ref.key):
                self._drop(previous)
        if self.objects is not None and self.objects.collect_due:
            self.collect()

    def collect(self) -> int:
        """Deletes the state objects nothing can publish any more; returns how many."""
        if self.objects is None:
            return 0
        current = self.ref.key if self.ref is not None else None
        return self.objects.collect(current, self.epoch, self.sequence)

    def _drop(self, ref: zpb.StateObject | None) -> None:
        if self.objects is not None:
            self.objects.drop(ref)

    def _collect_later(self) -> None:
        if self.objects is not None:
            self.objects.collect_due = True
