"""Cursor.persist / encode / decode: the three byte forms, their Pulsar wire layout, limits and damage."""

from __future__ import annotations

import copy
import pickle
import zlib
from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursor_model import ModelCursor, Pos
from cursorkit import Cursor, PersistLimits, Position
from cursorkit.ackstate import NETTY_MAX_FRAME_BYTES, TruncationCounters, persist
from cursorkit.errors import CorruptSnapshot, CursorkitError, InvalidArgument, UnsupportedVersion
from cursorkit.proto import cursor_snapshot_pb2 as snap
from cursorkit.proto import pulsar_ml_pb2 as ml

LEDGERS = (1, 2, 7, 3_000_000, 2**40)
BATCH_SIZES = (2, 3, 10, 64, 65, 100, 1000)
SMALL_BIG_ENTRIES = (1_000, 10_000, 65_535, 65_536, 1_000_000)
"""Large entry ids whose BitSet words still fit one 5 MB PositionInfo (the LongListMap form)."""
BIG_ENTRIES = (*SMALL_BIG_ENTRIES, 2**31 - 1, 2**32 - 2, 2**32 - 1)
"""Large entry ids up to the u32 bound of the bitmaps (MessageRange and compact forms)."""
KINDS = ("ack",) * 6 + ("run",) * 3 + ("batch",) * 5 + ("batch_many", "cumulative", "cumulative_batch")

Row = tuple[int, int, int, int]
FORMS = ("message_range", "long_list_map", "compact")
"""The three forms under test (the ``ENCODINGS`` tuple may grow)."""


def batch_size_of(p: Pos) -> int:
    """A fixed batch size per entry, so every batch ack of one entry agrees on it."""
    return BATCH_SIZES[(p[0] * 31 + p[1]) % len(BATCH_SIZES)]


@st.composite
def cursors(
    draw: st.DrawFn,
    big: tuple[int, ...] = BIG_ENTRIES,
    kinds: tuple[str, ...] = KINDS,
    quirks: bool = False,
    with_properties: bool = True,
    max_ops: int = 40,
) -> tuple[Cursor, ModelCursor]:
    """A Cursor and the pure-Python model after the same random acks of every kind."""
    md = draw(st.sampled_from([(LEDGERS[0], -1), (LEDGERS[0], 3)]))
    props: dict[str, int] = {}
    if with_properties:
        props = draw(st.dictionaries(st.text(max_size=8), st.integers(-(2**63), 2**63 - 1), max_size=3))
    c = Cursor(Position(*md), properties=props, pulsar_quirks=quirks)
    m = ModelCursor(md)
    positions = st.tuples(st.sampled_from(LEDGERS), st.integers(0, 150) | st.sampled_from(big))
    for _ in range(draw(st.integers(0, max_ops))):
        kind = draw(st.sampled_from(kinds))
        p = draw(positions)
        size = batch_size_of(p)
        if kind == "ack":
            c.ack(Position(*p))
            m.ack(p)
        elif kind == "run":
            es = list(range(p[1], min(p[1] + draw(st.integers(1, 40)), 2**32)))
            c.ack_many([p[0]] * len(es), es)
            for e in es:
                m.ack((p[0], e))
        elif kind == "cumulative":
            c.ack_cumulative(Position(*p))
            m.ack_cumulative(p)
        elif kind == "batch":
            i = draw(st.integers(0, size - 1))
            c.ack_batch_index(Position(*p), i, size)
            m.ack_batch_index(p, i, size)
        elif kind == "batch_many":
            for i in draw(st.sets(st.integers(0, size - 1), max_size=size)):
                c.ack_batch_index(Position(*p), i, size)
                m.ack_batch_index(p, i, size)
        else:
            i = draw(st.integers(0, size - 1))
            c.ack_cumulative(Position(*p), batch_index=i, batch_size=size)
            m.ack_cumulative_batch(p, i, size)
    # The model is only a reference if the cursor agrees with it (test_cursor_vs_model checks every step).
    assert c.mark_delete_position == Position(*m.md)
    assert c.individually_deleted.ranges() == model_ranges(m)
    assert [(b[0], b[1]) for b in c.batches()] == sorted(m.batches)
    return c, m


def model_ranges(m: ModelCursor) -> list[Row]:
    """The model's acked entries as Pulsar's open-closed per-ledger runs, ascending."""
    rows: list[Row] = []
    for ledger, e in sorted(m.acked):
        if rows and rows[-1][0] == ledger and rows[-1][3] == e - 1:
            rows[-1] = (ledger, rows[-1][1], ledger, e)
        else:
            rows.append((ledger, e - 1, ledger, e))
    return rows


