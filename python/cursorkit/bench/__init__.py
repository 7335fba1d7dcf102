"""``cursorkit bench``: the standard workloads beside the peers installed here, as a product.

People adopt a library like this one by measuring it against what they run today, on their own
machines: ``cursorkit bench [--quick] [--only GROUP] [--json FILE]`` runs the workloads
(:mod:`cursorkit.bench.workloads`), prints ratio tables with a CPython call-floor calibration, and
``cursorkit bench --compare A.json B.json`` shows what changed between versions or machines.
"""

from __future__ import annotations

from cursorkit.bench.cli import run
from cursorkit.bench.measure import Plan, Row, call_floor
from cursorkit.bench.workloads import GROUPS

__all__ = ["GROUPS", "Plan", "Row", "call_floor", "run"]
