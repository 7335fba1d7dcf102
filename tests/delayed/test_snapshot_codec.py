"""PIP-195 snapshot segments in Rust: golden bytes, cut rule, sorting, damage, RangeSet restore calls.

The independent implementations are the generated ``cursorkit.proto.delayed_bucket_pb2`` module (for
the ``SnapshotSegment`` wire bytes) and pyroaring (for the 32-bit roaring portable bitmaps).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyroaring
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import RangeSet, errors
from cursorkit._core import (
    bitmap_cardinality,
    cut_segments,
    decode_segment,
    encode_segment,
    segment_bitmaps,
    sort_indexes,
)
from cursorkit.proto import delayed_bucket_pb2 as pb

I64_MAX = 2**63 - 1
U32_MAX = 2**32 - 1
C = 65536  # values per roaring container

# Values that hit every varint length boundary, besides arbitrary ones.
TIMESTAMPS = st.sampled_from([0, 1, 127, 128, 16_383, 16_384, 1_700_000_000_000, I64_MAX]) | st.integers(
    0, I64_MAX
)
LEDGER_IDS = st.sampled_from([0, 1, 127, 128, 2**35, I64_MAX]) | st.integers(0, I64_MAX)
ENTRY_IDS = st.sampled_from([0, 1, 127, 128, C - 1, C, U32_MAX]) | st.integers(0, U32_MAX)
INDEXES = st.lists(st.tuples(TIMESTAMPS, LEDGER_IDS, ENTRY_IDS), max_size=40)

Index = tuple[int, int, int]


def columns3(rows: list[Index]) -> tuple[list[int], list[int], list[int]]:
    """Rows of (timestamp, ledger, entry) as three columns."""
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def protobuf_bytes(rows: list[Index]) -> bytes:
    """What the generated protobuf module writes for these indexes."""
    segment = pb.SnapshotSegment(
        indexes=[pb.DelayedIndex(timestamp=t, ledger_id=ledger, entry_id=e) for t, ledger, e in rows]
    )
    return segment.SerializeToString()


def protobuf_rows(data: bytes) -> list[Index] | None:
    """The indexes protobuf reads from data, or None when it rejects it or a required field is missing."""
    try:
        segment = pb.SnapshotSegment.FromString(data)
    except DecodeError:
        return None
    if not segment.IsInitialized():
        return None
    return [(i.timestamp, i.ledger_id, i.entry_id) for i in segment.indexes]


def decoded_rows(data: bytes | bytearray | memoryview) -> list[Index]:
    """decode_segment's three int64 arrays as rows."""
    at, ledgers, entries = decode_segment(data)
    for column in (at, ledgers, entries):
        assert isinstance(column, np.ndarray)
        assert column.dtype == np.int64
    return list(zip(at.tolist(), ledgers.tolist(), entries.tolist(), strict=True))


