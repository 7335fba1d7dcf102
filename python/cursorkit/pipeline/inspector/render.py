"""Rendering inspection summaries as rich tables."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from cursorkit.ackstate.store import RecoveryReport
from cursorkit.errors import (
    InvalidArgument,
    InvalidInputType,
)
from cursorkit.pipeline.inspector.summaries import (
    BucketStoreSummary,
    CursorStoreSummary,
    InspectSummary,
    PropertiesSummary,
    RebuildOutputSummary,
)
from cursorkit.pipeline.inspector.topics import TopicsOutputSummary

# -- rendering -------------------------------------------------------------------------------------------


def render(
    summary: InspectSummary | TopicsOutputSummary, *, console: Console | None = None, max_rows: int = 50
) -> str:
    """Prints a summary as rich tables on ``console`` (when given) and returns it as plain text.

    Args:
        summary: What :func:`inspect_path` (or ``inspect_topics``/``inspect_topic``) returned.
        console: Where to print; the text is returned either way.
        max_rows: Rows shown per table (buckets, properties, subscriptions); the rest are counted.
    """
    if not isinstance(
        summary, BucketStoreSummary | CursorStoreSummary | RebuildOutputSummary | TopicsOutputSummary
    ):
        raise InvalidInputType(f"summary must come from inspect_path, got {type(summary).__name__}")
    rows: object = max_rows
    if isinstance(rows, bool) or not isinstance(rows, int):
        raise InvalidInputType(f"max_rows must be an int, got {type(rows).__name__}")
    if rows < 1:
        raise InvalidArgument(f"max_rows must be >= 1, got {rows}")
    parts: list[RenderableType] = []
    for section in _renderables(summary, rows):
        if parts:
            parts.append(Text(""))
        parts.append(section)
    body = Group(*parts)
    if console is not None:
        console.print(body)
    buffer = io.StringIO()
    out = Console(
        file=buffer,
        width=console.width if console is not None else 120,
        color_system=None,
        force_terminal=False,
        soft_wrap=False,
    )
    out.print(body)
    return buffer.getvalue()


def _renderables(summary: InspectSummary | TopicsOutputSummary, max_rows: int) -> Iterator[RenderableType]:
    if isinstance(summary, TopicsOutputSummary):
        yield from _render_topics(summary, max_rows)
    elif isinstance(summary, BucketStoreSummary):
        yield from _render_bucket_store(summary, max_rows, title="Bucket snapshot store")
    elif isinstance(summary, CursorStoreSummary):
        yield from _render_cursor_store(summary, max_rows, title="Cursor store")
    else:
        yield from _render_rebuild(summary, max_rows)


def _status(damaged: bool) -> Text:
    return Text("DAMAGED", style="bold red") if damaged else Text("ok", style="green")


def _when(ms: int | None) -> str:
    """A deliver-at in ms as UTC ISO time (the raw number when out of the calendar's range)."""
    if ms is None:
        return "-"
    try:
        stamp = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _table(title: str) -> Table:
    """A table whose title is never wrapped to the width of a narrow body."""
    return Table(title=title, title_justify="left", min_width=len(title))


def _facts(title: str, rows: Iterable[tuple[str, object]]) -> Table:
    table = Table(
        title=title, title_justify="left", show_header=False, box=None, pad_edge=False, min_width=len(title)
    )
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value if isinstance(value, Text) else str(value))
    return table


def _cut(rows: Sequence[Any], max_rows: int) -> tuple[Sequence[Any], str | None]:
    if len(rows) <= max_rows:
        return rows, None
    return rows[:max_rows], f"… {len(rows) - max_rows} more not shown"


