"""The report's sections, each an HTML fragment of a :class:`RebuildSummary`.

The verdict, the header with stage timings, inputs and rules, cursors, the delayed index, Key_Shared.
"""

from __future__ import annotations

from collections.abc import Sequence

from cursorkit.pipeline.report.charts import (
    buckets_chart,
    delayed_chart,
    encoding_chart,
    holes_chart,
    load_chart,
)
from cursorkit.pipeline.report.markup import byte_size, esc, iso, none, section, table
from cursorkit.pipeline.results import CursorRow, RebuildSummary

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
_SECTIONS = (
    ("inputs", "Inputs and rules"),
    ("cursors", "Cursors"),
    ("delayed", "Delayed index"),
    ("keyshared", "Key_Shared"),
)


def names(items: Sequence[str], shown: int = 5) -> str:
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
            f"{names([c.subscription for c in losing])} after a broker crash: their ack holes are more "
            "than Pulsar's default cursor persistence keeps (10,000 ranges, a 5 MB entry)."
        )
    ours = [c for c in s.cursors if c.redeliver_ours > 0]
    if ours:
        risks.append(
            f"The cursor stores written here would redeliver {sum(c.redeliver_ours for c in ours):,} "
            f"acked entries on {names([c.subscription for c in ours])}."
        )
    uncut = [c for c in s.cursors if not c.persistable_pulsar and c.redeliver_pulsar == 0]
    if uncut:
        checks.append(
            f"Pulsar's defaults cannot persist the cursors of {names([c.subscription for c in uncut])} "
            "whole, though nothing acknowledged would be redelivered."
        )
    for rule, text in (
        ("acks_unknown_position", "acks name positions the message log does not hold (ignored)"),
        ("acks_after_now", f"acks come after now, {iso(s.now_ms)} (ignored)"),
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


def verdict_html(kind: str, sentences: Sequence[str]) -> str:
    """The verdict box (``kind`` from :func:`_verdict`)."""
    title = {"ok": "Healthy.", "check": "Healthy, with findings to check.", "risk": "At risk."}[kind]
    body = "".join(f"<p>{esc(t)}</p>" for t in sentences)
    return f'<section id="verdict" class="verdict {kind}"><p><strong>{title}</strong></p>{body}</section>'


def header(s: RebuildSummary) -> str:
    """The page header: the verdict, the run's facts, the section links and the stage timings."""
    facts = [
        ("topic", s.topic),
        ("now", f"{iso(s.now_ms)} ({s.now_ms} ms)"),
        ("master", s.master),
        ("output", s.out_dir),
        ("total time", f"{s.total_seconds:.3f} s"),
    ]
    if s.command:
        facts.append(("command", s.command))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    total = s.total_seconds
    if s.stages:
        timings = table(
            ("stage", "seconds", "share %"),
            [(t.name, t.seconds, 100 * t.seconds / total if total else 0.0) for t in s.stages],
            total=("total", total, 100.0 if total else 0.0),
        )
    else:
        timings = none("no stage was timed")
    nav = " ".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in _SECTIONS)
    return (
        f"<header><h1>Rebuild report: {esc(s.topic)}</h1>{verdict_html(*_verdict(s))}"
        '<p class="why">The state of every subscription of this topic rebuilt from its message and ack '
        "logs as it stood at now: what was read, what was set aside, and what the rebuilt cursors, "
        f'delayed index and Key_Shared load look like.</p><dl class="facts">{dl}</dl><nav>{nav}</nav>'
        '<h3>Stage timings</h3><p class="why">Wall time of each stage of the job; the slowest stage is '
        f"where a faster rebuild has to start.</p>{timings}</header>"
    )


def inputs_section(s: RebuildSummary) -> str:
    """Inputs and rules: what was read, what was set aside under which rule, the settings."""
    body = ["<h3>Inputs</h3>"]
    if s.inputs:
        body.append(table(("input", "count"), sorted(s.inputs.items())))
    else:
        body.append(none("no input counts recorded"))
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
            table(
                ("rule", "rows", "meaning"),
                [(name, rows, RULES.get(name, "")) for name, rows in sorted(s.rules.items())],
                total=("total", sum(s.rules.values()), ""),
            )
        )
    else:
        body.append(none("no row was set aside"))
    body.append("<h3>Settings</h3>")
    if s.config:
        body.append(table(("setting", "value"), [(k, _setting(v)) for k, v in sorted(s.config.items())]))
    else:
        body.append(none("no settings recorded"))
    return section(
        "inputs",
        "Inputs and rules",
        "What the job read from the logs and what it set aside: counts that differ from what you expect "
        "point to a wrong input path, a filter or mismatched logs.",
        body,
    )


def _setting(value: object) -> str:
    """A setting's value for the settings table (``str`` for text, ``repr`` otherwise)."""
    return value if isinstance(value, str) else repr(value)


def cursors_section(s: RebuildSummary) -> str:
    """Cursors: each subscription's rebuilt state, its encoded sizes and their charts."""
    if not s.cursors:
        body = [none("no subscription")]
    else:
        rows = sorted(s.cursors, key=lambda c: c.subscription)
        state = table(
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
        sizes = table(
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
            holes_chart(s.holes),
            encoding_chart(rows),
        ]
    return section(
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
        listed = ", ".join(c.subscription for c in worse[:10]) + (" …" if len(worse) > 10 else "")
        text += f" Subscriptions where Pulsar loses acks: {listed}."
        return f'<p class="note warn">{esc(text)}</p>'
    return f'<p class="note">{esc(text)}</p>'


def delayed_section(s: RebuildSummary) -> str:
    """Delayed index: the buckets, and when their messages fall due."""
    body = []
    if s.buckets:
        rows = sorted(s.buckets, key=lambda b: (b.start_ledger_id, b.bucket_id))
        messages = sum(b.messages for b in rows)
        snapshot = sum(b.snapshot_bytes for b in rows)
        body.append(
            f"<p>{len(rows):,} buckets hold {messages:,} delayed messages in "
            f"{esc(byte_size(snapshot))} of snapshots.</p>"
        )
        body.append(
            table(
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
                        iso(b.first_deliver_at),
                        iso(b.last_deliver_at),
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
        body.append(none("no bucket: no delayed message is waiting"))
    body.append(delayed_chart(s.delayed_histogram, s.now_ms))
    if s.buckets:
        body.append(buckets_chart(s.buckets))
    return section(
        "delayed",
        "Delayed index",
        "The delayed-delivery index rebuilt from the deliver-at times: buckets of ledger ranges, each "
        "persisted as a snapshot. Bucket sizes decide the memory, snapshot and recovery costs, and the "
        "due times decide when dispatch load arrives.",
        body,
    )


def keyshared_section(s: RebuildSummary) -> str:
    """Key_Shared: each selector's load per consumer."""
    if not s.key_load:
        body = [none("no key load computed")]
    else:
        loads = table(
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
            loads,
            '<p class="note">auto_split: PIP-34 ranges, each joining consumer halves the widest one; '
            "consistent: a hash ring with a number of points per consumer; exclusive: even fixed ranges. "
            "Imbalance is the busiest consumer's load over the mean (1.0 is perfectly even).</p>",
        ]
        if any(k.consumers and sum(k.messages) for k in s.key_load):
            body.append(load_chart(s.key_load))
    return section(
        "keyshared",
        "Key_Shared",
        "How many messages each consumer of a Key_Shared subscription would receive, from the hashes of "
        "the message keys, under each of Pulsar's selectors: the busiest consumer sets the pace.",
        body,
    )