def varint(value: int) -> bytes:
    """A base-128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """A field key."""
    return varint(field << 3 | wire_type)


def unknown_field(field: int, wire_type: int, value: int) -> bytes:
    """One field of the given wire type (0, 1, 2 or 5) that a DelayedIndex reader must skip."""
    if wire_type == 0:
        return key(field, 0) + varint(value)
    if wire_type == 1:
        return key(field, 1) + value.to_bytes(8, "little")
    if wire_type == 5:
        return key(field, 5) + (value & 0xFFFFFFFF).to_bytes(4, "little")
    payload = value.to_bytes(8, "little")[: value % 9]
    return key(field, 2) + varint(len(payload)) + payload


def model_cut(timestamps: list[int], step: int, max_indexes: int) -> list[int]:
    """PIP-195's cut loop, written the way Pulsar's reads."""
    ends: list[int] = []
    count, upper = 0, 0
    for i, t in enumerate(timestamps):
        if count == 0:
            upper = min(t + step - 1, I64_MAX)
        count += 1
        if (
            i + 1 == len(timestamps)
            or timestamps[i + 1] > upper
            or (max_indexes != -1 and count >= max_indexes)
        ):
            ends.append(i + 1)
            count = 0
    return ends


def roaring_bytes(entries: Any) -> bytes:
    """pyroaring: BitMap(entries); run_optimize(); serialize() (Java's runOptimize output)."""
    bm = pyroaring.BitMap(entries)
    bm.run_optimize()
    return bytes(bm.serialize())


# -- encode / decode: golden bytes both ways ------------------------------------------------------------


@given(rows=INDEXES, as_numpy=st.booleans())
def test_encode_is_byte_identical_to_protobuf(rows: list[Index], as_numpy: bool) -> None:
    at, ledgers, entries = columns3(rows)
    if as_numpy:
        got = encode_segment(np.array(at, np.int64), np.array(ledgers, np.int64), np.array(entries, np.int64))
    else:
        got = encode_segment(at, ledgers, entries)
    assert isinstance(got, bytes)
    assert got == protobuf_bytes(rows)
    assert decoded_rows(got) == rows


def test_encode_known_bytes() -> None:
    # DelayedIndex{timestamp 300, ledger 5, entry 0} = 08 AC 02 10 05 18 00, framed as field 1.
    assert encode_segment([300], [5], [0]) == bytes([0x0A, 0x07, 0x08, 0xAC, 0x02, 0x10, 0x05, 0x18, 0x00])
    assert encode_segment([], [], []) == b""
    assert decoded_rows(b"") == []


@st.composite
def hand_written_segments(draw: st.DrawFn) -> tuple[bytes, list[Index]]:
    """Valid SnapshotSegment encodings that protobuf would never write but must read.

    Fields out of order, field 4 (DELAY or CANCEL, or an unknown enum value), unknown fields of
    every wire type inside indexes and between them, and a required field repeated (the last wins).
    """
    rows = draw(INDEXES)
    out = bytearray()
    for t, ledger, entry in rows:
        fields = [key(1, 0) + varint(t), key(2, 0) + varint(ledger), key(3, 0) + varint(entry)]
        op = draw(st.sampled_from([None, 0, 1, 7]))
        if op is not None:
            fields.append(key(4, 0) + varint(op))
        for _ in range(draw(st.integers(0, 2))):
            number = draw(st.integers(5, 2**29 - 1))
            fields.append(
                unknown_field(number, draw(st.sampled_from([0, 1, 2, 5])), draw(st.integers(0, 2**64 - 1)))
            )
        if draw(st.booleans()):
            # An earlier, overridden value of one required field.
            which = draw(st.integers(1, 3))
            fields.insert(0, key(which, 0) + varint(draw(st.integers(0, U32_MAX))))
            fields.append(fields.pop(which))  # the real value now comes after it
        else:
            fields = draw(st.permutations(fields))
        body = b"".join(fields)
        out += key(1, 2) + varint(len(body)) + body
        if draw(st.integers(0, 4)) == 0:
            number = draw(st.integers(2, 2**29 - 1))
            out += unknown_field(number, draw(st.sampled_from([0, 1, 2, 5])), draw(st.integers(0, 2**64 - 1)))
    return bytes(out), rows


@given(segment=hand_written_segments())
def test_decode_reads_any_valid_encoding(segment: tuple[bytes, list[Index]]) -> None:
    data, rows = segment
    assert protobuf_rows(data) == rows  # the encoding is valid: protobuf reads the same indexes
    assert decoded_rows(data) == rows
    assert decoded_rows(bytearray(data)) == rows
    assert decoded_rows(memoryview(data)) == rows


@given(rows=INDEXES, ops=st.data())
def test_decode_reads_protobuf_written_operation_types(rows: list[Index], ops: st.DataObject) -> None:
    segment = pb.SnapshotSegment()
    for t, ledger, entry in rows:
        index = segment.indexes.add(timestamp=t, ledger_id=ledger, entry_id=entry)
        op = ops.draw(st.sampled_from([None, pb.DELAY, pb.CANCEL]))
        if op is not None:
            index.delayed_operation_type = op
    data = segment.SerializeToString()
    assert decoded_rows(data) == rows
    # An unknown field appended after the protobuf-written bytes is skipped too.
    assert decoded_rows(data + unknown_field(9, 2, 12345)) == rows


def test_decode_with_appended_unknown_fields_of_each_wire_type() -> None:
    rows = [(1_700_000_000_000, 42, 7), (1_700_000_000_001, 42, 8)]
    data = protobuf_bytes(rows)
    for wire_type in (0, 1, 2, 5):
        extra = unknown_field(1000, wire_type, 2**40 + 3)
        assert protobuf_rows(data + extra) == rows
        assert decoded_rows(data + extra) == rows
        assert decoded_rows(extra + data) == rows


# -- damage -----------------------------------------------------------------------------------------------


def assert_same_as_protobuf_or_corrupt(data: bytes) -> None:
    """Either CorruptSnapshot, or exactly what protobuf reads; never another exception."""
    try:
        rows = decoded_rows(data)
    except errors.CorruptSnapshot as e:
        assert "index" in str(e) and "byte" in str(e), str(e)
        return
    assert protobuf_rows(data) == rows


@given(data=st.binary(max_size=64))
def test_random_bytes_decode_or_raise_corrupt(data: bytes) -> None:
    assert_same_as_protobuf_or_corrupt(data)


@given(
    rows=st.lists(st.tuples(TIMESTAMPS, LEDGER_IDS, ENTRY_IDS), min_size=1, max_size=6),
    edits=st.lists(
        st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0, 10**6), st.integers(0, 255)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_segments_decode_or_raise_corrupt(
    rows: list[Index], edits: list[tuple[str, int, int]]
) -> None:
    data = bytearray(protobuf_bytes(rows))
    for kind, where, byte in edits:
        if kind == "insert":
            data.insert(where % (len(data) + 1), byte)
        elif data and kind == "flip":
            data[where % len(data)] ^= byte or 1
        elif data:
            del data[where % len(data)]
    assert_same_as_protobuf_or_corrupt(bytes(data))


@given(rows=st.lists(st.tuples(TIMESTAMPS, LEDGER_IDS, ENTRY_IDS), min_size=1, max_size=5))
def test_every_truncation_is_a_prefix_or_corrupt(rows: list[Index]) -> None:
    data = protobuf_bytes(rows)
    boundaries = {len(protobuf_bytes(rows[:k])): k for k in range(len(rows) + 1)}
    for cut in range(len(data)):
        if cut in boundaries:
            assert decoded_rows(data[:cut]) == rows[: boundaries[cut]]
        else:
            with pytest.raises(errors.CorruptSnapshot):
                decode_segment(data[:cut])


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (bytes([0x0A, 0x04, 0x08, 0x01, 0x10, 0x02]), "entry_id"),  # a required field missing
        (bytes([0x0A, 0x00]), "timestamp"),
        (bytes([0x0B]), "wire type 3"),  # groups are not read
        (bytes([0x0C]), "wire type 4"),
        (bytes([0x0F]), "wire type 7"),
        (bytes([0x00]), "field number 0"),
        (bytes([0x80]), "varint runs past the end"),
        (bytes([0x08]) + b"\xff" * 10 + b"\x01", "longer than 10"),
        (bytes([0x0A, 0x05, 0x08]), "length 5"),
        (
            key(1, 2)
            + varint(15)
            + key(1, 0)
            + varint(2**64 - 1)
            + key(2, 0)
            + b"\x00"
            + key(3, 0)
            + b"\x00",
            "timestamp",
        ),
        (
            key(1, 2) + varint(15) + key(1, 0) + b"\x00" + key(2, 0) + varint(2**63) + key(3, 0) + b"\x00",
            "ledger_id",
        ),
        (
            key(1, 2) + varint(10) + key(1, 0) + b"\x00" + key(2, 0) + b"\x00" + key(3, 0) + varint(2**32),
            "entry_id",
        ),
    ],
)
def test_decode_damage_names_what_and_where(data: bytes, needle: str) -> None:
    with pytest.raises(errors.CorruptSnapshot, match=needle) as info:
        decode_segment(data)
    assert "index 0" in str(info.value)
    assert "at byte" in str(info.value)