def _render_bucket_store(s: BucketStoreSummary, max_rows: int, *, title: str) -> Iterator[RenderableType]:
    firsts = [b.first_deliver_at for b in s.buckets if b.first_deliver_at is not None]
    lasts = [b.last_deliver_at for b in s.buckets if b.last_deliver_at is not None]
    facts: list[tuple[str, object]] = [
        ("path", s.path),
        ("status", _status(s.damaged)),
        ("buckets", f"{len(s.buckets)} ({len(s.damaged_buckets)} damaged)"),
        ("messages", s.messages),
        ("bytes", s.length_bytes),
        ("deliver-at", f"{_when(min(firsts, default=None))} .. {_when(max(lasts, default=None))}"),
        ("properties", s.properties.path if s.properties is not None else "none found"),
    ]
    if s.error is not None:
        facts.append(("error", Text(s.error, style="red")))
    yield _facts(title, facts)
    if s.buckets:
        table = _table("Buckets")
        for col in ("id", "ledgers", "segments", "messages", "first deliver-at", "last deliver-at", "bytes"):
            table.add_column(
                col, justify="right" if col in {"id", "segments", "messages", "bytes"} else "left"
            )
        table.add_column("status")
        shown, more = _cut(s.buckets, max_rows)
        for b in shown:
            ledgers = (
                f"{b.start_ledger_id}..{b.end_ledger_id}"
                if b.start_ledger_id is not None
                else _opt(b.bucket_key)
            )
            status = Text(b.error, style="red") if b.error is not None else Text("ok", style="green")
            table.add_row(
                str(b.bucket_id),
                ledgers,
                str(len(b.segments)),
                str(b.messages),
                _when(b.first_deliver_at),
                _when(b.last_deliver_at),
                _opt(b.length_bytes),
                status,
            )
        if more:
            table.caption = more
        yield table
    if s.properties is not None:
        yield from _render_properties(s.properties, max_rows)


def _render_properties(p: PropertiesSummary, max_rows: int) -> Iterator[RenderableType]:
    if p.error is not None:
        yield _facts("Cursor properties", [("path", p.path), ("error", Text(p.error, style="red"))])
        return
    table = _table(f"Cursor properties ({p.path})")
    table.add_column("key")
    table.add_column("snapshot", justify="right")
    table.add_column("status")
    shown, more = _cut(p.references, max_rows)
    for r in shown:
        status = Text(r.problem, style="red") if r.problem is not None else Text("ok", style="green")
        table.add_row(r.key, r.value, status)
    captions = [c for c in (more, f"{p.other_keys} other properties" if p.other_keys else None) if c]
    if captions:
        table.caption = "; ".join(captions)
    yield table
    yield _facts(
        "",
        [
            ("orphan snapshots", ", ".join(map(str, p.orphans)) or "none"),
            ("missing snapshots", Text(", ".join(map(str, p.missing)), style="red") if p.missing else "none"),
        ],
    )


def _render_cursor_store(s: CursorStoreSummary, max_rows: int, *, title: str) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [("path", s.path), ("status", _status(s.damaged))]
    if s.inspected_copy:
        stale = ", ".join(s.recovery.stale_files_removed) if s.recovery is not None else ""
        facts.append(("opened", f"a copy (opening in place would delete stale files: {stale or 'none'})"))
    if s.error is not None:
        facts.append(("error", Text(s.error, style="red")))
    st = s.stats
    if st is not None:
        facts += [
            ("name", s.name),
            ("generation / flush", f"{s.generation} / {s.sequence}"),
            ("log bytes", f"{s.log_bytes} ({s.live_bytes} live, {s.dead_bytes} dead)"),
            ("mark-delete", st.mark_delete_position),
            ("acked ranges", st.non_contiguous_deleted_ranges),
            ("individually acked", f"{st.individually_acked_entries} in {s.acked_ledgers} ledgers"),
            ("partial batches", st.partial_batches),
            ("fully persistable", st.fully_persistable),
            (
                "persisted sizes",
                f"compact {st.compact_bytes} B, MessageRange {st.message_range_bytes} B, "
                f"LongListMap {st.long_list_map_bytes} B",
            ),
            ("memory", f"{st.memory_bytes} B"),
        ]
        if s.properties:
            facts.append(("properties", ", ".join(f"{k}={v}" for k, v in sorted(s.properties.items()))))
    yield _facts(title, facts)
    if s.recovery is not None:
        yield from _render_recovery(s.recovery)
    if s.ranges and st is not None:
        table = _table("Acknowledged ranges (lower, upper]")
        table.add_column("range")
        for r in s.ranges[:max_rows]:
            table.add_row(str(r))
        if st.non_contiguous_deleted_ranges > min(len(s.ranges), max_rows):
            table.caption = f"first {min(len(s.ranges), max_rows)} of {st.non_contiguous_deleted_ranges}"
        yield table
    if s.batches and st is not None:
        table = _table("Partial batches")
        for col in ("position", "batch size", "acked"):
            table.add_column(col, justify="left" if col == "position" else "right")
        for b in s.batches[:max_rows]:
            table.add_row(str(b.position), str(b.batch_size), str(b.acked))
        if st.partial_batches > min(len(s.batches), max_rows):
            table.caption = f"first {min(len(s.batches), max_rows)} of {st.partial_batches}"
        yield table