def bitset_words(bits: Iterable[int]) -> list[int]:
    """``java.util.BitSet.toLongArray()``: bit i of word j is 64j+i; signed; no trailing zero words."""
    ordered = sorted(set(bits))
    if not ordered:
        return []
    flags = np.zeros((ordered[-1] // 64 + 1) * 64, dtype=np.uint8)
    flags[ordered] = 1
    words: list[int] = np.packbits(flags, bitorder="little").view("<i8").tolist()
    return words


def unacked_of(raw: bytes) -> set[int]:
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def batch_words(c: Cursor) -> list[tuple[int, int, bytes]]:
    return [(ledger, entry, words) for ledger, entry, _size, words in c.batches()]


def counters(c: Cursor) -> TruncationCounters:
    return copy.copy(c.truncations)


# ---------------------------------------------------------------------------------------------------
# Exact round trips


@pytest.mark.parametrize("encoding", FORMS)
@given(data=st.data())
def test_round_trip_is_exact(encoding: str, data: st.DataObject) -> None:
    """Without a limit hit, every form gives back mark-delete, ranges, batch words and properties."""
    big = SMALL_BIG_ENTRIES if encoding == "long_list_map" else BIG_ENTRIES
    quirks = data.draw(st.booleans(), label="pulsar_quirks")  # (quirks change cuts, not content)
    c, _ = data.draw(cursors(big, quirks=quirks))
    before = counters(c)
    r = c.persist(encoding)
    assert r.encoding == encoding and r.size == len(r.data)
    assert not r.truncated and r.ranges_cut == 0 and r.batches_cut == 0
    assert (r.ranges_total, r.batches_total) == (c.non_contiguous_deleted_ranges, c.batch_count)
    assert c.truncations == before
    d = Cursor.decode(r.data, encoding, pulsar_quirks=quirks)
    assert d.pulsar_quirks == quirks
    assert d.mark_delete_position == c.mark_delete_position
    assert d.individually_deleted == c.individually_deleted
    assert batch_words(d) == batch_words(c)
    assert d.properties == c.properties
    assert c.encode(encoding) == r.data  # deterministic bytes
    sizes = [b[2] for b in c.batches()]
    if encoding == "compact":
        assert [b[2] for b in d.batches()] == sizes
    else:
        assert [b[2] for b in d.batches()] == [0] * len(sizes)  # Pulsar's forms carry no batch size
    # A decoded cursor takes further index acks of those batches and adopts their size.
    for ledger, entry, size, words in c.batches():
        p = Position(ledger, entry)
        unacked = unacked_of(words)
        acked = [i for i in range(size) if i not in unacked]
        assert acked and unacked and max(unacked) < size
        assert not d.ack_batch_index(p, acked[0], size)
        got = d.batch(p)
        assert got is not None and got[0] == size
        assert d.ack_batch_index(p, min(unacked), size)
        assert d.is_batch_index_acked(p, min(unacked))
        assert d.is_acked(p) == (len(unacked) == 1)


def test_round_trip_edge_positions() -> None:
    """Entry 0 (lower bound -1), the u32 top entry, a bit-63 BitSet word, a batch of more than 64."""
    c = Cursor(Position(5, -1), properties={"": -(2**63), "k": 2**63 - 1})
    c.ack_many([6, 6, 6, 6, 7], [0, 63, 64, 2**32 - 1, 2**32 - 2])
    c.ack_batch_index(Position(8, 0), 64, 65)
    c.ack_cumulative(Position(5, 3), batch_index=70, batch_size=1000)  # mark-delete 5:2, 5:3 partial
    for encoding in ("message_range", "compact"):
        d = Cursor.decode(c.encode(encoding), encoding)
        assert str(d.individually_deleted) == (
            "[(6:-1..6:0],(6:62..6:64],(6:4294967294..6:4294967295],(7:4294967293..7:4294967294]]"
        )
        assert d.mark_delete_position == Position(5, 2)
        assert [(b[0], b[1]) for b in d.batches()] == [(5, 3), (8, 0)]
        assert batch_words(d) == batch_words(c)
        assert d.properties == c.properties


# ---------------------------------------------------------------------------------------------------
# The Pulsar forms are real PositionInfo messages


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map"])
@given(data=st.data())
def test_pulsar_forms_are_position_info(encoding: str, data: st.DataObject) -> None:
    """Field by field against the model: a Pulsar broker reading these bytes sees the same state."""
    c, m = data.draw(cursors(SMALL_BIG_ENTRIES))
    info = ml.PositionInfo.FromString(c.encode(encoding))
    assert info.IsInitialized()
    assert (info.ledgerId, info.entryId) == m.md
    assert [(p.name, p.value) for p in info.properties] == list(c.properties.items())
    batches = [
        (b.position.ledgerId, b.position.entryId, list(b.deleteSet))
        for b in info.batchedEntryDeletionIndexInfo
    ]
    # BatchedEntryDeletionIndexInfo.deleteSet: BitSet words in which a SET bit is a still-UNacked index.
    assert batches == [(p[0], p[1], bitset_words(m.batches[p][1])) for p in sorted(m.batches)]
    if encoding == "message_range":
        assert not info.individualDeletedMessageRanges
        got = [
            (
                r.lowerEndpoint.ledgerId,
                r.lowerEndpoint.entryId,
                r.upperEndpoint.ledgerId,
                r.upperEndpoint.entryId,
            )
            for r in info.individualDeletedMessages
        ]
        assert got == model_ranges(m)  # open-closed, lower -1 for a run from entry 0
    else:
        assert not info.individualDeletedMessages
        got_words = {item.key: list(item.values) for item in info.individualDeletedMessageRanges}
        by_ledger: dict[int, list[int]] = {}
        for ledger, e in m.acked:
            by_ledger.setdefault(ledger, []).append(e)
        assert got_words == {ledger: bitset_words(es) for ledger, es in by_ledger.items()}
        assert [item.key for item in info.individualDeletedMessageRanges] == sorted(by_ledger)


def test_position_info_layout_by_example() -> None:
    c = Cursor(Position(3, 9), properties={"index": 42})
    c.ack_many([4, 4, 4, 4, 4], [0, 1, 2, 63, 64])  # a run from entry 0 and one across a word boundary
    c.ack(Position(3, 11))
    c.ack_batch_index(Position(5, 2), 1, 130)  # three words of unacked indexes, index 1 cleared
    mr = ml.PositionInfo.FromString(c.encode("message_range"))
    assert (mr.ledgerId, mr.entryId) == (3, 9)
    ranges = [
        (
            (r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId),
            (r.upperEndpoint.ledgerId, r.upperEndpoint.entryId),
        )
        for r in mr.individualDeletedMessages
    ]
    assert ranges == [((3, 10), (3, 11)), ((4, -1), (4, 2)), ((4, 62), (4, 64))]
    (batch,) = mr.batchedEntryDeletionIndexInfo
    assert (batch.position.ledgerId, batch.position.entryId) == (5, 2)
    assert list(batch.deleteSet) == [-3, -1, 0b11]  # ~0b10 as a signed long, all ones, bits 128 and 129
    llm = ml.PositionInfo.FromString(c.encode("long_list_map"))
    assert {m.key: list(m.values) for m in llm.individualDeletedMessageRanges} == {
        3: [1 << 11],
        4: [0b111 | -(2**63), 1],
    }
    assert [(p.name, p.value) for p in llm.properties] == [("index", 42)]


def _broker_position_info(md: Pos, rows: list[Row]) -> ml.PositionInfo:
    """A PositionInfo as a Pulsar broker writes it (fields in its order, proto2 required fields)."""
    info = ml.PositionInfo(ledgerId=md[0], entryId=md[1])
    for lk, lv, uk, uv in rows:
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lk, lv
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = uk, uv
    info.properties.add(name="pulsar.delayed", value=7)
    item = info.batchedEntryDeletionIndexInfo.add()
    item.position.ledgerId, item.position.entryId = 1, 3
    item.deleteSet.extend([0b1010])  # a batch of 4 with indexes 1 and 3 still unacked
    return info


def test_decode_guava_cross_ledger_range_with_ledger_sizes() -> None:
    """(1:5..3:2] expands to the rest of ledger 1, all of ledger 2 and entries 0..2 of ledger 3."""
    data = _broker_position_info((1, 2), [(1, 3, 1, 4), (1, 5, 3, 2)]).SerializeToString()
    d = Cursor.decode(data, "message_range", ledger_sizes={1: 10, 2: 4, 3: 8}, name="guava-sub")
    assert d.name == "guava-sub" and d.ledger_sizes == {1: 10, 2: 4, 3: 8}
    assert d.mark_delete_position == Position(1, 2)
    assert d.individually_deleted.ranges() == [(1, 3, 1, 4), (1, 5, 1, 9), (2, -1, 2, 3), (3, -1, 3, 2)]
    assert d.properties == {"pulsar.delayed": 7}
    assert batch_words(d) == [(1, 3, (0b1010).to_bytes(8, "little"))]
    assert d.is_batch_index_acked(Position(1, 3), 0) and not d.is_batch_index_acked(Position(1, 3), 1)
    assert d.ack_batch_index(Position(1, 3), 1, 4)
    assert d.batch(Position(1, 3)) == (4, (0b1000).to_bytes(8, "little"))
    # With the sizes known, filling the holes rolls mark-delete across the three ledgers.
    d.ack(Position(1, 5))
    assert d.mark_delete_position == Position(1, 2)  # 1:3 is still a batch, 1:4 acked
    d.ack_batch_index(Position(1, 3), 3, 4)
    assert d.mark_delete_position == Position(3, 2)
    assert d.individually_deleted.is_empty()


def test_decode_guava_cross_ledger_range_without_ledger_sizes() -> None:
    """Unknown sizes: as Pulsar's bitmap sets, only the upper ledger's 0..2 is set; ledger 2 is lost."""
    data = _broker_position_info((1, 2), [(1, 3, 1, 4), (1, 5, 3, 2)]).SerializeToString()
    d = Cursor.decode(data, "message_range")
    assert d.ledger_sizes is None
    assert d.individually_deleted.ranges() == [(1, 3, 1, 4), (3, -1, 3, 2)]
    assert not d.is_acked(Position(1, 6)) and not d.is_acked(Position(2, 0))


def test_decode_prefers_message_range_over_long_list_map() -> None:
    """Both fields present (Pulsar recovery prefers MessageRange); the LongListMap alone decodes too."""
    info = _broker_position_info((1, 0), [(2, 3, 2, 5)])
    info.individualDeletedMessageRanges.add(key=2, values=[1 << 9, -(2**63)])
    both = info.SerializeToString()
    for encoding in ("message_range", "long_list_map"):
        assert Cursor.decode(both, encoding).individually_deleted.ranges() == [(2, 3, 2, 5)]
    del info.individualDeletedMessages[:]
    only_words = info.SerializeToString()
    assert Cursor.decode(only_words, "message_range").individually_deleted.ranges() == [
        (2, 8, 2, 9),
        (2, 126, 2, 127),
    ]


# ---------------------------------------------------------------------------------------------------
# Limits: a cut keeps a prefix, and is always reported


def test_default_limits_are_pulsars() -> None:
    limits = Cursor().limits
    assert limits == PersistLimits()
    assert limits.max_unacked_ranges_to_persist == 10_000
    assert limits.max_unacked_ranges_to_persist_in_metadata_store == 1_000
    assert limits.max_batch_deleted_index_to_persist == 10_000
    assert limits.max_entry_bytes == NETTY_MAX_FRAME_BYTES == 5 * 1024 * 1024 + 10 * 1024
    assert Cursor(max_unacked_ranges_to_persist=5).limits == PersistLimits(max_unacked_ranges_to_persist=5)


@pytest.mark.parametrize("encoding", FORMS)
@given(data=st.data())
def test_count_limits_cut_a_prefix_and_say_so(encoding: str, data: st.DataObject) -> None:
    """Range and batch limits: the result's counts are right and the decoded cursor holds the prefix."""
    c, _ = data.draw(cursors(SMALL_BIG_ENTRIES, with_properties=False))
    max_ranges, max_batches = data.draw(st.integers(0, 8)), data.draw(st.integers(0, 4))
    c.limits = PersistLimits(
        max_unacked_ranges_to_persist=max_ranges, max_batch_deleted_index_to_persist=max_batches
    )
    ranges, batches = c.individually_deleted.ranges(), batch_words(c)
    before = counters(c)
    r = c.persist(encoding)
    # The compact form is bounded by bytes only: the range limit is PositionInfo's (and PIP-299's).
    want_ranges = len(ranges) if encoding == "compact" else min(len(ranges), max_ranges)
    want_batches = min(len(batches), max_batches)
    assert (r.ranges_total, r.ranges_written) == (len(ranges), want_ranges)
    assert (r.batches_total, r.batches_written) == (len(batches), want_batches)
    assert (r.ranges_cut, r.batches_cut) == (len(ranges) - want_ranges, len(batches) - want_batches)
    assert r.truncated == (want_ranges < len(ranges) or want_batches < len(batches))
    d = Cursor.decode(r.data, encoding)
    assert d.mark_delete_position == c.mark_delete_position
    assert d.individually_deleted.ranges() == ranges[:want_ranges]
    assert batch_words(d) == batches[:want_batches]
    after = c.truncations
    assert after.unacked_ranges_truncated == before.unacked_ranges_truncated + (r.ranges_cut > 0)
    assert after.batch_deleted_indexes_truncated == before.batch_deleted_indexes_truncated + (
        r.batches_cut > 0
    )
    assert after.ranges_cut == before.ranges_cut + r.ranges_cut
    assert after.batches_cut == before.batches_cut + r.batches_cut


@given(data=st.data())
def test_pulsar_quirks_long_list_map_cut_is_reported(data: st.DataObject) -> None:
    """pulsar_quirks: toRanges counts entries, so whole ledgers go; ranges_written still matches."""
    c, _ = data.draw(cursors(SMALL_BIG_ENTRIES, quirks=True, with_properties=False, max_ops=25))
    c.limits = PersistLimits(max_unacked_ranges_to_persist=data.draw(st.integers(0, 30)))
    ranges = c.individually_deleted.ranges()
    r = c.persist("long_list_map")
    d = Cursor.decode(r.data, "long_list_map")
    assert d.individually_deleted.ranges() == ranges[: r.ranges_written]
    assert r.ranges_total == len(ranges) and r.truncated == (r.ranges_written < len(ranges))
    # whole ledgers only
    cut = ranges[r.ranges_written :]
    assert not cut or r.ranges_written == 0 or cut[0][0] != ranges[r.ranges_written - 1][0]


@pytest.mark.parametrize("encoding", FORMS)
@given(data=st.data())
def test_byte_limit_is_never_exceeded(encoding: str, data: st.DataObject) -> None:
    """The data fits max_entry_bytes; the cut keeps a prefix (whole ledgers in the word and compact forms)."""
    kinds = ("ack", "ack", "run", "cumulative")
    c, _ = data.draw(cursors(SMALL_BIG_ENTRIES[:2], kinds=kinds, with_properties=False, max_ops=60))
    limit = data.draw(st.integers(64, 1500))
    c.limits = PersistLimits(max_entry_bytes=limit)
    ranges = c.individually_deleted.ranges()
    before = counters(c)
    r = c.persist(encoding)
    assert r.size <= limit
    n = r.ranges_written
    assert r.ranges_total == len(ranges) and r.ranges_cut == len(ranges) - n
    assert r.truncated == (n < len(ranges))
    assert c.truncations.ranges_cut == before.ranges_cut + r.ranges_cut
    d = Cursor.decode(r.data, encoding)
    assert d.individually_deleted.ranges() == ranges[:n]
    if n == len(ranges):
        return
    # Nothing was cut that would have fitted.
    acked = c.individually_deleted
    if encoding == "message_range":
        assert r.size + acked.message_range_wire_size(n + 1) - acked.message_range_wire_size(n) > limit
        return
    assert n == 0 or ranges[n][0] != ranges[n - 1][0]  # whole ledgers
    next_ledger = ranges[n][0]
    if encoding == "long_list_map":
        info = ml.PositionInfo.FromString(r.data)
        words = acked.to_long_list_map()[next_ledger]
        info.individualDeletedMessageRanges.add(key=next_ledger, values=words.tolist())
        assert info.ByteSize() > limit
    else:
        msg = snap.CursorSnapshot.FromString(r.data)
        assert msg.truncated_ledgers == len({row[0] for row in ranges[n:]})
        msg.ledgers.add(ledger_id=next_ledger, bitmap=acked.ledger_to_bytes(next_ledger))
        assert msg.ByteSize() > limit - 32  # the form keeps 32 bytes for its counters and checksum


def test_truncation_by_example() -> None:
    c = Cursor(Position(1, -1), max_unacked_ranges_to_persist=3, name="t")
    c.ack_many([1] * 5 + [2] * 3, [1, 3, 5, 7, 9, 1, 3, 5])  # 8 ranges: 5 in ledger 1, 3 in ledger 2
    for i in range(4):
        c.ack_batch_index(Position(3, i), 0, 100)
    c.limits = PersistLimits(max_unacked_ranges_to_persist=3, max_batch_deleted_index_to_persist=1)
    mr = c.persist("message_range")
    assert (mr.ranges_written, mr.ranges_cut, mr.batches_written, mr.batches_cut) == (3, 5, 1, 3)
    llm = c.persist("long_list_map")
    assert (llm.ranges_written, llm.ranges_cut, llm.batches_written, llm.batches_cut) == (3, 5, 1, 3)
    words = {
        m.key: list(m.values) for m in ml.PositionInfo.FromString(llm.data).individualDeletedMessageRanges
    }
    assert words == {1: [0b101010]}  # ledger 1 cut after its third range
    compact = c.persist("compact")
    assert (compact.ranges_written, compact.ranges_cut, compact.batches_written, compact.batches_cut) == (
        8,
        0,
        1,
        3,
    )
    msg = snap.CursorSnapshot.FromString(compact.data)
    assert (msg.truncated_ledgers, msg.truncated_batches) == (0, 3)
    assert all(r.truncated for r in (mr, llm, compact))
    assert c.truncations == TruncationCounters(
        unacked_ranges_truncated=2, batch_deleted_indexes_truncated=3, ranges_cut=10, batches_cut=9
    )
    c.encode("message_range")  # encode() is a persist too: counted
    assert c.truncations.unacked_ranges_truncated == 3
    assert c.stats().truncations == c.truncations


def test_default_limit_cuts_pulsar_forms_at_10000_ranges() -> None:
    c = Cursor(Position(1, -1))
    odd = np.arange(1, 2 * 10_001, 2, dtype=np.int64)
    c.ack_many(np.ones_like(odd), odd)
    assert c.non_contiguous_deleted_ranges == 10_001
    assert not c.is_fully_persistable()
    for encoding in ("message_range", "long_list_map"):
        r = c.persist(encoding)
        assert (r.ranges_written, r.ranges_cut, r.truncated) == (10_000, 1, True)
        assert len(Cursor.decode(r.data, encoding).individually_deleted) == 10_000
    r = c.persist("compact")
    assert not r.truncated and Cursor.decode(r.data).individually_deleted == c.individually_deleted
    assert c.truncations.unacked_ranges_truncated == 2 and c.truncations.ranges_cut == 2


@pytest.mark.parametrize("encoding", FORMS)
def test_batches_count_against_the_byte_limit(encoding: str) -> None:
    """10,000 partial batches of 5,000 messages (Pulsar's default count limit) exceed 5 MB + 10 KB."""
    c = Cursor(Position(1, -1))
    for e in range(10_000):
        c.ack_batch_index(Position(1, e), 0, 5_000)
    r = c.persist(encoding)
    assert r.size <= NETTY_MAX_FRAME_BYTES
    assert r.truncated and r.batches_cut > 0 and r.batches_written > 1000
    assert c.truncations.batch_deleted_indexes_truncated == 1


# ---------------------------------------------------------------------------------------------------
# The compact form: integrity and size


def _small_snapshot() -> bytes:
    c = Cursor(Position(4, 7), properties={"p": 1})
    c.ack_many([4, 4, 4, 9], [9, 10, 20, 0])
    c.ack_batch_index(Position(4, 12), 3, 70)
    return c.encode("compact")


def test_compact_checksum_catches_every_flipped_byte() -> None:
    data = _small_snapshot()
    assert Cursor.decode(data).individually_deleted.ranges() == [(4, 8, 4, 10), (4, 19, 4, 20), (9, -1, 9, 0)]
    for i in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= mask
            with pytest.raises(CorruptSnapshot, match="'snap-sub'"):
                Cursor.decode(bytes(bad), "compact", name="snap-sub")


def test_compact_checksum_catches_every_truncation_and_extension() -> None:
    data = _small_snapshot()
    for k in range(len(data)):
        with pytest.raises(CorruptSnapshot, match="'snap-sub'"):
            Cursor.decode(data[:k], "compact", name="snap-sub")
    for tail in (b"\x00", b"\x7d\x00\x00\x00\x00", data[-5:]):
        with pytest.raises(CorruptSnapshot):
            Cursor.decode(data + tail, "compact")


@pytest.mark.parametrize("version", [0, 2, 2**32 - 1])
def test_compact_unknown_version(version: int) -> None:
    msg = persist.snapshot_message(Position(1, 2), [], [], {})
    msg.version = version
    with pytest.raises(UnsupportedVersion, match=rf"'v-sub'.*version {version}\b"):
        Cursor.decode(persist.seal(msg), "compact", name="v-sub")
    msg.version = persist.SNAPSHOT_VERSION
    assert Cursor.decode(persist.seal(msg)).mark_delete_position == Position(1, 2)


def _sealed(body: bytes) -> bytes:
    return body + b"\x7d" + zlib.crc32(body).to_bytes(4, "little")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"hello world",
        bytes(range(256)),
        _sealed(b"\xff\xff\xff"),  # a valid checksum over bytes that are not a CursorSnapshot
        persist.seal(persist.snapshot_message(Position(1, 2), [(3, b"not roaring")], [], {})),
    ],
)
def test_compact_garbage_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptSnapshot, match="'g-sub'") as info:
        Cursor.decode(data, "compact", name="g-sub")
    assert not isinstance(info.value, UnsupportedVersion)


