"""``BucketCounters``: what a bucket tracker has done; ``Tally``: the running counts its parts add to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BucketCounters:
    """What the tracker has done, for stats and tests."""

    added: int
    duplicates: int
    rejected_due: int
    rejected_acked: int
    delivered: int
    seals: int
    merges: int
    segment_loads: int
    downgrades: int
    damaged: int
    """Buckets lost to a damaged or vanished snapshot (at recovery or at a later segment load)."""


class Tally:
    """The running counts behind ``BucketCounters`` (callers hold the tracker's lock)."""

    def __init__(self) -> None:
        self._n = dict.fromkeys(BucketCounters.__slots__, 0)

    def add(self, name: str, k: int = 1) -> None:
        """Counts ``k`` more of ``name`` (a ``BucketCounters`` field)."""
        self._n[name] += k

    def __getitem__(self, name: str) -> int:
        return self._n[name]

    def snapshot(self) -> BucketCounters:
        """The counts so far."""
        return BucketCounters(**self._n)
