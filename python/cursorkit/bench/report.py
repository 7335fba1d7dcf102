"""The tables, the JSON and the comparison of ``cursorkit bench``.

JSON (``--json``): ``{"format": "cursorkit-bench", "version": 1, "cursorkit", "quick", "machine": {...},
"packages": {...}, "call_floor_mcalls", "rows": [{"group", "workload", "unit", "higher_is_better",
"values": {implementation: value}, "note"}]}``. ``--compare A B`` matches rows by group, workload and
implementation and shows B against A, flagging changes beyond 10% either way.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cursorkit.bench.measure import Row
from cursorkit.errors import InvalidArgument

__all__ = ["FORMAT", "compare", "load", "machine", "render", "to_json"]

FORMAT = "cursorkit-bench"
_PACKAGES = ("cursorkit", "numpy", "pyarrow", "pyroaring", "sortedcontainers", "mmh3", "pyspark")
_NOTICEABLE = 0.10


def machine() -> dict[str, Any]:
    """Facts of this machine and interpreter, to tell results of different machines apart."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }


def _packages() -> dict[str, str]:
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def to_json(rows: list[Row], *, quick: bool, floor: float) -> dict[str, Any]:
    """The results as a JSON document."""
    from cursorkit import __version__

    return {
        "format": FORMAT,
        "version": 1,
        "cursorkit": __version__,
        "quick": quick,
        "machine": machine(),
        "packages": _packages(),
        "call_floor_mcalls": round(floor, 3),
        "rows": [r.as_json() for r in rows],
    }


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results file written by ``--json``; ``InvalidArgument`` for anything else."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise InvalidArgument(f"{path}: not a readable JSON results file ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("rows"), list):
        raise InvalidArgument(f"{path}: not a cursorkit bench results file")
    return doc


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:.3g} {unit}"


def render(rows: list[Row], console: Console, *, floor: float, quick: bool) -> None:
    """One table per group: cursorkit, then each peer with how many times better cursorkit is."""
    mode = (
        "quick run (small sizes, one round): a smoke test, not a measurement" if quick else "best of 5 rounds"
    )
    console.print(
        f"cursorkit bench, {mode}; CPython call floor here: {floor:.1f} M calls/s "
        "(no per-call API runs faster than this loop)",
        highlight=False,
    )
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        peers = sorted({p for r in members for p in r.values if p != "cursorkit"})
        table = Table(title=group, title_justify="left")
        table.add_column("workload")
        table.add_column("cursorkit", justify="right")
        for peer in peers:
            table.add_column(peer, justify="right")
        table.add_column("note")
        for r in members:
            cells = [
                r.workload + (" (lower is better)" if not r.higher_is_better else ""),
                _fmt(r.values.get("cursorkit"), r.unit),
            ]
            for peer in peers:
                value = r.values.get(peer)
                ratio = r.ratio(peer)
                cells.append(_fmt(value, r.unit) + (f" (×{ratio:.2g})" if ratio is not None else ""))
            cells.append(r.note)
            table.add_row(*cells)
        console.print(table)
    console.print(
        "×N: how many times better cursorkit is than that peer on the row's workload.", highlight=False
    )


def compare(a: dict[str, Any], b: dict[str, Any], console: Console) -> None:
    """Shows B against A per workload and implementation, flagging noticeable changes."""

    def index(doc: dict[str, Any]) -> dict[tuple[str, str, str], tuple[float, str, bool]]:
        out = {}
        for row in doc["rows"]:
            for impl, value in row.get("values", {}).items():
                out[(row["group"], row["workload"], impl)] = (
                    float(value),
                    row["unit"],
                    bool(row["higher_is_better"]),
                )
        return out

    ia, ib = index(a), index(b)
    table = Table(
        title=f"A: cursorkit {a.get('cursorkit')} on {a['machine'].get('platform')} "
        f"(floor {a.get('call_floor_mcalls')} M/s)\nB: cursorkit {b.get('cursorkit')} on "
        f"{b['machine'].get('platform')} (floor {b.get('call_floor_mcalls')} M/s)",
        title_justify="left",
    )
    for col in ("group", "workload", "implementation", "A", "B", "change"):
        table.add_column(col)
    for key in sorted(set(ia) & set(ib)):
        (va, unit, higher), (vb, _, _) = ia[key], ib[key]
        if not va:
            continue
        gain = (vb / va - 1.0) if higher else (va / vb - 1.0 if vb else 0.0)
        flag = ""
        if gain <= -_NOTICEABLE:
            flag = " worse"
        elif gain >= _NOTICEABLE:
            flag = " better"
        table.add_row(*key, _fmt(va, unit), _fmt(vb, unit), f"{gain:+.0%}{flag}")
    console.print(table)
    only = sorted({k[:2] for k in set(ia) ^ set(ib)})
    if only:
        console.print(f"{len(only)} workloads are in one file only (different groups or versions).")
