"""A cursor's state objects: what its znode cannot hold, as immutable objects the znode names.

Each object is written before the znode write that names it, under the cursor's own directory
(``cursors/<sha256 of the znode path>``) with its owner epoch and write number in the key. Only
objects of that directory are ever deleted, whatever key a znode names; one nothing can publish any
more is deleted at once or by :meth:`StateObjects.collect` later.
"""

from __future__ import annotations

import hashlib

from cursorkit._core import Position
from cursorkit.ackstate.persist import BatchRow
from cursorkit.ackstate.store.zookeeper.znode import (
    CursorState,
    object_id,
    object_key,
    read_state_object,
    state_object,
)
from cursorkit.errors import CorruptSnapshot, InvalidArgument, StoreUnavailable
from cursorkit.proto import cursor_znode_pb2 as zpb
from cursorkit.stores.objects import ObjectStore

__all__ = ["StateObjects"]


class StateObjects:
    """The state objects of one cursor znode on an object store."""

    def __init__(self, store: ObjectStore, znode_path: str) -> None:
        self.store = store
        self.znode_path = znode_path
        self.directory = "cursors/" + hashlib.sha256(znode_path.encode()).hexdigest()[:32]
        self.collect_due = False
        """Whether an object may be left that nothing names (a delete failed, a write is in doubt)."""

    def read(self, ref: zpb.StateObject, where: str) -> CursorState | str:
        """The state in the object ``ref`` names, or why it cannot be used."""
        epoch, sequence = object_id(ref.key) or (-1, -1)
        try:
            data = self.store.get(ref.key)
            return read_state_object(
                data, ref, path=self.znode_path, epoch=epoch, sequence=sequence, where=where
            )
        except FileNotFoundError:
            return "is missing"
        except CorruptSnapshot as e:
            return f"is damaged ({e})"

    def put(
        self,
        *,
        epoch: int,
        sequence: int,
        mark_delete: Position,
        blobs: list[tuple[int, bytes]],
        batches: list[BatchRow],
        properties: dict[str, int],
    ) -> tuple[zpb.StateObject, int]:
        """Stores a whole state as a new object; returns the reference a znode names it by, and its size."""
        body = state_object(
            path=self.znode_path,
            epoch=epoch,
            sequence=sequence,
            mark_delete=mark_delete,
            blobs=blobs,
            batches=batches,
            properties=properties,
        )
        key = object_key(self.directory, epoch, sequence)
        self.store.put(key, body)
        ref = zpb.StateObject(key=key, size=len(body), sha256=hashlib.sha256(body).digest())
        return ref, len(body)

    def drop(self, ref: zpb.StateObject | None) -> None:
        """Deletes an object no znode names (best effort: :meth:`collect` finds what is left)."""
        if ref is None or ref.key.rpartition("/")[0] != self.directory or object_id(ref.key) is None:
            return
        try:
            self.store.delete(ref.key)
        except (OSError, InvalidArgument):
            self.collect_due = True

    def collect(self, current: str | None, epoch: int, sequence: int) -> int:
        """Deletes the objects nothing can publish any more; returns how many (best effort).

        Kept: ``current`` (the one the znode names), every object of a newer owner, and this owner's
        (``epoch``) objects from write ``sequence`` on, which writes not yet settled may still publish.
        """
        try:
            listed = self.store.list(self.directory)
        except (StoreUnavailable, InvalidArgument):
            return 0
        removed = 0
        for item in listed:
            found = object_id(item.key)
            if item.key == current or found is None:
                continue
            item_epoch, item_sequence = found
            if item_epoch > epoch or (item_epoch == epoch and item_sequence >= sequence):
                continue
            try:
                removed += self.store.delete(item.key)
            except (OSError, InvalidArgument):
                return removed
        self.collect_due = False
        return removed
