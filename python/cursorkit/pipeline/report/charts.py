"""The report's charts: matplotlib figures drawn on an Agg canvas, inlined as base64 PNG ``<figure>``s.

Matplotlib's object API (``Figure`` + the Agg canvas) keeps no pyplot global state and is safe to call
from several threads; text placed in a chart is protected from matplotlib's ``$...$`` math parsing.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, StrMethodFormatter

from cursorkit.pipeline.report.markup import esc, iso, none
from cursorkit.pipeline.results import BucketRow, CursorRow, KeyLoad

_MAX_SERIES = 10
"""Subscriptions drawn in the ack-hole chart (the ones with the most holes)."""
_MAX_GROUPS = 40
"""Subscriptions drawn in the encoded-size chart (the ones with the largest range encoding)."""
_MAX_BARS = 400
"""Bars in the delayed-messages chart; longer spans are drawn in wider bins."""
_MAX_LABEL = 32
_HOUR_MS = 3_600_000
_THOUSANDS = StrMethodFormatter("{x:,.0f}")


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


def figure(fig: Figure, alt: str, caption: str) -> str:
    """``fig`` as an inline PNG ``<figure>``; the figure is cleared afterwards to free its artists."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", metadata={"Software": None})
    finally:
        fig.clear()
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def _category_ticks(ax: Axes, x: npt.NDArray[np.int64], labels: Sequence[str]) -> None:
    """Category names under grouped bars, slanted when there are many or long ones."""
    slanted = len(labels) > 8 or sum(len(label) for label in labels) > 80
    ax.set_xticks(x, labels, rotation=30 if slanted else 0, ha="right" if slanted else "center")


def _wide_range(values: Iterable[int]) -> bool:
    """Whether the positive values span two orders of magnitude or more (then a log axis reads better)."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) >= 100 * min(positive)


def holes_chart(holes: dict[str, dict[int, int]]) -> str:
    """Ack holes per ledger: one step line per subscription over ledger id."""
    series = [(sub, per) for sub, per in holes.items() if per]
    if not series:
        return none("no ack holes: every subscription is acknowledged up to its last acked entry")
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
    return figure(fig, "ack holes per ledger", caption)


def encoding_chart(cursors: Sequence[CursorRow]) -> str:
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
    return figure(fig, "encoded size per encoding", caption)


def delayed_chart(histogram: Sequence[tuple[int, int]], now_ms: int) -> str:
    """Not-yet-due delayed messages by the hour they fall due, on an axis of time after now."""
    if not histogram or not any(count for _, count in histogram):
        return none("no delayed message is waiting")
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
    ax.set_xlabel(f"{unit} after now ({iso(now_ms)})")
    per = "hour" if bin_hours == 1 else f"{bin_hours} hours"
    ax.set_ylabel(f"messages due per {per}")
    ax.set_title("Delayed messages over time")
    ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.grid(axis="y", alpha=0.3)
    return figure(
        fig,
        "delayed messages over time",
        f"Messages not yet due, by the {per} they fall due, counted from now.",
    )


def buckets_chart(buckets: Sequence[BucketRow]) -> str:
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
    return figure(
        fig,
        "messages per bucket",
        "Messages (top) and snapshot bytes (bottom) of each bucket, in ledger order.",
    )


def load_chart(loads: Sequence[KeyLoad]) -> str:
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
    return figure(fig, "hash load per consumer", "Messages each consumer would receive under each selector.")