def test_decode_names_the_index_and_offset_of_damage() -> None:
    data = protobuf_bytes([(1, 2, 3), (4, 5, 6)]) + bytes([0x0A, 0x03, 0x08, 0x01, 0x10])
    # Two 8-byte indexes, then index 2's body (from byte 18): 08 01, then key 10 whose value
    # varint would start at byte 21, the end of the data.
    with pytest.raises(errors.CorruptSnapshot, match=r"index 2: varint runs past the end at byte 21"):
        decode_segment(data)


# -- cut and sort ---------------------------------------------------------------------------------------


CUT_TIMESTAMPS = st.lists(st.integers(0, 200) | st.sampled_from([I64_MAX - 1, I64_MAX]), max_size=60).map(
    sorted
)


@given(
    timestamps=CUT_TIMESTAMPS,
    step=st.integers(1, 50) | st.just(I64_MAX),
    max_indexes=st.sampled_from([-1, 1, 2, 3, 5, 5000]) | st.integers(1, 20),
    kind=st.sampled_from(["list", "int64", "uint32"]),
)
def test_cut_segments_matches_the_rule(timestamps: list[int], step: int, max_indexes: int, kind: str) -> None:
    column: Any = list(timestamps)
    if kind == "int64":
        column = np.array(timestamps, np.int64)
    elif kind == "uint32" and all(t <= U32_MAX for t in timestamps):
        column = np.array(timestamps, np.uint32)
    ends = cut_segments(column, step, max_indexes)
    assert isinstance(ends, np.ndarray)
    assert ends.dtype == np.int64
    assert ends.tolist() == model_cut(timestamps, step, max_indexes)


