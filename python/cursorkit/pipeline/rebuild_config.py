"""What a rebuild is told: the moment it rebuilds for, PIP-195's sizes, and what it writes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RebuildConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuildConfig:
    """Settings of a rebuild (PIP-195's sizes are Pulsar's defaults)."""

    topic: str = "persistent://public/default/topic"
    now_ms: int | None = None
    """The moment the state is rebuilt for; None = the last publish_time of the message log."""
    min_index_count_per_bucket: int = 50_000
    max_time_step_per_segment_ms: int = 300_000
    max_indexes_per_segment: int = 5000
    max_delay_ms: int = 365 * 24 * 3_600_000
    """Deliver-at further than this after now is set aside (rule ``delayed_beyond_max_delay``)."""
    consumers: int = 8
    """Consumers of the Key_Shared hash-load figures."""
    fsync: bool = True
    report: bool = True
    command: str = ""
    """The command line that asked for the rebuild, shown in the report ("" when called as a library)."""
