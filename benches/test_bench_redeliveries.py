"""Durable redelivery counts (issue 31, beyond Pulsar): bytes persisted, a flush's size, the broker's cost.

The issue's shape: 1M messages in flight over 20 ledgers of 50k entries, 10% of them redelivered
at least once (scattered at random, counts 1-3: the worst case for runs; a consumer's whole
window coming back is one run), kept in a ``RedeliveryJournal``.
- bytes per redelivered message of the journal's snapshot (target ≤ 2 B);
- bytes one flush writes after one more redelivery, at that size and at 1/10 of it (O(changed):
  the two agree);
- peers, on the same counts: Kafka's share-group state batch ({first i64, last i64, state i8,
  count i16} = 19 B per run, uncompressed, as ``__share_group_state`` writes it) and a naive
  JSON map rewritten whole on every flush.
- the journal's raise + flush of one REDELIVER of 10 messages (the broker's write-ahead), fsynced.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import cursor_workloads as cw
import delayed_workloads as dw
from cursorkit import Position
from cursorkit.ackstate import RedeliveryJournal

IN_FLIGHT = 1_000_000
SMOKE_IN_FLIGHT = 20_000
LEDGER_ENTRIES = 50_000
SHARE = 0.10

CURSORKIT = "cursorkit"
KAFKA = "Kafka share-group state batches"
JSON = "JSON map, rewritten whole"
PER_MSG = "journal snapshot per redelivered message (1M in flight, 10% redelivered)"
FLUSH_BIG = "flush after one more redelivery (100k counted)"
FLUSH_SMALL = "same, 10k counted"
FLUSH_GROWTH = "flush size: 100k counted / 10k counted"
WRITE_AHEAD = "one REDELIVER of 10 raised + flushed, fsynced, p50"

TABLE = dw.DelayedTable(
    rows=[
        cw.Row(PER_MSG, "B", False, 2.0),
        cw.Row(FLUSH_BIG, "B", False, None),
        cw.Row(FLUSH_SMALL, "B", False, None),
        cw.Row(FLUSH_GROWTH, "×", False, 1.5),
        cw.Row(WRITE_AHEAD, "ms", False, None),
    ],
    peers=(KAFKA, JSON),
)


def render(smoke: bool) -> str:
    """The table, titled for the mode (called by ``conftest.pytest_terminal_summary``)."""
    mode = "SMOKE RUN (--benchmark-disable): single shrunk runs, not a measurement" if smoke else "one run"
    return TABLE.render(f"Durable redelivery counts - {mode}", judge=not smoke)


def _scattered(in_flight: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(in_flight, int(in_flight * SHARE), replace=False))
    ledgers = (picked // LEDGER_ENTRIES).astype(np.int64) + 1
    entries = (picked % LEDGER_ENTRIES).astype(np.int64)
    counts = np.minimum(rng.geometric(0.6, len(picked)), 3).astype(np.int64)
    return ledgers, entries, counts


def _journal(tmp: Path, in_flight: int) -> tuple[RedeliveryJournal, int]:
    ls, es, ns = _scattered(in_flight, 11)
    j = RedeliveryJournal.open(tmp / f"r{in_flight}", sync=False)
    j.counts.set_many(ls, es, ns)
    return j, len(ls)


def _one_more_flush(j: RedeliveryJournal, in_flight: int) -> int:
    j.compact()
    j.counts.increment(Position(1 + (in_flight // 2) // LEDGER_ENTRIES, 7))
    return j.flush()


def test_bytes_per_redelivered_message(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """The snapshot of 10% of 1M in flight, beside Kafka's state batches and a JSON map."""
    benchmark.group = "redelivery counts"
    in_flight = SMOKE_IN_FLIGHT if smoke else IN_FLIGHT
    j, redelivered = benchmark.pedantic(lambda: _journal(tmp_path, in_flight), rounds=1, iterations=1)
    snapshot = j.compact()
    TABLE.record(PER_MSG, CURSORKIT, snapshot / redelivered)
    TABLE.record(PER_MSG, KAFKA, 19 * j.counts.run_count / redelivered)
    as_json = json.dumps(
        {f"{a.ledger_id}:{e}": n for a, b, n in j.counts.runs() for e in range(a.entry_id, b.entry_id + 1)}
    )
    TABLE.record(PER_MSG, JSON, len(as_json) / redelivered)
    big = _one_more_flush(j, in_flight)
    small_j, _ = _journal(tmp_path, in_flight // 10)
    small = _one_more_flush(small_j, in_flight // 10)
    TABLE.record(FLUSH_BIG, CURSORKIT, big)
    TABLE.record(FLUSH_BIG, JSON, len(as_json))
    TABLE.record(FLUSH_SMALL, CURSORKIT, small)
    TABLE.record(FLUSH_GROWTH, CURSORKIT, big / small)
    back = RedeliveryJournal.open(j.path, sync=False)
    assert back.counts.encode() == j.counts.encode() and not back.report.damaged
    for x in (j, small_j, back):
        x.close()


def test_write_ahead_of_one_redeliver(benchmark: Any, smoke: bool, tmp_path: Path) -> None:
    """What the broker adds to a REDELIVER of 10 messages with durable counts: raise, append, fsync."""
    benchmark.group = "redelivery counts"
    j = RedeliveryJournal.open(tmp_path / "wal", sync=True)
    rounds = 20 if smoke else 500
    times: list[float] = []

    def run() -> None:
        for r in range(rounds):
            ls = np.full(10, 1, np.int64)
            es = np.arange(r * 10, r * 10 + 10, dtype=np.int64) * 3
            t0 = time.perf_counter()
            j.counts.set_many(ls, es, j.counts.get_many(ls, es).astype(np.int64) + 1)
            j.flush()
            times.append(time.perf_counter() - t0)

    benchmark.pedantic(run, rounds=1, iterations=1)
    TABLE.record(WRITE_AHEAD, CURSORKIT, float(np.percentile(np.asarray(times) * 1e3, 50)))
    j.close()