def _sealed_partial(msg: snap.CursorSnapshot) -> bytes:
    return _sealed(msg.SerializePartialToString())


def _without_mark_delete() -> snap.CursorSnapshot:
    msg = persist.snapshot_message(Position(1, 2), [], [], {})
    msg.ClearField("mark_delete_ledger_id")
    msg.ClearField("mark_delete_entry_id")
    return msg


@pytest.mark.parametrize(
    "data",
    [b"\x7d\x00\x00\x00\x00", _sealed_partial(_without_mark_delete())],
    ids=["empty-body-crc-0", "no-mark-delete"],
)
def test_compact_missing_required_fields_is_corrupt(data: bytes) -> None:
    """CRC-32 of b"" is 0, so 7d 00 00 00 00 is a sealed empty body; proto2 required fields are absent."""
    with pytest.raises(CorruptSnapshot) as info:
        Cursor.decode(data, "compact")
    assert not isinstance(info.value, UnsupportedVersion)


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map"])
@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xff\xff",
        bytes(range(256)),
        ml.PositionInfo(ledgerId=1).SerializePartialToString(),  # entryId missing
        _broker_position_info((1, 2), [(1, 5, 1, -7)]).SerializeToString(),
        _broker_position_info((1, 2), [(1, 5, 1, 2**40)]).SerializeToString(),
        _broker_position_info((1, 2), [(-3, 5, -3, 9)]).SerializeToString(),
    ],
)
def test_pulsar_form_garbage_is_corrupt(encoding: str, data: bytes) -> None:
    with pytest.raises(CorruptSnapshot, match="'p-sub'"):
        Cursor.decode(data, encoding, name="p-sub")


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map", "managed_cursor_info"])
@given(data=st.data())
def test_compact_bytes_are_refused_by_the_pulsar_decoders(encoding: str, data: st.DataObject) -> None:
    """Compact bytes half-parse as Pulsar messages (field 1 is a varint in both): never a cursor."""
    c, _ = data.draw(cursors(BIG_ENTRIES, quirks=False))
    sealed = c.encode("compact")
    with pytest.raises(CorruptSnapshot, match='encoding="compact"'):
        Cursor.decode(sealed, encoding)
    # Without its checksum trailer: a field of the wrong wire type (PositionInfo), or a record that
    # points at cursor ledger 1 (ManagedCursorInfo, whose first three fields are varints too).
    with pytest.raises(CorruptSnapshot if encoding != "managed_cursor_info" else CursorkitError):
        Cursor.decode(sealed[:-5], encoding)


