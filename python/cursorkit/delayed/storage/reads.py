"""``BucketReads``: the reading half of a snapshot storage, written once for files and objects alike."""

from __future__ import annotations

import abc
import contextlib

from cursorkit.delayed.storage.api import BucketInfo
from cursorkit.delayed.storage.format import BucketIndex, BucketReader, read_metadata, segment_range
from cursorkit.proto.delayed_bucket_pb2 import SnapshotMetadata

__all__ = ["BucketReads"]


class BucketReads(abc.ABC):
    """The reading half of a snapshot storage, written once over ``_reader`` (files, objects).

    ``_reader(bucket_id, direct=...)`` yields a verified reader of one stored bucket and its offset
    table; ``direct`` marks a read of segment records only.
    """

    @abc.abstractmethod
    def _reader(
        self, bucket_id: object, *, direct: bool = False
    ) -> contextlib.AbstractContextManager[tuple[BucketReader, BucketIndex]]:
        """A verified reader of one stored bucket and its offset table."""

    def get_bucket_snapshot_metadata(self, bucket_id: int) -> SnapshotMetadata:
        """Entry 0, after verifying the header, the offset table and the metadata record."""
        with self._reader(bucket_id) as (reader, index):
            return read_metadata(reader, index)

    def get_bucket_snapshot_segment(
        self, bucket_id: int, first_segment_entry_id: int, last_segment_entry_id: int
    ) -> list[bytes]:
        """Encoded segments ``first..last`` (inclusive, 1-based), reading only their bytes.

        ``last`` past the end is cut to the last segment; ``first`` past the end gives ``[]`` (how
        the tracker notices a bucket is used up). ``first < 1`` or ``first > last``: ``InvalidArgument``.
        """
        first, last = segment_range(first_segment_entry_id, last_segment_entry_id)
        with self._reader(bucket_id, direct=True) as (reader, index):
            if first > index.segments:
                return []
            return reader.records(index, first, min(last, index.segments))

    def bucket_info(self, bucket_id: int) -> BucketInfo:
        """Owner fields and size of a bucket, after verifying its header, offset table and footer."""
        with self._reader(bucket_id) as (reader, index):
            key, topic, cursor = reader.header(index)
            return BucketInfo(
                bucket_id=reader.bucket_id,
                bucket_key=key,
                topic=topic,
                cursor=cursor,
                segments=index.segments,
                length_bytes=reader.size,
            )
