"""``ImmutableBucket``: one sealed ledger range of the bucket tracker and its snapshot bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cursorkit.errors import CorruptSnapshot

PROPERTY_PREFIX = "#pulsar.internal.delayed.bucket"
"""Pulsar's cursor-property prefix for bucket snapshots: ``<prefix>_<start>_<end>`` = snapshot id."""

MUTABLE_TAIL_PROPERTY = "#cursorkit.delayed.mutable_tail"
"""Our property for the persisted mutable tail (a namespace Pulsar's recovery never reads)."""

DAMAGED_PROPERTY_PREFIX = "#cursorkit.delayed.damaged_"
"""``<prefix><snapshot id>`` = the bucket's old property name: a damaged snapshot kept for inspection
(Pulsar's recovery never reads this namespace; ours reports it and never deletes the snapshot)."""

Int64Array = npt.NDArray[np.int64]
Key = tuple[int, int, int]
"""A delayed index ``(deliver_at, ledger_id, entry_id)``; tuples order exactly as the queue pops."""


def bucket_key(start_ledger_id: int, end_ledger_id: int) -> str:
    """The cursor-property name of the bucket covering ledgers ``start..end`` (inclusive)."""
    return f"{PROPERTY_PREFIX}_{start_ledger_id}_{end_ledger_id}"


def parse_id(text: str, what: str) -> int:
    """A ledger or snapshot id written by us or Pulsar: canonical ASCII decimal in 0..2^63-1.

    Anything else (a sign, spaces, leading zeros, other Unicode digits, past 2^63-1) is refused,
    so a property parses to one id and is written back as exactly the same text.

    Raises:
        CorruptSnapshot: naming ``what``.
    """
    ok = text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))
    if not ok or len(text) > 19 or int(text) > 2**63 - 1:
        raise CorruptSnapshot(f"{what} {text!r} is not a decimal id in 0..2^63-1")
    return int(text)


def parse_bucket_key(name: str) -> tuple[int, int] | None:
    """``(start, end)`` of a bucket property name, or None when the name is not one.

    Raises:
        CorruptSnapshot: the name has the prefix but not two canonical ledger ids with start <= end.
    """
    if not name.startswith(PROPERTY_PREFIX + "_"):
        return None
    parts = name[len(PROPERTY_PREFIX) + 1 :].split("_")
    try:
        if len(parts) != 2:
            raise CorruptSnapshot("two ledger ids expected")
        start, end = parse_id(parts[0], "start ledger"), parse_id(parts[1], "end ledger")
    except CorruptSnapshot as e:
        raise CorruptSnapshot(f"cursor property {name!r} is not <prefix>_<start>_<end> ({e})") from None
    if end < start:
        raise CorruptSnapshot(f"cursor property {name!r} has an empty ledger range")
    return start, end


@dataclass(slots=True)
class SegmentArrays:
    """Decoded indexes of consecutive segments, sorted; ``ends[i]`` closes segment ``first + i``."""

    timestamps: Int64Array
    ledger_ids: Int64Array
    entry_ids: Int64Array
    ends: Int64Array

    def segment(self, i: int) -> tuple[Int64Array, Int64Array, Int64Array]:
        """Columns of the ``i``-th segment held here (0-based)."""
        a = int(self.ends[i - 1]) if i else 0
        b = int(self.ends[i])
        return self.timestamps[a:b], self.ledger_ids[a:b], self.entry_ids[a:b]

    def __len__(self) -> int:
        return len(self.ends)


@dataclass(slots=True, eq=False)
class ImmutableBucket:
    """A sealed bucket: its ledger range, snapshot id and which segment is loaded.

    Field names are Pulsar's in snake_case. ``bucket_id`` is None while the snapshot is being
    written; until then the not-yet-loaded segments live in ``pending`` so delivery never waits.
    """

    start_ledger_id: int
    end_ledger_id: int
    current_segment_entry_id: int = 1
    """1-based id of the segment whose indexes are in the shared queue."""
    last_segment_entry_id: int = 0
    """Number of segments (the id of the last one)."""
    number_bucket_delayed_messages: int = 0
    first_schedule_timestamps: list[int] = field(default_factory=list)
    """Earliest deliver-at of each segment (index 0 = segment 1)."""
    bucket_id: int | None = None
    merging: bool = False
    snapshot_length: int = 0
    barrier: Key | None = None
    """Last index of the loaded segment: nothing later may be popped until the next one is loaded."""
    pending: SegmentArrays | None = None
    """Every segment (``pending.segment(0)`` is segment 1) until the snapshot is durable."""
    removed: bool = False
    """Dropped from the tracker (consumed, merged away, downgraded or cleared)."""

    @property
    def key(self) -> str:
        """The cursor-property name of this bucket."""
        return bucket_key(self.start_ledger_id, self.end_ledger_id)

    @property
    def created(self) -> bool:
        """Whether its snapshot is durable (created and recorded in the cursor properties)."""
        return self.bucket_id is not None

    def covers(self, ledger_id: int) -> bool:
        """Whether ``ledger_id`` lies in this bucket's range."""
        return self.start_ledger_id <= ledger_id <= self.end_ledger_id

    def next_unloaded_timestamp(self) -> int:
        """Earliest deliver-at of the first segment not yet loaded (Pulsar #26242's 0-based read)."""
        i = self.current_segment_entry_id
        if i < len(self.first_schedule_timestamps):
            return self.first_schedule_timestamps[i]
        return 2**63 - 1
