"""``Damage``: what damaged or vanished snapshots cost a tracker, and their quarantine.

A lost bucket's ledgers are owed a replay from the cursor (``take``); a damaged snapshot is kept for
inspection under ``#cursorkit.delayed.damaged_<id>`` until ``discard`` deletes it.
"""

from __future__ import annotations

import contextlib

from cursorkit.delayed.bucket import DAMAGED_PROPERTY_PREFIX, parse_id
from cursorkit.delayed.bucket_props import BucketProperties
from cursorkit.delayed.recovery_report import RecoveryReport
from cursorkit.delayed.snapshot_io import SnapshotIO
from cursorkit.errors import CorruptSnapshot


class Damage:
    """The ledger ranges owed a replay, and the report damage is written into."""

    def __init__(self, report: RecoveryReport, props: BucketProperties, io: SnapshotIO) -> None:
        self.report = report
        self._props = props
        self._io = io
        self._replay: list[tuple[int, int]] = []

    def owe(self, start_ledger_id: int, end_ledger_id: int) -> None:
        """Ledgers ``start..end`` (inclusive) must be replayed from the cursor."""
        self._replay.append((start_ledger_id, end_ledger_id))

    def take(self) -> list[tuple[int, int]]:
        """The ranges owed since the last call (callers hold the tracker's lock)."""
        taken, self._replay = self._replay, []
        return taken

    def quarantine(self, key: str, bucket_id: int) -> None:
        """Moves a damaged bucket's property out of Pulsar's namespace; the snapshot stays."""
        drop = [key] if self._props.store.get(key) == str(bucket_id) else []
        self._props.apply({f"{DAMAGED_PROPERTY_PREFIX}{bucket_id}": key}, drop)
        self.report.quarantined.append(bucket_id)

    def discard(self) -> list[int]:
        """Deletes the snapshots kept for inspection and their properties; returns their ids."""
        doomed = []
        for k in list(self._props.store):
            if k.startswith(DAMAGED_PROPERTY_PREFIX):
                with contextlib.suppress(CorruptSnapshot):
                    doomed.append((k, parse_id(k[len(DAMAGED_PROPERTY_PREFIX) :], "damaged snapshot")))
        for key, bucket_id in doomed:
            if self._io.delete_quietly(bucket_id):
                self._props.apply({}, [key])
        return [bucket_id for _, bucket_id in doomed]
