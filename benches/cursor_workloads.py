"""Workloads, a Python peer and the result table of the Cursor / CursorStore benchmarks (issue 3).

The peer for acks is what a Python broker would write without cursorkit: mark-delete plus one
pyroaring ``BitMap`` per ledger, with the same roll-forward rule. The peer for persistence is what
Pulsar does: rewrite the whole ``PositionInfo`` (MessageRange or LongListMap form) on every flush.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

import cursorkit
from cursorkit import Cursor, Position
from cursorkit.ackstate import limits
from cursorkit.bench import peers

CURSORKIT = "cursorkit"
PYROARING = "pyroaring cursor (Python)"
PULSAR_MR = "Pulsar rewrite, MessageRange"
PULSAR_LLM = "Pulsar rewrite, LongListMap"
PEERS = (PYROARING, PULSAR_MR, PULSAR_LLM)
KB = 1_000
UNLIMITED = limits.UNLIMITED


# ------------------------------------------------------------------------------------------ workloads


@dataclass(frozen=True, slots=True)
class Holes:
    """``holes`` alternating ack holes spread evenly over ``ledgers`` ledgers (entry 2k+1 acked)."""

    holes: int
    ledgers: int

    @property
    def per_ledger(self) -> int:
        """Acked entries (and holes) per ledger."""
        return self.holes // self.ledgers

    def columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Ledger and entry columns, ledger-major, entries ascending."""
        ledgers = np.repeat(np.arange(1, self.ledgers + 1, dtype=np.int64), self.per_ledger)
        entries = np.tile(np.arange(1, 2 * self.per_ledger, 2, dtype=np.int64), self.ledgers)
        return ledgers, entries

    def ledger_sizes(self) -> dict[int, int]:
        """Each ledger holds twice its acked entries."""
        return {ledger: 2 * self.per_ledger for ledger in range(1, self.ledgers + 1)}

    def cursor(self) -> Cursor:
        """A cursor holding the holes (mark-delete before entry 0 of ledger 1)."""
        c = Cursor(Position(1, -1), name=f"holes-{self.holes}x{self.ledgers}", limits=UNLIMITED)
        c.ack_many(*self.columns())
        return c


def touch_ledgers(cursor: Cursor, count: int, step: int = 0) -> None:
    """Dirties ``count`` ledgers with one new ack each (a hole filled at the end of the ledger)."""
    for ledger in range(1, count + 1):
        cursor.ack(Position(ledger, 2 + 2 * step))


# ----------------------------------------------------------------------------------------- the peer


PyroaringCursor = peers.PyroaringCursor
"""The pyroaring-per-ledger cursor peer (shared with ``cursorkit bench``)."""


# ------------------------------------------------------------------------------------ persistence


def write_fsync(path: Path, data: bytes) -> None:
    """Pulsar's persist of a whole PositionInfo, here a file: write everything, then fsync."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


# ------------------------------------------------------------------------------------------- table


@dataclass(frozen=True, slots=True)
class Row:
    """One metric: unit, direction, target."""

    metric: str
    unit: str
    higher_is_better: bool
    target: float | None


ROWS = [
    Row("ack per call, 1M holes / 20 ledgers", "M/s", True, 1.0),
    Row("ack per call, in order", "M/s", True, 1.0),
    Row("ack per call from ints, holes: cursorkit / pyroaring, interleaved", "×", True, 1.5),
    Row("ack_many bulk, 1M holes / 20 ledgers", "M/s", True, 20.0),
    Row("flush, 1 dirty of 20 ledgers (1M holes)", "ms", False, 50.0),
    Row("flush, full (1M holes / 20 ledgers)", "ms", False, 300.0),
    Row("recovery (1M holes / 20 ledgers)", "ms", False, 200.0),
    Row("flush, 1 dirty of 200 ledgers (1M holes)", "ms", False, None),
    Row("flush, 10 dirty of 200 ledgers (1M holes)", "ms", False, None),
    Row("flush, 100 dirty of 200 ledgers (1M holes)", "ms", False, None),
    Row("persisted bytes, 500k alternating holes", "KB", False, 150.0),
    Row("ranges kept by Pulsar's defaults (of 500k)", "ranges", True, None),
]


@dataclass
class Table:
    """Recorded figures: (metric, implementation) -> (value, note)."""

    cells: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)

    def record(self, metric: str, impl: str, value: float, note: str = "", *, lower: bool = True) -> None:
        """Keep the best value seen for this cell."""
        old = self.cells.get((metric, impl))
        better = old is None or (value < old[0] if lower else value > old[0])
        if better:
            self.cells[(metric, impl)] = (value, note)

    def render(self, title: str, *, judge: bool) -> str:
        """Markdown: cursorkit, target, status, then each peer with its ratio to cursorkit."""
        head = ["Metric", "cursorkit", "target", "status", *PEERS]
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in ROWS:
            ours = self.cells.get((row.metric, CURSORKIT))
            peers = {p: self.cells.get((row.metric, p)) for p in PEERS}
            if ours is None and not any(peers.values()):
                continue
            cells = [row.metric, _fmt(ours, row.unit)]
            if row.target is None:
                cells += ["", ""]
            else:
                sign = "≥" if row.higher_is_better else "≤"
                cells.append(f"{sign} {row.target:g} {row.unit}")
                ok = ours is not None and (
                    ours[0] >= row.target if row.higher_is_better else ours[0] <= row.target
                )
                cells.append(("PASS" if ok else "MISS") if judge else "(smoke)")
            for peer in PEERS:
                res = peers[peer]
                if res is None:
                    cells.append("—")
                    continue
                cell = _fmt(res, row.unit)
                if ours is not None and res[0] and ours[0] and row.unit != "ranges":
                    ratio = ours[0] / res[0] if row.higher_is_better else res[0] / ours[0]
                    cell += f" (cursorkit ×{ratio:,.1f})"
                cells.append(cell)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(f"cursorkit {cursorkit.__version__}; ratios: how many times better cursorkit is.")
        return "\n".join(lines)


def _fmt(cell: tuple[float, str] | None, unit: str) -> str:
    if cell is None:
        return "n/a"
    value, note = cell
    text = f"{value:,.0f} {unit}" if unit in ("ranges", "KB") and value >= 10 else f"{value:,.3g} {unit}"
    return text + (f" {note}" if note else "")


TABLE = Table()
