"""The rebuild report: one self-contained ``report.html`` from a :class:`RebuildSummary`.

Everything is inline (CSS in a ``<style>`` element, charts as base64 PNG data URIs, no script, no
external fetch), so the file can be mailed, attached to a ticket or opened offline. Charts are drawn
with matplotlib's object API (``Figure`` + the Agg canvas), which keeps no pyplot global state and is
safe to call from several threads. Every piece of text from the summary is HTML-escaped, and text
placed in a chart is protected from matplotlib's ``$...$`` math parsing.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, StrMethodFormatter

from cursorkit.fsio import atomic_write
from cursorkit.pipeline.results import BucketRow, CursorRow, KeyLoad, RebuildSummary

__all__ = ["REPORT_NAME", "RULES", "render_html", "write_report"]

REPORT_NAME = "report.html"
"""The file name :func:`write_report` uses when given a directory."""

RULES: dict[str, str] = {
    "delayed_due": (
        "deliver-at at or before now: the message is already due, so it is dispatched at once and "
        "not put in the delayed index."
    ),
    "delayed_beyond_max_delay": (
        "deliver-at more than the rebuild's maximum delay (the max_delay_ms setting) after now: "
        "set aside, not put in the delayed index."
    ),
    "delayed_acked": (
        "a delayed message every subscription has already acknowledged: nothing is left to deliver, "
        "so it is not indexed."
    ),
    "acks_unknown_position": (
        "an ack naming a ledger or entry the message log does not hold; it cannot move any cursor "
        "and is ignored."
    ),
    "acks_batch_index_out_of_range": (
        "an ack whose batch index is at or beyond the batch size of its entry; ignored."
    ),
    "acks_after_now": (
        "an ack whose ack time is after the rebuild's now; ignored, so the cursors show the state at now."
    ),
}
"""What each documented rule sets aside, for the rules table (unknown rule names are listed bare)."""

_BUCKET_ROWS = 50
"""Buckets listed in the table; the rest are counted (all of them are in ``summary.json``)."""
_MAX_SERIES = 10
"""Subscriptions drawn in the ack-hole chart (the ones with the most holes)."""
_MAX_GROUPS = 40
"""Subscriptions drawn in the encoded-size chart (the ones with the largest range encoding)."""
_MAX_BARS = 400
"""Bars in the delayed-messages chart; longer spans are drawn in wider bins."""
_MAX_LABEL = 32
_HOUR_MS = 3_600_000
_THOUSANDS = StrMethodFormatter("{x:,.0f}")
_SECTIONS = (
    ("inputs", "Inputs and rules"),
    ("cursors", "Cursors"),
    ("delayed", "Delayed index"),
    ("keyshared", "Key_Shared"),
)

_CSS = """
:root { color-scheme: light; --line: #d0d7de; --muted: #57606a; --head: #f6f8fa; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       max-width: 1100px; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; }
h2 { font-size: 1.3rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; margin-top: 2.2rem; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
p.why, figcaption, .note { color: var(--muted); }
nav a { margin-right: 1rem; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: .25rem .55rem; vertical-align: top; }
th { background: var(--head); text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.total td { font-weight: 600; background: var(--head); }
.scroll { overflow-x: auto; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
.none { font-style: italic; color: var(--muted); }
.warn { color: #9a6700; font-weight: 600; }
.verdict { border-left: 6px solid; padding: .5rem 1rem; margin: 1rem 0; }
.verdict p { margin: .3rem 0; }
.verdict.ok { border-color: #1a7f37; background: #dafbe1; }
.verdict.risk { border-color: #cf222e; background: #ffebe9; }
.verdict.check { border-color: #9a6700; background: #fff8c5; }
th { white-space: normal; }
td:first-child { overflow-wrap: anywhere; max-width: 18rem; }
"""


# ---------------------------------------------------------------------------------------- formatting


def _esc(value: object) -> str:
    """``value`` as text, HTML-escaped (quotes too, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


def _fmt(value: object) -> str:
    """A table cell's text: thousands separators for ints, 3 decimals for floats, yes/no for bools."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}" if math.isfinite(value) else str(value)
    return str(value)


def _iso(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time with milliseconds (the raw number if out of range)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bytes(n: int) -> str:
    """A byte count for prose: ``1,234 B`` or ``12.3 KiB`` / ``MiB`` / ``GiB``."""
    if abs(n) < 1024:
        return f"{n:,} B"
    exponent = min(3, int(math.log(abs(n), 1024)))
    return f"{n / 1024**exponent:,.1f} {('KiB', 'MiB', 'GiB')[exponent - 1]}"


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    total: Sequence[object] | None = None,
) -> str:
    """An HTML table; numbers are right-aligned, every cell escaped; ``total`` is a bold last row."""

    def cells(row: Sequence[object], tag: str = "td") -> str:
        out = []
        for value in row:
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            cls = ' class="num"' if numeric else ""
            out.append(f"<{tag}{cls}>{_esc(_fmt(value))}</{tag}>")
        return "".join(out)

    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = [f"<tr>{cells(r)}</tr>" for r in rows]
    if total is not None:
        body.append(f'<tr class="total">{cells(total)}</tr>')
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _none(what: str) -> str:
    """The placeholder for an empty part of the summary."""
    return f'<p class="none">none ({_esc(what)})</p>'


def _section(anchor: str, title: str, why: str, body: Iterable[str]) -> str:
    """A report section: heading, one sentence saying what it shows and why it matters, content."""
    return (
        f'<section id="{_esc(anchor)}"><h2>{_esc(title)}</h2><p class="why">{_esc(why)}</p>'
        + "".join(body)
        + "</section>"
    )


# -------------------------------------------------------------------------------------------- charts


def _label(text: str) -> str:
    """Text safe to hand to matplotlib: shortened, ``$`` escaped, and not hidden by a leading ``_``.

    Control and other unprintable characters become ``?`` (no font has a glyph for them).
    """
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > _MAX_LABEL:
        text = text[: _MAX_LABEL - 1] + "…"
    text = text.replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _new_figure(height: float = 3.6) -> tuple[Figure, Axes]:
    """A figure on an Agg canvas (no pyplot) with one axes."""
    fig = Figure(figsize=(9.5, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _figure(fig: Figure, alt: str, caption: str) -> str:
    """``fig`` as an inline PNG ``<figure>``; the figure is cleared afterwards to free its artists."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", metadata={"Software": None})
    finally:
        fig.clear()
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<figure><img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_esc(caption)}</figcaption></figure>"
    )


def _category_ticks(ax: Axes, x: npt.NDArray[np.int64], labels: Sequence[str]) -> None:
    """Category names under grouped bars, slanted when there are many or long ones."""
    slanted = len(labels) > 8 or sum(len(label) for label in labels) > 80
    ax.set_xticks(x, labels, rotation=30 if slanted else 0, ha="right" if slanted else "center")


def _wide_range(values: Iterable[int]) -> bool:
    """Whether the positive values span two orders of magnitude or more (then a log axis reads better)."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) >= 100 * min(positive)


def _holes_chart(holes: dict[str, dict[int, int]]) -> str:
    """Ack holes per ledger: one step line per subscription over ledger id."""
    series = [(sub, per) for sub, per in holes.items() if per]
    if not series:
        return _none("no ack holes: every subscription is acknowledged up to its last acked entry")
    series.sort(key=lambda item: (-sum(item[1].values()), item[0]))
    shown = series[:_MAX_SERIES]
    fig, ax = _new_figure()
    for sub, per in shown:
        ledgers = sorted(per)
        counts = [per[ledger] for ledger in ledgers]
        ax.step(ledgers, counts, where="mid", label=_label(sub), marker="o" if len(ledgers) <= 60 else None)
    if _wide_range(v for _, per in shown for v in per.values()):
        ax.set_yscale("symlog", linthresh=1)
    else:
        ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.set_xlabel("ledger id")
    ax.set_ylabel("unacked entries (holes)")
    ax.set_title("Ack holes per ledger")
    ax.grid(alpha=0.3)
    fig.legend(title="subscription", fontsize="small", loc="outside right upper")
    caption = "Entries still unacknowledged between mark-delete and the last acked entry, per ledger."
    if len(series) > len(shown):
        caption += f" The {len(shown)} subscriptions with most holes of {len(series)} are drawn."
    return _figure(fig, "ack holes per ledger", caption)


def _encoding_chart(cursors: Sequence[CursorRow]) -> str:
    """Encoded cursor size per encoding: grouped bars per subscription, log y."""
    rows = sorted(cursors, key=lambda c: (-c.message_range_bytes, c.subscription))[:_MAX_GROUPS]
    rows.sort(key=lambda c: c.subscription)
    encodings = (
        ("compact", [c.compact_bytes for c in rows]),
        ("message_range", [c.message_range_bytes for c in rows]),
        ("long_list_map", [c.long_list_map_bytes for c in rows]),
    )
    fig, ax = _new_figure()
    x = np.arange(len(rows))
    width = 0.8 / len(encodings)
    for i, (name, sizes) in enumerate(encodings):
        ax.bar(x + (i - 1) * width, sizes, width, label=name)
    _category_ticks(ax, x, [_label(c.subscription) for c in rows])
    if any(size > 0 for _, sizes in encodings for size in sizes):
        ax.set_yscale("log")
        ax.set_ylabel("bytes (log scale)")
    else:
        ax.set_ylabel("bytes")
    ax.set_title("Encoded size per encoding")
    ax.grid(axis="y", alpha=0.3)
    fig.legend(title="encoding", fontsize="small", loc="outside right upper")
    caption = (
        "Bytes the same ack state takes as this project's compact store, Pulsar's message-range list "
        "and Pulsar's long-list bitmap map."
    )
    if len(cursors) > len(rows):
        caption += (
            f" The {len(rows)} subscriptions with the largest range encoding of {len(cursors)} are drawn."
        )
    return _figure(fig, "encoded size per encoding", caption)


def _delayed_chart(histogram: Sequence[tuple[int, int]], now_ms: int) -> str:
    """Not-yet-due delayed messages by the hour they fall due, on an axis of time after now."""
    if not histogram or not any(count for _, count in histogram):
        return _none("no delayed message is waiting")
    starts = np.array([h for h, _ in histogram], dtype=np.float64)
    counts = np.array([c for _, c in histogram], dtype=np.float64)
    span_hours = (starts.max() - starts.min()) / _HOUR_MS + 1
    days = span_hours > 96
    unit_ms = _HOUR_MS * (24 if days else 1)
    unit = "days" if days else "hours"
    offsets = (starts - now_ms) / unit_ms
    bin_hours = max(1, math.ceil(span_hours / _MAX_BARS))
    width = bin_hours * _HOUR_MS / unit_ms
    if bin_hours > 1:  # too many hours for one bar each: add them up in wider bins
        edges = np.arange(offsets.min(), offsets.max() + width, width)
        if len(edges) < 2:
            edges = np.array([offsets.min(), offsets.min() + width])
        counts, edges = np.histogram(offsets, bins=edges, weights=counts)
        offsets = edges[:-1]
    fig, ax = _new_figure()
    ax.bar(offsets, counts, width=width, align="edge", color="tab:purple")
    ax.set_xlabel(f"{unit} after now ({_iso(now_ms)})")
    per = "hour" if bin_hours == 1 else f"{bin_hours} hours"
    ax.set_ylabel(f"messages due per {per}")
    ax.set_title("Delayed messages over time")
    ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.grid(axis="y", alpha=0.3)
    return _figure(
        fig,
        "delayed messages over time",
        f"Messages not yet due, by the {per} they fall due, counted from now.",
    )


def _buckets_chart(buckets: Sequence[BucketRow]) -> str:
    """Messages per bucket over snapshot bytes per bucket, two panels sharing the bucket axis."""
    rows = sorted(buckets, key=lambda b: (b.start_ledger_id, b.bucket_id))
    x = np.arange(len(rows))
    fig = Figure(figsize=(9.5, 5.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.bar(x, [b.messages for b in rows], color="tab:blue")
    top.set_ylabel("messages")
    top.set_title("Messages per bucket")
    bottom.bar(x, [b.snapshot_bytes for b in rows], color="tab:orange")
    bottom.set_ylabel("snapshot bytes")
    bottom.yaxis.set_major_formatter(EngFormatter(unit="B"))
    top.yaxis.set_major_formatter(_THOUSANDS)
    for ax in (top, bottom):
        ax.grid(axis="y", alpha=0.3)
    step = max(1, math.ceil(len(rows) / 25))
    ticks = x[::step]
    bottom.set_xticks(
        ticks,
        [f"{rows[i].start_ledger_id}-{rows[i].end_ledger_id}" for i in ticks],
        rotation=45,
        ha="right",
        fontsize="small",
    )
    bottom.set_xlabel("bucket (start-end ledger)")
    return _figure(
        fig,
        "messages per bucket",
        "Messages (top) and snapshot bytes (bottom) of each bucket, in ledger order.",
    )


def _load_chart(loads: Sequence[KeyLoad]) -> str:
    """Messages per consumer under each selector: consumers on x, one bar per selector."""
    consumers = list(dict.fromkeys(c for load in loads for c in load.consumers))
    index = {c: i for i, c in enumerate(consumers)}
    x = np.arange(len(consumers))
    fig, ax = _new_figure()
    width = 0.8 / len(loads)
    for i, load in enumerate(loads):
        y = np.zeros(len(consumers))
        for name, count in zip(load.consumers, load.messages, strict=False):
            y[index[name]] += count
        if len(consumers) <= _MAX_GROUPS:
            ax.bar(x + (i - (len(loads) - 1) / 2) * width, y, width, label=_label(load.selector))
        else:
            ax.plot(x, y, marker=".", linewidth=1, label=_label(load.selector))
    total = sum(sum(load.messages) for load in loads) / len(loads)
    ax.axhline(total / len(consumers), color="grey", linestyle="--", linewidth=1, label="even share")
    if len(consumers) <= _MAX_GROUPS:
        _category_ticks(ax, x, [_label(c) for c in consumers])
    else:
        ax.set_xlabel("consumer index")
    ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.set_ylabel("messages")
    ax.set_title("Hash load per consumer")
    ax.grid(axis="y", alpha=0.3)
    fig.legend(title="selector", fontsize="small", loc="outside right upper")
    return _figure(fig, "hash load per consumer", "Messages each consumer would receive under each selector.")


# ------------------------------------------------------------------------------------------ sections


def _names(items: Sequence[str], shown: int = 5) -> str:
    """``a, b and c`` of the first ``shown`` names, then ``and N more``."""
    head = list(items[:shown])
    rest = len(items) - len(head)
    if rest:
        return f"{', '.join(head)} and {rest:,} more"
    return head[0] if len(head) == 1 else f"{', '.join(head[:-1])} and {head[-1]}"


def _verdict(s: RebuildSummary) -> tuple[str, list[str]]:
    """The report's first words: ``ok``, ``check`` or ``risk``, and sentences saying what and where.

    At risk: acknowledged entries a crash would redeliver (Pulsar's persist cuts its ranges, or this
    store's). To check: cursors Pulsar cannot persist whole, acks the rebuild ignored.
    """
    risks: list[str] = []
    checks: list[str] = []
    losing = [c for c in s.cursors if c.redeliver_pulsar > 0]
    if losing:
        losing.sort(key=lambda c: (-c.redeliver_pulsar, c.subscription))
        risks.append(
            f"Pulsar would redeliver {sum(c.redeliver_pulsar for c in losing):,} acked entries on "
            f"{_names([c.subscription for c in losing])} after a broker crash: their ack holes are more "
            "than Pulsar's default cursor persistence keeps (10,000 ranges, a 5 MB entry)."
        )
    ours = [c for c in s.cursors if c.redeliver_ours > 0]
    if ours:
        risks.append(
            f"The cursor stores written here would redeliver {sum(c.redeliver_ours for c in ours):,} "
            f"acked entries on {_names([c.subscription for c in ours])}."
        )
    uncut = [c for c in s.cursors if not c.persistable_pulsar and c.redeliver_pulsar == 0]
    if uncut:
        checks.append(
            f"Pulsar's defaults cannot persist the cursors of {_names([c.subscription for c in uncut])} "
            "whole, though nothing acknowledged would be redelivered."
        )
    for rule, text in (
        ("acks_unknown_position", "acks name positions the message log does not hold (ignored)"),
        ("acks_after_now", f"acks come after now, {_iso(s.now_ms)} (ignored)"),
        ("delayed_beyond_max_delay", "delayed messages are due beyond the maximum delay (set aside)"),
    ):
        if s.rules.get(rule, 0):
            checks.append(f"{s.rules[rule]:,} {text}; see Rules.")
    if risks:
        return "risk", risks + checks
    if checks:
        return "check", checks
    backlog = sum(c.backlog for c in s.cursors)
    delayed = sum(b.messages for b in s.buckets)
    subs = len(s.cursors)
    return "ok", [
        f"Every cursor of the {subs:,} subscription{'s' if subs != 1 else ''} persists whole under Pulsar's "
        f"defaults: a crash would redeliver no acknowledged entry. Backlog {backlog:,} entries; "
        f"{delayed:,} delayed messages in {len(s.buckets):,} buckets."
    ]


def _verdict_html(kind: str, sentences: Sequence[str]) -> str:
    """The verdict box (``kind`` from :func:`_verdict`)."""
    title = {"ok": "Healthy.", "check": "Healthy, with findings to check.", "risk": "At risk."}[kind]
    body = "".join(f"<p>{_esc(t)}</p>" for t in sentences)
    return f'<section id="verdict" class="verdict {kind}"><p><strong>{title}</strong></p>{body}</section>'


def _header(s: RebuildSummary) -> str:
    facts = [
        ("topic", s.topic),
        ("now", f"{_iso(s.now_ms)} ({s.now_ms} ms)"),
        ("master", s.master),
        ("output", s.out_dir),
        ("total time", f"{s.total_seconds:.3f} s"),
    ]
    if s.command:
        facts.append(("command", s.command))
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in facts)
    total = s.total_seconds
    if s.stages:
        timings = _table(
            ("stage", "seconds", "share %"),
            [(t.name, t.seconds, 100 * t.seconds / total if total else 0.0) for t in s.stages],
            total=("total", total, 100.0 if total else 0.0),
        )
    else:
        timings = _none("no stage was timed")
    nav = " ".join(f'<a href="#{a}">{_esc(t)}</a>' for a, t in _SECTIONS)
    return (
        f"<header><h1>Rebuild report: {_esc(s.topic)}</h1>{_verdict_html(*_verdict(s))}"
        '<p class="why">The state of every subscription of this topic rebuilt from its message and ack '
        "logs as it stood at now: what was read, what was set aside, and what the rebuilt cursors, "
        f'delayed index and Key_Shared load look like.</p><dl class="facts">{dl}</dl><nav>{nav}</nav>'
        '<h3>Stage timings</h3><p class="why">Wall time of each stage of the job; the slowest stage is '
        f"where a faster rebuild has to start.</p>{timings}</header>"
    )


def _inputs(s: RebuildSummary) -> str:
    body = ["<h3>Inputs</h3>"]
    if s.inputs:
        body.append(_table(("input", "count"), sorted(s.inputs.items())))
    else:
        body.append(_none("no input counts recorded"))
    if s.ledger_sizes:
        sizes = list(s.ledger_sizes.values())
        body.append(
            f"<p>The message log holds {len(sizes):,} ledgers with {sum(sizes):,} entries "
            f"({min(sizes):,} to {max(sizes):,} per ledger).</p>"
        )
    body.append(
        "<h3>Rules</h3>"
        '<p class="why">Rows set aside under a documented rule instead of failing the job. A few are '
        "normal; many usually mean the logs do not match (acks of another topic, times in the wrong "
        "unit, a now set too early).</p>"
    )
    if s.rules:
        body.append(
            _table(
                ("rule", "rows", "meaning"),
                [(name, rows, RULES.get(name, "")) for name, rows in sorted(s.rules.items())],
                total=("total", sum(s.rules.values()), ""),
            )
        )
    else:
        body.append(_none("no row was set aside"))
    body.append("<h3>Settings</h3>")
    if s.config:
        body.append(_table(("setting", "value"), [(k, _setting(v)) for k, v in sorted(s.config.items())]))
    else:
        body.append(_none("no settings recorded"))
    return _section(
        "inputs",
        "Inputs and rules",
        "What the job read from the logs and what it set aside: counts that differ from what you expect "
        "point to a wrong input path, a filter or mismatched logs.",
        body,
    )


def _setting(value: object) -> str:
    """A setting's value for the settings table (``str`` for text, ``repr`` otherwise)."""
    return value if isinstance(value, str) else repr(value)


def _cursors(s: RebuildSummary) -> str:
    if not s.cursors:
        body = [_none("no subscription")]
    else:
        rows = sorted(s.cursors, key=lambda c: c.subscription)
        state = _table(
            (
                "subscription",
                "mark-delete",
                "ack-hole ranges",
                "individually acked",
                "partial batches",
                "backlog",
                "Pulsar keeps all",
                "redeliver (Pulsar)",
                "redeliver (ours)",
            ),
            [
                (
                    c.subscription,
                    c.mark_delete,
                    c.ranges,
                    c.individually_acked,
                    c.partial_batches,
                    c.backlog,
                    c.persistable_pulsar,
                    c.redeliver_pulsar,
                    c.redeliver_ours,
                )
                for c in rows
            ],
        )
        sizes = _table(
            ("subscription", "compact", "message ranges (Pulsar)", "long-list map (Pulsar)", "store"),
            [
                (c.subscription, c.compact_bytes, c.message_range_bytes, c.long_list_map_bytes, c.store_bytes)
                for c in rows
            ],
        )
        body = [
            state,
            _redelivery_note(rows),
            '<h3>Encoded size</h3><p class="why">Bytes of each cursor in each persisted form: this '
            "project's compact form, Pulsar's two forms, and the cursor store written here.</p>",
            sizes,
            _holes_chart(s.holes),
            _encoding_chart(rows),
        ]
    return _section(
        "cursors",
        "Cursors",
        "Each subscription's rebuilt mark-delete position, the individually acked ranges after it, and "
        "what each way of persisting them costs: many ranges are what make Pulsar's cursor persistence "
        "expensive or lossy.",
        body,
    )


def _redelivery_note(cursors: Sequence[CursorRow]) -> str:
    """Compare what a crash would redeliver after Pulsar's persist and after ours."""
    pulsar = sum(c.redeliver_pulsar for c in cursors)
    ours = sum(c.redeliver_ours for c in cursors)
    worse = [c for c in cursors if c.redeliver_pulsar > c.redeliver_ours]
    text = (
        "Redelivery after a crash: Pulsar's persist, cut to its defaults (10,000 ranges, the 5 MB entry), "
        f"would redeliver {pulsar:,} already acknowledged entries in all; the cursor store written here "
        f"would redeliver {ours:,}."
    )
    if worse:
        names = ", ".join(c.subscription for c in worse[:10]) + (" …" if len(worse) > 10 else "")
        text += f" Subscriptions where Pulsar loses acks: {names}."
        return f'<p class="note warn">{_esc(text)}</p>'
    return f'<p class="note">{_esc(text)}</p>'


def _delayed(s: RebuildSummary) -> str:
    body = []
    if s.buckets:
        rows = sorted(s.buckets, key=lambda b: (b.start_ledger_id, b.bucket_id))
        messages = sum(b.messages for b in rows)
        snapshot = sum(b.snapshot_bytes for b in rows)
        body.append(
            f"<p>{len(rows):,} buckets hold {messages:,} delayed messages in "
            f"{_esc(_bytes(snapshot))} of snapshots.</p>"
        )
        body.append(
            _table(
                (
                    "bucket",
                    "ledgers",
                    "messages",
                    "segments",
                    "snapshot bytes",
                    "first deliver-at",
                    "last deliver-at",
                ),
                [
                    (
                        b.bucket_id,
                        f"{b.start_ledger_id}-{b.end_ledger_id}",
                        b.messages,
                        b.segments,
                        b.snapshot_bytes,
                        _iso(b.first_deliver_at),
                        _iso(b.last_deliver_at),
                    )
                    for b in rows[:_BUCKET_ROWS]
                ],
            )
        )
        if len(rows) > _BUCKET_ROWS:
            body.append(
                f'<p class="note">… and {len(rows) - _BUCKET_ROWS:,} more buckets (all are listed in '
                "summary.json).</p>"
            )
    else:
        body.append(_none("no bucket: no delayed message is waiting"))
    body.append(_delayed_chart(s.delayed_histogram, s.now_ms))
    if s.buckets:
        body.append(_buckets_chart(s.buckets))
    return _section(
        "delayed",
        "Delayed index",
        "The delayed-delivery index rebuilt from the deliver-at times: buckets of ledger ranges, each "
        "persisted as a snapshot. Bucket sizes decide the memory, snapshot and recovery costs, and the "
        "due times decide when dispatch load arrives.",
        body,
    )


def _keyshared(s: RebuildSummary) -> str:
    if not s.key_load:
        body = [_none("no key load computed")]
    else:
        table = _table(
            ("selector", "consumers", "messages", "fewest", "most", "imbalance"),
            [
                (
                    k.selector,
                    len(k.consumers),
                    sum(k.messages),
                    min(k.messages, default=0),
                    max(k.messages, default=0),
                    k.imbalance,
                )
                for k in s.key_load
            ],
        )
        body = [
            table,
            '<p class="note">auto_split: PIP-34 ranges, each joining consumer halves the widest one; '
            "consistent: a hash ring with a number of points per consumer; exclusive: even fixed ranges. "
            "Imbalance is the busiest consumer's load over the mean (1.0 is perfectly even).</p>",
        ]
        if any(k.consumers and sum(k.messages) for k in s.key_load):
            body.append(_load_chart(s.key_load))
    return _section(
        "keyshared",
        "Key_Shared",
        "How many messages each consumer of a Key_Shared subscription would receive, from the hashes of "
        "the message keys, under each of Pulsar's selectors: the busiest consumer sets the pace.",
        body,
    )


# ------------------------------------------------------------------------------------------------ api


def render_html(summary: RebuildSummary) -> str:
    """The whole report as one HTML document (inline CSS and PNG charts, no script).

    Every part of the summary may be empty; an empty part reads "none" instead of a table or chart.
    """
    parts = [
        _header(summary),
        "<main>",
        _inputs(summary),
        _cursors(summary),
        _delayed(summary),
        _keyshared(summary),
        "</main>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Rebuild report: {_esc(summary.topic)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def write_report(summary: RebuildSummary, path: str | os.PathLike[str], *, sync: bool = True) -> Path:
    """Renders the report and writes it atomically to ``path``; returns the file written.

    ``path`` may be a directory (then ``report.html`` inside it); missing parent directories are
    created. The file is replaced in one rename, so a reader never sees half a report; ``sync=False``
    skips the fsyncs (the report can always be rendered again). Write errors are ``PersistFailed``.
    """
    target = Path(path)
    if target.is_dir():
        target = target / REPORT_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, render_html(summary).encode("utf-8"), sync=sync)
    return target
