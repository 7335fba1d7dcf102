"""The report's HTML building blocks: its stylesheet, escaped text, number formats, tables, sections.

Shared by the single-topic report and the many-topic one (``cluster_report``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

CSS = """
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


def esc(value: object) -> str:
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


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time with milliseconds (the raw number if out of range)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def byte_size(n: int) -> str:
    """A byte count for prose: ``1,234 B`` or ``12.3 KiB`` / ``MiB`` / ``GiB``."""
    if abs(n) < 1024:
        return f"{n:,} B"
    exponent = min(3, int(math.log(abs(n), 1024)))
    return f"{n / 1024**exponent:,.1f} {('KiB', 'MiB', 'GiB')[exponent - 1]}"


def table(
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
            out.append(f"<{tag}{cls}>{esc(_fmt(value))}</{tag}>")
        return "".join(out)

    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = [f"<tr>{cells(r)}</tr>" for r in rows]
    if total is not None:
        body.append(f'<tr class="total">{cells(total)}</tr>')
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def none(what: str) -> str:
    """The placeholder for an empty part of the summary."""
    return f'<p class="none">none ({esc(what)})</p>'


def section(anchor: str, title: str, why: str, body: Iterable[str]) -> str:
    """A report section: heading, one sentence saying what it shows and why it matters, content."""
    return (
        f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2><p class="why">{esc(why)}</p>'
        + "".join(body)
        + "</section>"
    )
