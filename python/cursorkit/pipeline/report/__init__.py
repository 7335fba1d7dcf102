"""The rebuild report: one self-contained ``report.html`` from a :class:`RebuildSummary`.

Everything is inline (CSS in a ``<style>`` element, charts as base64 PNG data URIs, no script, no
external fetch), so the file can be mailed, attached to a ticket or opened offline. Every piece of
text from the summary is HTML-escaped.
"""

from __future__ import annotations

import os
from pathlib import Path

from cursorkit.fsio import atomic_write
from cursorkit.pipeline.report.markup import CSS, esc
from cursorkit.pipeline.report.sections import (
    RULES,
    cursors_section,
    delayed_section,
    header,
    inputs_section,
    keyshared_section,
)
from cursorkit.pipeline.results import RebuildSummary

__all__ = ["REPORT_NAME", "RULES", "render_html", "write_report"]

REPORT_NAME = "report.html"
"""The file name :func:`write_report` uses when given a directory."""


def render_html(summary: RebuildSummary) -> str:
    """The whole report as one HTML document (inline CSS and PNG charts, no script).

    Every part of the summary may be empty; an empty part reads "none" instead of a table or chart.
    """
    parts = [
        header(summary),
        "<main>",
        inputs_section(summary),
        cursors_section(summary),
        delayed_section(summary),
        keyshared_section(summary),
        "</main>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Rebuild report: {esc(summary.topic)}</title><style>{CSS}</style></head>"
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
