"""The process tests/broker/test_message_log_crash.py kills: open a message log, then append until killed.

Run as ``python message_log_crash_child.py LOG_DIR ROUND``. It prints ``R`` once the log is open;
``T <ledger> <entry>`` before each trim to that position; ``A <ledger> <entry> <count> <n>`` after
an append of ``count`` entries (the child's entries ``n``, ``n+1``, ...) returned its first position;
stdout is flushed after every line. Entry ``n`` of round ``r`` is :func:`entry`, so the parent
knows every entry's bytes from its publish time alone.
"""

from __future__ import annotations

import random
import sys

from cursorkit import Position
from cursorkit.broker.log import MessageLog

SEGMENT_BYTES = 8 * 1024
MAX_GROUP = 12
ROUND_TIMES = 1_000_000
"""An entry's publish time is ``round * ROUND_TIMES + n``."""
MAX_APPENDS = 100_000


def entry(rnd: int, n: int) -> tuple[bytes, int, int]:
    """Entry ``n`` of round ``rnd``: (data, publish time, messages)."""
    rng = random.Random(rnd * ROUND_TIMES + n)
    return rng.randbytes(rng.randrange(0, 700)), rnd * ROUND_TIMES + n, 1 + n % 4


def main(argv: list[str]) -> None:
    """Appends seeded groups to the log at ``argv[0]`` for round ``argv[1]`` until killed."""
    path, rnd = argv[0], int(argv[1])
    rng = random.Random(rnd)
    out = sys.stdout
    with MessageLog.open(path, segment_bytes=SEGMENT_BYTES) as log:
        out.write("R\n")
        out.flush()
        n = 0
        for i in range(MAX_APPENDS):
            count = rng.randint(1, MAX_GROUP)
            first = log.append([entry(rnd, n + k) for k in range(count)])[0]
            out.write(f"A {first.ledger_id} {first.entry_id} {count} {n}\n")
            out.flush()
            n += count
            if i % 25 == 24:
                keep = Position(log.current_ledger - 2, 0)
                out.write(f"T {keep.ledger_id} {keep.entry_id}\n")
                out.flush()
                log.trim(keep)


if __name__ == "__main__":
    main(sys.argv[1:])
