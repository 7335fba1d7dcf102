"""``cursorkit bench``: run the chosen groups, print the tables, write JSON, or compare two results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from cursorkit.bench.measure import Plan, Row, call_floor
from cursorkit.bench.report import compare, load, render, to_json
from cursorkit.bench.workloads import GROUPS, WORKLOADS
from cursorkit.errors import InvalidArgument

__all__ = ["run", "run_bench"]


def run(groups: list[str] | None, *, quick: bool, console: Console | None = None) -> tuple[list[Row], float]:
    """Measures the call floor and the groups (all when None); returns the rows and the floor."""
    chosen = groups or list(GROUPS)
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown:
        raise InvalidArgument(f"--only {unknown[0]}: no such group; the groups are {', '.join(GROUPS)}")
    plan = Plan(quick=quick)
    floor = call_floor(100_000 if quick else 1_000_000)
    rows: list[Row] = []
    for name in chosen:
        if console is not None:
            console.print(f"[dim]{name}: {WORKLOADS[name]}[/dim]")
        rows.extend(GROUPS[name](plan))
    return rows, floor


def run_bench(args: argparse.Namespace, console: Console) -> int:
    """The ``bench`` command: ``--list``, ``--compare A B``, or a run (``--quick``/``--only``/``--json``)."""
    if args.list:
        for name, line in WORKLOADS.items():
            console.print(f"{name:<12} {line}", highlight=False)
        return 0
    if args.compare:
        first, second = (load(p) for p in args.compare)
        compare(first, second, console)
        return 0
    rows, floor = run(args.only, quick=args.quick, console=console)
    render(rows, console, floor=floor, quick=args.quick)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(to_json(rows, quick=args.quick, floor=floor), indent=1) + "\n")
        console.print(f"results written to {path}", highlight=False)
    return 0
