"""The broker's re-reads for stuck-consumer isolation (issue 44 item 5), on a real message log.

Two of three Key_Shared consumers hang and their keys' entries are spilled; one comes back. Its
spilled entries come back in parts (the look-ahead's room), each read from the log once; the other
hung consumer's stay spilled and are not read again dispatch after dispatch (the span from the
first of them was read at every one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from cursorkit import Cursor, Position
from cursorkit.broker.log import Entry, MessageLog
from cursorkit.broker.protocol.frames import pack_stored
from cursorkit.broker.server import isolation
from cursorkit.broker.server.isolation import reread_spilled
from cursorkit.keyshared.dispatcher import Entry as ReadEntry
from cursorkit.keyshared.dispatcher import KeySharedDispatcher
from cursorkit.keyshared.selectors import AutoSplitSelector
from cursorkit.proto import pulsar_api_pb2 as api

ENTRIES = 3_000


@dataclass(eq=False)
class C:
    name: str


class CountingLog:
    """A message log that counts the entries read from it."""

    def __init__(self, log: MessageLog) -> None:
        self.log = log
        self.read = 0

    def read_from(self, position: Position, max_entries: int, max_bytes: int) -> list[Entry]:
        got = self.log.read_from(position, max_entries, max_bytes)
        self.read += len(got)
        return got


def _spilled(log: MessageLog) -> tuple[KeySharedDispatcher, C, list[Position]]:
    """Three consumers, one key each, ``ENTRIES`` in the log; "b" and "c" hang and "b" comes back.

    Returns the dispatcher, "b", and the positions in the log.
    """
    ks = KeySharedDispatcher(
        selector=AutoSplitSelector(),
        cursor=Cursor(Position(1, -1)),
        stuck_after=1.0,
        look_ahead_per_consumer=100,  # a re-read brings back 100 at most: the span comes back in parts
    )
    a, b, c = C("a"), C("b"), C("c")
    ks.add_consumer(a, 100_000)
    ks.add_consumer(b, 0)
    ks.add_consumer(c, 0)
    candidates = [f"key-{i}".encode() for i in range(1000)]
    keys = [next(k for k in candidates if ks.selector.select(ks.slot_of(k)) is owner) for owner in (a, b, c)]
    stored = [
        pack_stored(
            api.MessageMetadata(
                producer_name="p", sequence_id=i, publish_time=1, partition_key=keys[i % 3].decode()
            ),
            b"",
        )
        for i in range(ENTRIES)
    ]
    positions = log.append([(data, 1, 1) for data in stored])
    ks.isolate_stuck(0.0)
    ks.add_permits(a, 1)  # "a" makes progress; "b" and "c" hang
    ks.isolate_stuck(10.0)
    ks.add_entries(ReadEntry(p, ks.slot_of(keys[i % 3])) for i, p in enumerate(positions))
    ks.dispatch()
    figures = ks.stats().isolation
    assert figures is not None and figures.spilled == 2 * ENTRIES // 3
    ks.add_permits(b, 100_000)  # "b" comes back
    ks.add_permits(a, 1)
    ks.isolate_stuck(20.0)
    return ks, b, positions


def test_a_recovered_consumer_s_entries_are_read_once_and_a_stuck_one_s_not_again(tmp_path: Path) -> None:
    with MessageLog.open(tmp_path / "log", sync=False) as log:
        ks, b, positions = _spilled(log)
        counting = CountingLog(log)
        back = []
        for _ in range(50):  # dispatch after dispatch, as the broker does
            reread_spilled(cast(MessageLog, counting), ks, 100)
            back += [p for to, ps in ks.dispatch() if to is b for p in ps]
        assert back == positions[1::3], "b's entries came back once each, in order"
        figures = ks.stats().isolation
        assert figures is not None
        assert figures.stuck_consumers == ["c"] and figures.spilled_keys == 1
        # The span from b's first to its last entry, read once (and a read's worth past it).
        assert counting.read <= ENTRIES - 1 + 100, f"{counting.read} entries read again"
        assert figures.read_back == figures.brought_back == ENTRIES // 3


def test_a_dispatch_reads_a_bounded_part_and_the_next_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``REREAD_PER_DISPATCH`` entries a dispatch stops reading and says more is left."""
    monkeypatch.setattr(isolation, "REREAD_PER_DISPATCH", 250)
    with MessageLog.open(tmp_path / "log", sync=False) as log:
        ks, b, positions = _spilled(log)
        counting = CountingLog(log)
        assert reread_spilled(cast(MessageLog, counting), ks, 100)  # more is left
        assert counting.read == 300  # three reads: past 250
        back = []
        for _ in range(50):
            reread_spilled(cast(MessageLog, counting), ks, 100)
            back += [p for to, ps in ks.dispatch() if to is b for p in ps]
        assert back == positions[1::3]