def test_unknown_encoding_and_non_bytes() -> None:
    c = Cursor()
    for bad in ("json", "", "Compact", "message-range", None):
        with pytest.raises(InvalidArgument, match="unknown encoding"):
            c.persist(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="unknown encoding"):
            c.encode(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="unknown encoding"):
            Cursor.decode(c.encode(), bad)  # type: ignore[arg-type]
    for not_bytes in ("text", 12, None, [1, 2]):
        with pytest.raises(InvalidArgument):
            Cursor.decode(not_bytes)  # type: ignore[arg-type]
    c.ack(Position(0, 5))
    data = c.encode("compact")
    for buffer in (bytearray(data), memoryview(data)):
        assert Cursor.decode(buffer).individually_deleted == c.individually_deleted  # type: ignore[arg-type]


def test_compact_size_for_500k_alternating_holes() -> None:
    """Every other entry of 1,000,000: the compact form stays small, MessageRange does not."""
    c = Cursor(Position(1, -1))
    odd = np.arange(1, 1_000_000, 2, dtype=np.int64)
    c.ack_many(np.ones_like(odd), odd)
    assert c.non_contiguous_deleted_ranges == 500_000
    r = c.persist("compact")
    assert not r.truncated
    assert r.size <= 150_000
    full_message_range = c.individually_deleted.message_range_wire_size()
    assert full_message_range > 20 * r.size
    assert c.persist("message_range").ranges_written == 10_000  # and Pulsar's form cuts 490,000 of them
    assert Cursor.decode(r.data).individually_deleted == c.individually_deleted


