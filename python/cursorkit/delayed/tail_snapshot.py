"""``TailSnapshot``: the tail persisted (beyond Pulsar), so a restart recovers it rather than replay it."""

from __future__ import annotations

from functools import partial

from cursorkit.delayed.bucket import MUTABLE_TAIL_PROPERTY, Int64Array
from cursorkit.delayed.bucket_props import BucketProperties
from cursorkit.delayed.snapshot_io import SnapshotIO


class TailSnapshot:
    """The id of the tail's current snapshot, recorded in ``MUTABLE_TAIL_PROPERTY``."""

    def __init__(self, io: SnapshotIO, props: BucketProperties) -> None:
        self._io = io
        self._props = props
        self.snapshot_id: int | None = None

    def write(self, ts: Int64Array, ls: Int64Array, es: Int64Array, key: str) -> None:
        """Replaces the tail's snapshot by one of these indexes (none: no snapshot); a job."""
        old = self.snapshot_id
        if len(ts):
            segs = self._io.cut(ts, ls, es)
            new_id, _ = self._io.write(segs, key)
            self._props.apply({MUTABLE_TAIL_PROPERTY: str(new_id)})
            self.snapshot_id = new_id
        else:
            self._props.apply({}, [MUTABLE_TAIL_PROPERTY])
            self.snapshot_id = None
        if old is not None:
            self._io.delete_quietly(old)

    def drop(self) -> None:
        """Deletes the tail's snapshot, then its property (a cleared backlog)."""
        tail = self.snapshot_id
        if tail is not None:
            self._io.timed("delete", partial(self._io.storage.delete_bucket_snapshot, tail))
            self._props.apply({}, [MUTABLE_TAIL_PROPERTY])
            self.snapshot_id = None