def _render_recovery(r: RecoveryReport) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [
        ("log", r.log_file),
        ("marker", f"flush {r.marker_sequence} at byte {r.marker_offset}, {r.ledgers} ledger records"),
        ("records scanned", r.records_scanned),
    ]
    if r.torn_tail_bytes:
        facts.append(("torn tail", Text(f"{r.torn_tail_bytes} bytes", style="red")))
    if r.unused_tail_bytes:
        facts.append(("unused tail", f"{r.unused_tail_bytes} bytes"))
    if r.meta_error is not None:
        facts.append(("store.meta", Text(r.meta_error, style="red")))
    facts.extend(("corrupt", Text(str(d), style="red")) for d in r.corrupt_records)
    facts.extend(("passed over", Text(str(d), style="red")) for d in r.fallbacks)
    yield _facts("Recovery", facts)


def _render_rebuild(s: RebuildOutputSummary, max_rows: int) -> Iterator[RenderableType]:
    facts: list[tuple[str, object]] = [
        ("path", s.path),
        ("status", _status(s.damaged)),
        ("topic", s.topic),
        ("now", f"{_when(s.now_ms)} ({s.now_ms})"),
        (
            "delayed index",
            f"{s.delayed_topic} / {s.delayed_cursor}" if s.delayed_topic is not None else "none",
        ),
        ("subscriptions", len(s.subscriptions)),
    ]
    facts.extend(("problem", Text(p, style="red")) for p in s.problems)
    yield _facts("Rebuild output", facts)
    if s.delayed is not None:
        yield from _render_bucket_store(s.delayed, max_rows, title="Delayed index")
    if s.subscriptions:
        table = _table("Subscriptions")
        for col in ("subscription", "mark-delete", "ranges", "acked", "batches", "log bytes", "status"):
            table.add_column(
                col, justify="right" if col in {"ranges", "acked", "batches", "log bytes"} else "left"
            )
        items = sorted(s.subscriptions.items())
        shown, more = _cut(items, max_rows)
        for name, c in shown:
            st = c.stats
            status = _status(c.damaged)
            table.add_row(
                name,
                str(st.mark_delete_position) if st is not None else "-",
                str(st.non_contiguous_deleted_ranges) if st is not None else "-",
                str(st.individually_acked_entries) if st is not None else "-",
                str(st.partial_batches) if st is not None else "-",
                str(c.log_bytes) if st is not None else "-",
                status,
            )
        if more:
            table.caption = more
        yield table
        for name, c in items:
            if c.damaged:
                yield from _render_cursor_store(c, max_rows, title=f"Subscription {name!r}")


def _render_topics(s: TopicsOutputSummary, max_rows: int) -> Iterator[RenderableType]:
    """The topics table, damaged topics first, then riskiest first; then what is wrong with each."""
    from cursorkit.pipeline.topic_risk import FIGURES, risk_order

    damaged = s.damaged_topics
    facts: list[tuple[str, object]] = [
        ("path", s.path),
        ("run", s.run),
        ("status", _status(s.damaged)),
        ("topics", f"{len(s.topics) + len(set(s.problems) - set(s.topics) - {''})} ({len(damaged)} damaged)"),
    ]
    facts.extend(("problem", Text(p, style="red")) for p in s.problems.get("", ()))
    yield _facts("Many-topic rebuild output", facts)
    names = sorted(set(s.topics) | set(s.problems) - {""})
    known = {t: s.figures[t] for t in names if t in s.figures}
    bad = set(damaged)
    order = sorted(damaged) + [t for t in risk_order(known) if t not in bad]
    order += [t for t in names if t not in bad and t not in known]
    table = _table(f"{len(names)} topics, damaged first, then riskiest")
    columns = ("topic", "messages", "subs", "backlog", "ranges", "redeliver", "delayed", "buckets")
    for col in columns:
        if col == "topic":
            table.add_column(col, overflow="fold", ratio=1)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    table.add_column("status")
    shown, more = _cut(order, max_rows)
    for t in shown:
        f = s.figures.get(t, {})
        cells = [f"{f[k]:,}" if isinstance(f.get(k), int) else "-" for k in FIGURES]
        table.add_row(t, *cells, _status(t in bad))
    if more:
        table.caption = more
    yield table
    for t in damaged[:max_rows]:
        lines = s.damage_of(t)
        yield _facts(f"Topic {t!r}", [("damage", Text(line, style="red")) for line in lines[:max_rows]])
    if len(damaged) > max_rows:
        yield Text(f"… and {len(damaged) - max_rows} more damaged topics")
