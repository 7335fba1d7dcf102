"""What a rebuild produced and measured: the figures the report, ``summary.json`` and the CLI show.

Plain dataclasses of built-in values, so one object feeds the HTML report, the JSON summary and the
tests alike; nothing here touches Spark.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "BucketRow",
    "CursorRow",
    "KeyLoad",
    "RebuildSummary",
    "StageTiming",
    "TopicsSummary",
]


@dataclass(frozen=True, slots=True)
class StageTiming:
    """Wall time of one stage of the job."""

    name: str
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CursorRow:
    """One subscription's rebuilt cursor and how each persisted form would fare."""

    subscription: str
    mark_delete: str
    """``"L:E"`` of the mark-delete position."""
    ranges: int
    """Individually acked ranges after mark-delete (``nonContiguousDeletedMessagesRanges``)."""
    individually_acked: int
    partial_batches: int
    backlog: int
    """Entries not yet acknowledged (partial batches count as unacknowledged)."""
    compact_bytes: int
    message_range_bytes: int
    """Pulsar's ``PositionInfo`` with ``individualDeletedMessages`` (all ranges)."""
    long_list_map_bytes: int
    """Pulsar's ``PositionInfo`` with ``individualDeletedMessageRanges`` (bitmap words)."""
    persistable_pulsar: bool
    """Whether Pulsar's defaults (10,000 ranges, the 5 MB entry) keep every range."""
    redeliver_pulsar: int
    """Acknowledged entries a crash would redeliver after Pulsar's truncated persist."""
    redeliver_ours: int
    """The same for the ``CursorStore`` the rebuild wrote (0 unless a size limit cuts it)."""
    store_bytes: int
    """Bytes of the written cursor store."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketRow:
    """One bucket snapshot of the rebuilt delayed index."""

    bucket_id: int
    start_ledger_id: int
    end_ledger_id: int
    messages: int
    segments: int
    snapshot_bytes: int
    first_deliver_at: int
    last_deliver_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLoad:
    """Messages each of ``consumers`` would receive under one Key_Shared selector."""

    selector: str
    """``"auto_split"``, ``"consistent"`` (100 points per consumer) or ``"exclusive"`` (even ranges)."""
    consumers: list[str]
    messages: list[int]
    """Per consumer, same order as ``consumers``."""

    @property
    def imbalance(self) -> float:
        """Busiest consumer's share over the mean share (1.0 = perfectly even)."""
        total = sum(self.messages)
        if not total or not self.messages:
            return 1.0
        return max(self.messages) * len(self.messages) / total


@dataclass(slots=True, kw_only=True)
class RebuildSummary:
    """Everything one rebuild reports."""

    topic: str
    now_ms: int
    out_dir: str
    master: str
    stages: list[StageTiming] = field(default_factory=list)
    inputs: dict[str, int] = field(default_factory=dict)
    """Rows and distinct values read: messages, acks, ledgers, subscriptions, keys (approx.)."""
    rules: dict[str, int] = field(default_factory=dict)
    """Rows a documented rule set aside (e.g. ``acks_unknown_position``, ``delayed_due``), by rule."""
    ledger_sizes: dict[int, int] = field(default_factory=dict)
    """Entries per ledger of the message log."""
    holes: dict[str, dict[int, int]] = field(default_factory=dict)
    """Per subscription and ledger: unacked entries between mark-delete and the last acked entry."""
    cursors: list[CursorRow] = field(default_factory=list)
    buckets: list[BucketRow] = field(default_factory=list)
    delayed_histogram: list[tuple[int, int]] = field(default_factory=list)
    """(hour start in ms, not-yet-due delayed messages falling due in that hour), ascending."""
    key_load: list[KeyLoad] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    """The settings the rebuild used (segment sizes, max delay, consumers, …)."""
    command: str = ""
    """The command line of the run ("" when the library was called directly)."""

    @property
    def total_seconds(self) -> float:
        """Sum of the stage times."""
        return sum(s.seconds for s in self.stages)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``summary.json``); int keys become strings."""
        d = asdict(self)
        d["ledger_sizes"] = {str(k): v for k, v in self.ledger_sizes.items()}
        d["holes"] = {s: {str(k): v for k, v in h.items()} for s, h in self.holes.items()}
        d["total_seconds"] = self.total_seconds
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RebuildSummary:
        """The summary :meth:`to_json` wrote (``summary.json``), for reports rendered afterwards."""
        return cls(
            topic=str(d["topic"]),
            now_ms=int(d["now_ms"]),
            out_dir=str(d.get("out_dir", "")),
            master=str(d.get("master", "")),
            stages=[StageTiming(**t) for t in d.get("stages", [])],
            inputs=dict(d.get("inputs", {})),
            rules=dict(d.get("rules", {})),
            ledger_sizes={int(k): int(v) for k, v in d.get("ledger_sizes", {}).items()},
            holes={s: {int(k): int(v) for k, v in h.items()} for s, h in d.get("holes", {}).items()},
            cursors=[CursorRow(**c) for c in d.get("cursors", [])],
            buckets=[BucketRow(**b) for b in d.get("buckets", [])],
            delayed_histogram=[(int(a), int(b)) for a, b in d.get("delayed_histogram", [])],
            key_load=[KeyLoad(**k) for k in d.get("key_load", [])],
            config=dict(d.get("config", {})),
            command=str(d.get("command", "")),
        )


@dataclass(slots=True, kw_only=True)
class TopicsSummary:
    """What a many-topic rebuild measured: per-topic figures and the run's stage times."""

    run: str
    out_dir: str
    master: str
    command: str = ""
    """The command line of the run, shown in the report ("" when called as a library)."""
    stages: list[tuple[str, float]] = field(default_factory=list)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Topic -> its figures (``topic_figures``) and ``dir``."""

    @property
    def messages(self) -> int:
        """Messages over all topics."""
        return sum(int(t["messages"]) for t in self.topics.values())

    def to_json(self) -> dict[str, Any]:
        """``summary.json`` of the run."""
        return asdict(self) | {"messages": self.messages}
