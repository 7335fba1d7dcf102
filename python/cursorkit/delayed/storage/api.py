"""What the bucket tracker needs of a snapshot store: Pulsar's ``BucketSnapshotStorage``, synchronous.

Every storage (files, objects) implements :class:`BucketSnapshotStorage`; one that can also list
what it holds is an :class:`InspectableBucketSnapshotStorage`, which recovery uses to find leaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

__all__ = ["BucketInfo", "BucketSnapshotStorage", "InspectableBucketSnapshotStorage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketInfo:
    """What a stored bucket snapshot is, without its indexes: found by scanning for leaked snapshots.

    Pulsar finds a leaked bucket ledger by its custom metadata; these are the same fields.
    """

    bucket_id: int
    bucket_key: str
    """The bucket's cursor-property key (``#pulsar.internal.delayed.bucket_<start>_<end>``)."""
    topic: str
    cursor: str
    segments: int
    """Number of segments (entries 1..segments)."""
    length_bytes: int
    """Stored bytes of the snapshot (what ``get_bucket_snapshot_length`` returns)."""


class BucketSnapshotStorage(Protocol):
    """What the bucket tracker needs of a snapshot store (Pulsar's ``BucketSnapshotStorage``, synchronous)."""

    def start(self) -> None:
        """Makes the storage usable (Pulsar's ``start``)."""
        ...

    def create_bucket_snapshot(
        self,
        metadata: SnapshotMetadata,
        segments: Sequence[bytes],
        bucket_key: str,
        topic: str,
        cursor: str,
    ) -> int:
        """Stores a bucket durably: metadata plus encoded ``SnapshotSegment`` s; returns its new unique id."""
        ...

    def get_bucket_snapshot_metadata(self, bucket_id: int) -> SnapshotMetadata:
        """Entry 0 of a bucket; ``BucketNotFound`` when it is not stored."""
        ...

    def get_bucket_snapshot_segment(
        self, bucket_id: int, first_segment_entry_id: int, last_segment_entry_id: int
    ) -> list[bytes]:
        """Encoded segments ``first..last`` (inclusive, 1-based, cut at the last); ``[]`` past the end."""
        ...

    def get_bucket_snapshot_length(self, bucket_id: int) -> int:
        """Stored bytes of a bucket snapshot."""
        ...

    def delete_bucket_snapshot(self, bucket_id: int) -> None:
        """Deletes a bucket durably; deleting a missing one succeeds (every step stays idempotent)."""
        ...

    def close(self) -> None:
        """Releases the storage; later calls fail."""
        ...


class InspectableBucketSnapshotStorage(BucketSnapshotStorage, Protocol):
    """A snapshot store that can also list what it holds: to find leaked snapshots, and for inspection."""

    def list_bucket_snapshots(self) -> list[int]:
        """Ids of every stored bucket snapshot, ascending."""
        ...

    def bucket_info(self, bucket_id: int) -> BucketInfo:
        """Who a stored bucket belongs to and how big it is."""
        ...
