"""``report.html`` of a many-topic rebuild: the topics by risk, their spread, the riskiest in detail.

Risk is what a broker crash would cost: the acknowledged messages Pulsar's default cursor limits
would redeliver, then the ack-hole ranges, then the backlog (``topic_risk.risk_order``). The page has
the run's totals, a table of the riskiest topics (partitions listed under their partitioned topic's
name), histograms of the per-topic figures across the cluster, and the single-topic report's sections
for the ``detail`` riskiest topics, rendered from their ``summary.json``. Everything is inline (CSS,
PNG charts): the file is self-contained, like the single-topic report.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cursorkit.pipeline.report.charts import figure
from cursorkit.pipeline.report.markup import CSS, esc, section, table
from cursorkit.pipeline.report.sections import (
    cursors_section,
    delayed_section,
    inputs_section,
    keyshared_section,
    names,
    verdict_html,
)
from cursorkit.pipeline.results import RebuildSummary

__all__ = ["DETAIL_TOPICS", "TABLE_TOPICS", "partitioned_name", "render_cluster_html", "verdict"]

TABLE_TOPICS = 200
"""Rows of the topics table (the rest are counted)."""
DETAIL_TOPICS = 5
"""Riskiest topics shown in full detail."""

_PARTITION = re.compile(r"^(.*)-partition-(\d+)$")

_COLUMNS = (
    ("messages", "messages"),
    ("subscriptions", "subs"),
    ("backlog", "backlog"),
    ("ranges", "ack-hole ranges"),
    ("redeliver_pulsar", "redeliver after a crash (Pulsar)"),
    ("delayed_pending", "delayed pending"),
    ("buckets", "buckets"),
)


def partitioned_name(topic: str) -> tuple[str, int | None]:
    """The partitioned topic a partition belongs to and its index; ``(topic, None)`` otherwise."""
    m = _PARTITION.match(topic)
    return (m.group(1), int(m.group(2))) if m else (topic, None)


def _groups(topics: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for t in topics:
        groups.setdefault(partitioned_name(t)[0], []).append(t)
    return groups


def _distributions(topics: Mapping[str, Mapping[str, Any]]) -> str:
    fig = Figure(figsize=(9.5, 5.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 3).ravel()
    for ax, (key, label) in zip(axes, [c for c in _COLUMNS if c[0] != "subscriptions"], strict=False):
        values = np.asarray([int(f.get(key, 0)) for f in topics.values()], dtype=np.float64)
        top = max(float(values.max(initial=0)), 1.0)
        bins = np.concatenate([[0.0], np.logspace(0, np.log10(top + 1), 20)])
        counts, _, _ = ax.hist(values, bins=bins, color="#4477aa")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_yscale("log")
        ax.set_xticks(_decade_ticks(top, 5), [_short(v) for v in _decade_ticks(top, 5)])
        most = float(max(counts.max(initial=1), 1))
        y_ticks = [v for v in _decade_ticks(most, 6) if 1 <= v <= most]
        ax.set_yticks(y_ticks, [_short(v) for v in y_ticks])
        ax.minorticks_off()
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("topics", fontsize=8)
        ax.tick_params(labelsize=8)
    return figure(
        fig,
        "histograms of per-topic figures",
        "How the figures spread over the topics (log scales: a few topics usually carry most).",
    )


def _decade_ticks(top: float, most: int) -> list[float]:
    """0 and powers of ten up to ``top``, every n-th decade so that at most ``most`` ticks are drawn."""
    decades = max(1, math.ceil(math.log10(top + 1)))
    step = max(1, math.ceil((decades + 1) / (most - 1)))
    return [0.0, *(10.0**k for k in range(0, decades + 1, step))]


def _short(value: float) -> str:
    """A tick label: ``0``, ``1``, ``100``, ``10k``, ``1M``, ``100G``."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _table(topics: Mapping[str, Mapping[str, Any]], order: Sequence[str], limit: int) -> str:
    rows = []
    for t in order[:limit]:
        f = topics[t]
        name, part = partitioned_name(t)
        label = f"{name} (partition {part})" if part is not None else t
        rows.append([label, *(f.get(k, 0) for k, _ in _COLUMNS)])
    body = table(["topic", *(label for _, label in _COLUMNS)], rows)
    more = f"<p>… and {len(order) - limit:,} more topics.</p>" if len(order) > limit else ""
    return body + more