# ---------------------------------------------------------------------------------------------------
# Pickle, and batches restored from Pulsar's forms


def test_pickle_round_trip() -> None:
    limits = PersistLimits(
        max_unacked_ranges_to_persist=2,
        max_unacked_ranges_to_persist_in_metadata_store=3,
        max_batch_deleted_index_to_persist=1,
        max_entry_bytes=100,
    )
    c = Cursor(
        Position(1, -1),
        name="orders-sub",
        ledger_sizes={1: 100, 2: 50},
        limits=limits,
        properties={"a": 1, "b": -2},
        pulsar_quirks=True,
    )
    c.ack_many([1] * 30, list(range(1, 60, 2)))  # 30 ranges: more than the limits let a persist keep
    c.ack_batch_index(Position(2, 4), 5, 80)
    c.ack_batch_index(Position(2, 6), 0, 3)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        d = pickle.loads(pickle.dumps(c, protocol=protocol))
        assert type(d) is Cursor
        assert (d.name, d.ledger_sizes, d.limits, d.pulsar_quirks) == (
            "orders-sub",
            {1: 100, 2: 50},
            limits,
            True,
        )
        assert d.properties == {"a": 1, "b": -2}
        assert d.mark_delete_position == c.mark_delete_position
        assert d.individually_deleted == c.individually_deleted and len(d.individually_deleted) == 30
        assert d.batches() == c.batches()
        assert d.backlog() == c.backlog()
    d = copy.deepcopy(c)
    assert d.individually_deleted == c.individually_deleted and d.name == "orders-sub"
    d.ack(Position(1, 0))
    assert d.mark_delete_position != c.mark_delete_position  # independent copies


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map"])
def test_decoded_batch_rejects_a_size_below_its_unacked_indexes(encoding: str) -> None:
    c = Cursor(Position(1, -1))
    c.ack_batch_index(Position(1, 4), 3, 100)
    d = Cursor.decode(c.encode(encoding), encoding)
    assert d.batch(Position(1, 4)) == (0, c.batches()[0][3])
    with pytest.raises(InvalidArgument):
        d.ack_batch_index(Position(1, 4), 5, 50)  # index 99 is recorded unacked
    assert d.ack_batch_index(Position(1, 4), 5, 100)
    with pytest.raises(InvalidArgument):
        d.ack_batch_index(Position(1, 4), 6, 101)  # the size is now known