def test_cut_segments_examples() -> None:
    # Pulsar's defaults: 300 s per segment, 5000 indexes per segment.
    assert cut_segments([0, 299_999, 300_000], 300_000, 5000).tolist() == [2, 3]
    assert cut_segments([5] * 12_000, 300_000, 5000).tolist() == [5000, 10_000, 12_000]
    assert cut_segments([5] * 12_000, 300_000, -1).tolist() == [12_000]
    assert cut_segments([], 1, 1).tolist() == []


@pytest.mark.parametrize(
    ("timestamps", "step", "max_indexes", "error"),
    [
        ([1, 2], 0, 10, errors.InvalidArgument),
        ([1, 2], -1, 10, errors.InvalidArgument),
        ([1, 2], 10, 0, errors.InvalidArgument),
        ([1, 2], 10, -2, errors.InvalidArgument),
        ([2, 1], 10, 10, errors.InvalidArgument),
        ([1, 2], 1.5, 10, errors.InvalidInputType),
        ([1, 2], 10, None, errors.InvalidInputType),
        ([1.0, 2.0], 10, 10, errors.InvalidInputType),
        ("12", 10, 10, errors.InvalidInputType),
    ],
)
def test_cut_segments_rejects_bad_input(
    timestamps: Any, step: Any, max_indexes: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        cut_segments(timestamps, step, max_indexes)


@given(
    rows=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3), st.integers(0, 10)), max_size=60),
    presort=st.booleans(),
)
def test_sort_indexes_matches_sorted_with_first_position_kept(rows: list[Index], presort: bool) -> None:
    if presort:
        rows = sorted(rows)
    expected: list[Index] = []
    seen: set[tuple[int, int]] = set()
    for t, ledger, entry in sorted(rows):
        if (ledger, entry) not in seen:
            seen.add((ledger, entry))
            expected.append((t, ledger, entry))
    at, ledgers, entries = sort_indexes(*columns3(rows))
    for column in (at, ledgers, entries):
        assert column.dtype == np.int64
    assert list(zip(at.tolist(), ledgers.tolist(), entries.tolist(), strict=True)) == expected