def _totals(summary: Mapping[str, Any], topics: Mapping[str, Mapping[str, Any]]) -> str:
    groups = _groups(topics)
    partitioned = sum(1 for g in groups.values() if len(g) > 1 or partitioned_name(g[0])[1] is not None)
    rows = [
        ["topics (partitions counted apart)", len(topics)],
        ["partitioned topics", partitioned],
        ["messages", sum(int(f.get("messages", 0)) for f in topics.values())],
        ["acks", sum(int(f.get("acks", 0)) for f in topics.values())],
        ["subscriptions", sum(int(f.get("subscriptions", 0)) for f in topics.values())],
        ["backlog", sum(int(f.get("backlog", 0)) for f in topics.values())],
        ["redeliver after a crash (Pulsar)", sum(int(f.get("redeliver_pulsar", 0)) for f in topics.values())],
        [
            "cursors Pulsar could not persist whole",
            sum(int(f.get("not_persistable_pulsar", 0)) for f in topics.values()),
        ],
        ["delayed messages pending", sum(int(f.get("delayed_pending", 0)) for f in topics.values())],
    ]
    rows += [[f"stage: {name}", f"{sec:.1f} s"] for name, sec in summary.get("stages", [])]
    return table(["", "value"], rows)


def verdict(topics: Mapping[str, Mapping[str, Any]], order: Sequence[str]) -> tuple[str, list[str]]:
    """The cluster report's first words: ``ok``, ``check`` or ``risk``, and what and where.

    ``order`` is the topics riskiest first; the topics named are the first of it.
    """
    losing = [t for t in order if int(topics[t].get("redeliver_pulsar", 0)) > 0]
    uncut = [
        t
        for t in order
        if int(topics[t].get("not_persistable_pulsar", 0)) and not int(topics[t].get("redeliver_pulsar", 0))
    ]
    if losing:
        total = sum(int(topics[t].get("redeliver_pulsar", 0)) for t in losing)
        sentences = [
            f"Pulsar would redeliver {total:,} acked entries on {len(losing):,} "
            f"topic{'s' if len(losing) != 1 else ''} after a broker crash: {names(losing)}. Their "
            "ack holes are more than Pulsar's default cursor persistence keeps (10,000 ranges, a 5 MB entry)."
        ]
        if uncut:
            sentences.append(f"Cursors Pulsar cannot persist whole, without loss: {names(uncut)}.")
        return "risk", sentences
    if uncut:
        return "check", [
            f"Pulsar's defaults cannot persist some cursors whole, though none would redeliver acknowledged "
            f"entries: {names(uncut)}."
        ]
    return "ok", [
        f"No cursor of the {len(topics):,} topics would lose acknowledgements to Pulsar's default cursor "
        f"persistence: a crash would redeliver none."
    ]


def render_cluster_html(
    summary: Mapping[str, Any],
    order: Sequence[str],
    detail: Callable[[str], RebuildSummary | None],
    *,
    table_topics: int = TABLE_TOPICS,
    detail_topics: int = DETAIL_TOPICS,
) -> str:
    """The report of a many-topic run (``summary`` = its ``summary.json``; ``order`` riskiest first).

    ``detail(topic)`` gives a topic's own summary, for the riskiest ``detail_topics`` topics.
    """
    topics: Mapping[str, Mapping[str, Any]] = summary["topics"]
    command = str(summary.get("command", ""))
    facts = [("run", summary.get("run", "")), ("master", summary.get("master", ""))]
    facts += [("output", summary.get("out_dir", ""))] + ([("command", command)] if command else [])
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    parts = [
        f"<header><h1>Rebuild of {len(topics):,} topics</h1>{verdict_html(*verdict(topics, order))}"
        f'<dl class="facts">{dl}</dl></header><main>',
        section("totals", "Totals", "The whole run at a glance.", [_totals(summary, topics)]),
        section(
            "topics",
            "Topics, riskiest first",
            "Ordered by what a broker crash would redeliver under Pulsar's default cursor limits, "
            "then ack-hole ranges, then backlog: the columns of the same names.",
            [_table(topics, order, table_topics)],
        ),
        section(
            "spread", "Across the cluster", "Per-topic figures as distributions.", [_distributions(topics)]
        ),
    ]
    for t in order[:detail_topics]:
        one = detail(t)
        if one is None:
            continue
        parts.append(
            f'<section id="detail-{esc(t)}"><h2>Detail: {esc(t)}</h2>'
            + inputs_section(one)
            + cursors_section(one)
            + delayed_section(one)
            + keyshared_section(one)
            + "</section>"
        )
    parts.append("</main>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Rebuild report: {len(topics):,} topics</title><style>{CSS}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def detail_reader(
    read: Callable[[str], bytes | None], dirs: Mapping[str, str]
) -> Callable[[str], RebuildSummary | None]:
    """``detail`` for :func:`render_cluster_html`: each topic's ``summary.json``, in ``dirs[topic]``."""

    def detail(topic: str) -> RebuildSummary | None:
        data = read(f"{dirs[topic]}/summary.json") if topic in dirs else None
        return RebuildSummary.from_json(json.loads(data)) if data else None

    return detail