@pytest.mark.parametrize("encoding", ["message_range", "long_list_map"])
def test_decoded_batch_can_be_completed(encoding: str) -> None:
    c = Cursor(Position(1, -1))
    c.ack_batch_index(Position(1, 4), 70, 100)
    d = Cursor.decode(c.encode(encoding), encoding)
    estimate = d.compact_size_estimate()
    for i in range(100):
        if i != 70:
            d.ack_batch_index(Position(1, 4), i, 100)
    assert d.is_acked(Position(1, 4)) and d.batch_count == 0
    assert d.compact_size_estimate() < estimate


# ---------------------------------------------------------------------------------------------------
# Pulsar's metadata-store record (ManagedCursorInfo with cursorsLedgerId = -1)


def test_managed_cursor_info_round_trip_and_metadata_limit() -> None:
    """The znode form holds the state itself, cut at max_unacked_ranges_to_persist_in_metadata_store."""
    c = Cursor(Position(2, 4), properties={"owner": 7})
    c.ack_many([2] * 6, [6, 8, 10, 12, 14, 16])
    c.ack_batch_index(Position(2, 20), 3, 8)
    r = c.persist("managed_cursor_info")
    info = ml.ManagedCursorInfo.FromString(r.data)
    assert info.cursorsLedgerId == -1
    assert (info.markDeleteLedgerId, info.markDeleteEntryId) == (2, 4)
    assert len(info.individualDeletedMessages) == 6 and not r.truncated
    d = Cursor.decode(r.data, "managed_cursor_info")
    assert d.individually_deleted == c.individually_deleted
    assert d.properties == {"owner": 7}
    assert [b[3] for b in d.batches()] == [b[3] for b in c.batches()]

    c.limits = PersistLimits(max_unacked_ranges_to_persist_in_metadata_store=4)
    cut = c.persist("managed_cursor_info")
    assert (cut.ranges_written, cut.ranges_cut, cut.truncated) == (4, 2, True)
    assert len(Cursor.decode(cut.data, "managed_cursor_info").individually_deleted) == 4
    assert c.persist("message_range").ranges_written == 6  # the ledger form has its own, larger limit


def test_managed_cursor_info_pointing_at_a_ledger_is_refused() -> None:
    info = ml.ManagedCursorInfo(cursorsLedgerId=42, markDeleteLedgerId=1, markDeleteEntryId=2)
    with pytest.raises(InvalidArgument, match="cursor ledger 42"):
        Cursor.decode(info.SerializeToString(), "managed_cursor_info")
    with pytest.raises(CorruptSnapshot, match="'z'"):
        Cursor.decode(b"\xff\x01garbage", "managed_cursor_info", name="z")


def test_long_list_map_never_builds_words_it_cannot_persist() -> None:
    """A lone ack near entry 2^32 would need 64 Mi words (512 MiB); the byte budget cuts it first."""
    from cursorkit._core import heap_allocated, heap_peak, reset_heap_peak

    c = Cursor(Position(1, -1))
    c.ack(Position(1, 3))
    c.ack(Position(2, 4_294_967_295))
    reset_heap_peak()
    before = heap_allocated()
    r = c.persist("long_list_map")
    assert heap_peak() - before < 1_000_000
    assert (r.ranges_written, r.ranges_cut, r.truncated) == (1, 1, True)
    assert str(Cursor.decode(r.data, "long_list_map").individually_deleted) == "[(1:2..1:3]]"