def test_sort_indexes_keeps_the_earliest_timestamp() -> None:
    at, ledgers, entries = sort_indexes([900, 100, 500], [1, 1, 1], [7, 7, 8])
    assert at.tolist() == [100, 500]
    assert ledgers.tolist() == [1, 1]
    assert entries.tolist() == [7, 8]


# -- bad input of the column functions -------------------------------------------------------------------


@pytest.mark.parametrize("fn", [encode_segment, sort_indexes])
@pytest.mark.parametrize(
    ("at", "ledgers", "entries", "error"),
    [
        ([1, 2], [1], [1], errors.LengthMismatch),
        ([1], [1, 2], [1, 2], errors.LengthMismatch),
        ([1], [1], [1, 2], errors.LengthMismatch),
        ([-1], [1], [1], errors.InvalidArgument),
        ([1], [-1], [1], errors.InvalidPosition),
        ([1], [1], [-1], errors.InvalidPosition),
        ([1], [1], [2**32], errors.InvalidPosition),
        ([1], [2**63], [1], errors.InvalidPosition),
        ([1.5], [1], [1], errors.InvalidInputType),
        ([1], ["a"], [1], errors.InvalidInputType),
        ([1], [1], None, errors.InvalidInputType),
        (np.zeros((1, 1), np.int64), [1], [1], errors.InvalidInputType),
    ],
)
def test_index_columns_reject_bad_input(
    fn: Any, at: Any, ledgers: Any, entries: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        fn(at, ledgers, entries)


@pytest.mark.parametrize("fn", [decode_segment, bitmap_cardinality])
@pytest.mark.parametrize("bad", [None, 12, "0a00", [10, 0], np.zeros(2, np.uint8)])
def test_byte_functions_reject_non_bytes(fn: Any, bad: Any) -> None:
    with pytest.raises(errors.InvalidInputType):
        fn(bad)


# -- per-ledger bitmaps -----------------------------------------------------------------------------------


@st.composite
def ledger_entries(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Positions over a few ledgers: scattered entries plus runs (array, run and bitmap containers)."""
    ledgers: list[int] = []
    entries: list[int] = []
    for _ in range(draw(st.integers(0, 4))):
        ledger = draw(st.integers(0, 5) | st.just(I64_MAX))
        values = draw(st.lists(ENTRY_IDS, max_size=30))
        for first, length in draw(st.lists(st.tuples(ENTRY_IDS, st.integers(0, 10_000)), max_size=2)):
            values += range(first, min(first + length, U32_MAX + 1))
        if draw(st.booleans()):
            values += range(0, 2 * C, draw(st.integers(2, 40)))
        ledgers += [ledger] * len(values)
        entries += values
    order = draw(st.permutations(range(len(ledgers))))
    return [ledgers[i] for i in order], [entries[i] for i in order]


@given(positions=ledger_entries())
def test_segment_bitmaps_match_pyroaring(positions: tuple[list[int], list[int]]) -> None:
    ledgers, entries = positions
    expected: dict[int, set[int]] = {}
    for ledger, entry in zip(ledgers, entries, strict=True):
        expected.setdefault(ledger, set()).add(entry)
    got = segment_bitmaps(np.array(ledgers, np.int64), np.array(entries, np.int64))
    assert [ledger for ledger, _ in got] == sorted(expected)
    for ledger, data in got:
        assert isinstance(data, bytes)
        assert data == roaring_bytes(expected[ledger])
        assert bitmap_cardinality(data) == len(expected[ledger])


def test_segment_bitmaps_reject_bad_input() -> None:
    with pytest.raises(errors.LengthMismatch):
        segment_bitmaps([1, 2], [1])
    with pytest.raises(errors.InvalidPosition):
        segment_bitmaps([1], [2**32])
    with pytest.raises(errors.InvalidPosition):
        segment_bitmaps([-1], [0])
    assert segment_bitmaps([], []) == []


@given(entries=st.lists(ENTRY_IDS, max_size=50), optimize=st.booleans())
def test_bitmap_cardinality_reads_java_style_bitmaps(entries: list[int], optimize: bool) -> None:
    bm = pyroaring.BitMap(entries)
    if optimize:
        bm.run_optimize()
    assert bitmap_cardinality(bm.serialize()) == len(bm)
    assert bitmap_cardinality(bytearray(bm.serialize())) == len(bm)


@given(
    entries=st.lists(ENTRY_IDS, min_size=1, max_size=30),
    run=st.tuples(ENTRY_IDS, st.integers(0, 5000)),
)
def test_every_truncated_bitmap_is_corrupt(entries: list[int], run: tuple[int, int]) -> None:
    bm = pyroaring.BitMap(entries)
    bm.add_range(run[0], min(run[0] + run[1], U32_MAX + 1))
    bm.run_optimize()
    data = bytes(bm.serialize())
    for cut in range(len(data)):
        with pytest.raises(errors.CorruptSnapshot):
            bitmap_cardinality(data[:cut])
    with pytest.raises(errors.CorruptSnapshot):
        bitmap_cardinality(data + b"\x00")


@given(data=st.binary(max_size=80))
def test_random_bytes_are_a_bitmap_or_corrupt(data: bytes) -> None:
    try:
        got = bitmap_cardinality(data)
    except errors.CorruptSnapshot:
        return
    assert got == len(pyroaring.BitMap.deserialize(data))


# -- RangeSet.union_ledger_bytes / remove_many against a Python set ----------------------------------------


Positions = set[tuple[int, int]]


def model_runs(model: Positions) -> int:
    """Number of maximal runs per ledger: what len(RangeSet) must report."""
    runs, previous = 0, None
    for ledger, entry in sorted(model):
        if previous != (ledger, entry - 1):
            runs += 1
        previous = (ledger, entry)
    return runs


@given(
    steps=st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 3),
            st.lists(st.integers(0, 300) | st.sampled_from([C - 1, C, U32_MAX - 1, U32_MAX]), max_size=25),
            st.lists(st.tuples(st.integers(0, 300) | st.just(U32_MAX - 50), st.integers(0, 400)), max_size=2),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_union_and_remove_many_match_a_set(
    steps: list[tuple[bool, int, list[int], list[tuple[int, int]], bool]],
) -> None:
    rs = RangeSet()
    model: Positions = set()
    for is_union, ledger, entries, runs, optimize in steps:
        if is_union:
            bm = pyroaring.BitMap(entries)
            for first, length in runs:
                bm.add_range(first, min(first + length, U32_MAX + 1))
            if optimize:
                bm.run_optimize()
            new = {(ledger, e) for e in bm} - model
            rs.clear_dirty()
            assert rs.union_ledger_bytes(ledger, bm.serialize()) == len(new)
            assert rs.dirty_ledgers() == ([ledger] if new else [])
            model |= new
        else:
            ledgers = [(ledger + i) % 4 for i in range(len(entries))]
            expected = []
            for position in zip(ledgers, entries, strict=True):
                expected.append(position in model)
                model.discard(position)
            got = rs.remove_many(np.array(ledgers, np.int64), entries)
            assert got.dtype == np.bool_
            assert got.tolist() == expected
        assert len(rs) == model_runs(model)
        assert rs.total_cardinality() == len(model)
    for ledger in rs.ledgers():
        assert rs.ledger_to_bytes(ledger) == roaring_bytes(e for owner, e in model if owner == ledger)


def test_union_ledger_bytes_rejects_damage_and_changes_nothing() -> None:
    rs = RangeSet()
    rs.add_many([3, 3, 4], [1, 2, 9])
    rs.clear_dirty()
    before = rs.to_bytes()
    good = roaring_bytes([5, 6, 70_000])
    for bad in (good[:-1], good + b"\x00", b"", b"\x01\x02\x03\x04"):
        with pytest.raises(errors.CorruptSnapshot):
            rs.union_ledger_bytes(3, bad)
    with pytest.raises(errors.InvalidPosition):
        rs.union_ledger_bytes(-1, good)
    with pytest.raises(errors.InvalidInputType):
        rs.union_ledger_bytes(3, "not bytes")
    with pytest.raises(errors.InvalidInputType):
        rs.union_ledger_bytes(3.0, good)
    assert rs.to_bytes() == before
    assert rs.dirty_ledgers() == []
    assert rs.union_ledger_bytes(3, memoryview(good)) == 3
    assert rs.union_ledger_bytes(3, good) == 0
    assert str(rs) == "[(3:0..3:2],(3:4..3:6],(3:69999..3:70000],(4:8..4:9]]"


def test_union_of_a_whole_ledger_is_one_range() -> None:
    bm = pyroaring.BitMap()
    bm.add_range(0, U32_MAX + 1)
    rs = RangeSet()
    rs.add(0, 17)
    assert rs.union_ledger_bytes(0, bm.serialize()) == U32_MAX  # 2^32 entries, one already held
    assert len(rs) == 1
    assert rs.remove_many([0, 0, 0], [5, 5, U32_MAX]).tolist() == [True, False, True]
    assert len(rs) == 2


def test_remove_many_rejects_bad_input_and_changes_nothing() -> None:
    rs = RangeSet()
    rs.add_many([1, 1, 2], [0, 1, 5])
    rs.clear_dirty()
    before = rs.to_bytes()
    for ledgers, entries, error in (
        ([1, 1], [0, -1], errors.InvalidPosition),
        ([1, -1], [0, 1], errors.InvalidPosition),
        ([1, 1], [0, 2**32], errors.InvalidPosition),
        ([1, 1], [0], errors.LengthMismatch),
        ([1, 1], [0.0, 1.0], errors.InvalidInputType),
        ([1], None, errors.InvalidInputType),
    ):
        with pytest.raises(error):
            rs.remove_many(ledgers, entries)
    assert rs.to_bytes() == before
    assert rs.dirty_ledgers() == []
    assert rs.remove_many([], []).tolist() == []


def test_round_trip_of_a_random_bucket() -> None:
    """A bucket's indexes: sorted, cut, encoded and decoded per segment, bitmaps ORed back into a set."""
    rnd = random.Random(195)
    rows = [
        (rnd.randrange(0, 3_600_000), rnd.randrange(10, 14), rnd.randrange(0, 5000)) for _ in range(20_000)
    ]
    at, ledgers, entries = sort_indexes(*columns3(rows))
    ends = cut_segments(at, 300_000, 5000).tolist()
    restored = RangeSet()
    start = 0
    for end in ends:
        data = encode_segment(at[start:end], ledgers[start:end], entries[start:end])
        back = decode_segment(data)
        assert [c.tolist() for c in back] == [
            at[start:end].tolist(),
            ledgers[start:end].tolist(),
            entries[start:end].tolist(),
        ]
        for ledger, bitmap in segment_bitmaps(ledgers[start:end], entries[start:end]):
            restored.union_ledger_bytes(ledger, bitmap)
        start = end
    assert start == len(at)
    expected = RangeSet()
    expected.add_many(ledgers, entries)
    assert restored == expected
    assert restored.total_cardinality() == len({(r[1], r[2]) for r in rows})
