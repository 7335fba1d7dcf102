"""The process tests/ackstate/test_store_crash.py kills: recover a store, then ack and flush until killed.

Run as ``python store_crash_child.py STORE_DIR SEED``. Before a flush that will roll the log it prints
``C <n>``; after flush ``n`` returns it prints ``F <n>``; stdout is flushed after every line. The acks
between flushes come from :func:`step`, which the parent replays with the same seed.
"""

from __future__ import annotations

import random
import sys

from cursorkit import Cursor, Position
from cursorkit.ackstate import CursorStore, StoreOptions

LEDGERS = (1, 2, 3, 4)
ENTRIES = 3000
SIZES = dict.fromkeys(LEDGERS, ENTRIES)
BATCH_SIZE = 8
OPTIONS = StoreOptions(compact_min_dead_bytes=6 * 1024, compact_dead_ratio=0.5)
MAX_FLUSHES = 100_000


def step(cursor: Cursor, rng: random.Random, flush_no: int) -> None:
    """The acks before flush ``flush_no``: individual, bulk, batch-index and cumulative."""
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        ledger = rng.choice(LEDGERS)
        entry = rng.randrange(ENTRIES)
        if kind < 0.55:
            cursor.ack(Position(ledger, entry))
        elif kind < 0.7:
            entries = list(range(entry, min(entry + rng.randint(1, 12), ENTRIES)))
            cursor.ack_many([ledger] * len(entries), entries)
        elif kind < 0.97:
            cursor.ack_batch_index(Position(ledger, entry - entry % 5), rng.randrange(BATCH_SIZE), BATCH_SIZE)
        else:
            md = cursor.mark_delete_position
            target = md.entry_id + rng.randint(1, 15)
            if md.ledger_id not in SIZES:
                cursor.ack_cumulative(Position(LEDGERS[0], target - md.entry_id - 1))
            elif target < ENTRIES:
                cursor.ack_cumulative(Position(md.ledger_id, target))
            elif md.ledger_id != LEDGERS[-1]:
                cursor.ack_cumulative(Position(md.ledger_id + 1, target - ENTRIES))
    cursor.properties["flushes"] = flush_no


def main(argv: list[str]) -> None:
    """Recovers the store at ``argv[0]`` and flushes acks seeded by ``argv[1]`` until killed."""
    path, seed = argv[0], int(argv[1])
    store = CursorStore.open(path, options=OPTIONS)
    cursor = store.recover(ledger_sizes=SIZES)
    rng = random.Random(seed)
    out = sys.stdout
    out.write("R\n")
    out.flush()
    for n in range(1, MAX_FLUSHES + 1):
        step(cursor, rng, n)
        if store.compaction_due:
            out.write(f"C {n}\n")
            out.flush()
        store.flush(cursor)
        out.write(f"F {n}\n")
        out.flush()
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
