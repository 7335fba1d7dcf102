"""Claims on a cursor: owner epochs in a claim znode that owners watch, so a new owner fences the old.

The claim znode (``<owners root><cursor path>``, outside Pulsar's ``/managed-ledgers``) holds nothing
but the newest owner epoch and its owner's label. An opener claims first; an owner that sees a newer
claim stops writing at once, so a new owner never has to out-race a busy old one. The fencing itself
is the versioned write of the epoch into the cursor znode (:mod:`.node`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from cursorkit.errors import StoreUnavailable
from cursorkit.stores.zookeeper import InDoubt, ZkSession, kazoo_errors

if TYPE_CHECKING:
    from kazoo.interfaces import IAsyncResult

__all__ = ["CONFLICT_RETRIES", "DEFAULT_OWNERS_ROOT", "Claims"]

DEFAULT_OWNERS_ROOT = "/cursorkit/owners"
"""Where claim znodes live: ``<root><cursor path>``, outside Pulsar's ``/managed-ledgers``."""
CONFLICT_RETRIES = 16
"""Versioned writes retried against other writers before a claim or a write gives up."""
_CLAIM = struct.Struct(">Q")


class Claims:
    """One cursor's claim znode: claiming an epoch, and a watch that keeps :attr:`claimed` current."""

    def __init__(self, session: ZkSession, path: str, label: str, who: str) -> None:
        self.path = path
        self.claimed = 0
        """The highest epoch any opener has claimed, as the watch saw it."""
        self._session = session
        self._label = label
        self._who = who
        self._armed_in = -1  # the session generation the watch was armed in (-1: not armed)
        self._stopped = False

    def read(self) -> tuple[int, int | None]:
        """The epoch in the claim znode and its version (``0, None`` when there is none)."""
        kex = kazoo_errors()
        what = f"{self._who}: read claim"
        try:
            data, stat = self._session.call(self._session.client.get_async, self.path, what=what)
        except kex.NoNodeError:
            return 0, None
        except kex.KazooException as e:
            raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
        return (_CLAIM.unpack_from(data)[0] if len(data) >= _CLAIM.size else 0), stat.version

    def claim(self, floor: int) -> int:
        """Claims the cursor: an epoch above ``floor`` and every earlier claim, written in the claim znode."""
        kex = kazoo_errors()
        client = self._session.client
        what = f"{self._who}: claim"
        for _ in range(CONFLICT_RETRIES):
            current, version = self.read()
            epoch = max(current, floor) + 1
            data = _CLAIM.pack(epoch) + self._label.encode()
            try:
                if version is None:
                    self._session.call(
                        client.create_async, self.path, data, None, False, False, True, what=what, write=True
                    )
                else:
                    self._session.call(client.set_async, self.path, data, version, what=what, write=True)
            except (kex.NodeExistsError, kex.BadVersionError):
                continue
            except InDoubt:
                again, _ = self.read()
                if again != epoch:
                    continue
            except kex.KazooException as e:
                raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
            return epoch
        raise StoreUnavailable(f"{what}: other openers kept claiming the cursor ({CONFLICT_RETRIES} tries)")

    def watch(self) -> None:
        """Arms a one-shot watch on the claim znode: a newer claim shows in :attr:`claimed` at once.

        Nothing here blocks: the read and the re-arm are asynchronous.
        """
        self._armed_in = self._session.generation
        try:
            result = self._session.client.get_async(self.path, watch=self._changed)
        except Exception:  # noqa: BLE001 - not connected: armed again before the next write
            self._armed_in = -1
            return
        result.rawlink(self._read_done)

    def keep_watching(self) -> None:
        """Arms the watch again when it was lost with an earlier session (called before every write)."""
        if self._armed_in != self._session.generation:
            self.watch()

    def stop(self) -> None:
        """Stops re-arming the watch (the store is closing)."""
        self._stopped = True

    def _changed(self, _event: object) -> None:
        self._armed_in = -1
        if not self._stopped:
            self.watch()

    def _read_done(self, result: IAsyncResult) -> None:
        if not result.successful():
            self._armed_in = -1  # no claim znode (or no answer): no watch is set
            return
        data, _stat = result.value
        if len(data) >= _CLAIM.size:
            self.claimed = max(self.claimed, _CLAIM.unpack_from(data)[0])
