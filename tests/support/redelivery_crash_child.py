"""Crash-test child: raises redelivery counts and flushes its journal in a loop until killed.

``python redelivery_crash_child.py PATH SEED START`` opens the journal at PATH, then for flush
``n = START, START+1, ...`` applies :func:`step` (seeded by SEED and n) and flushes, printing
``F n`` after each flush returns. Small journals compact often, so kills land in both paths.
"""

from __future__ import annotations

import random
import sys

from cursorkit import Position
from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.store.redelivery_journal import RedeliveryJournal


def step(counts: RedeliveryCounts, seed: int, n: int) -> None:
    """Flush ``n``'s changes: a burst of raises over two ledgers, now and then a forgotten one."""
    rng = random.Random(seed * 1_000_003 + n)
    for _ in range(rng.randint(1, 400)):
        p = Position(rng.randint(1, 2), rng.randint(0, 5_000))
        if rng.random() < 0.1:
            counts.set(p, 0)
        else:
            counts.increment(p)


def main() -> None:
    path, seed, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    journal = RedeliveryJournal.open(path)
    n = start
    while True:
        step(journal.counts, seed, n)
        journal.flush()
        print(f"F {n}", flush=True)
        n += 1


if __name__ == "__main__":
    main()
