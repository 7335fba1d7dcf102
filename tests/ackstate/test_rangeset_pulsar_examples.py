"""Example tests taken from Apache Pulsar's ack-state behaviour (OpenLongPairRangeSet et al.)."""

from __future__ import annotations

import numpy as np
import pytest

from cursorkit import Position, RangeSet
from rangeset_model import ModelRangeSet, encode_long_list_maps, encode_message_ranges


def entries_of(rs: RangeSet, ledger: int) -> list[int]:
    """The entries of one ledger, from the set's open-closed range rows (small sets only)."""
    out: list[int] = []
    for lk, lv, _, uv in rs.ranges_array().tolist():
        if lk == ledger:
            out.extend(range(lv + 1, uv + 1))
    return out


def filled(spec: dict[int, range], pulsar_quirks: bool = False) -> RangeSet:
    """A RangeSet holding the given entries per ledger."""
    rs = RangeSet(pulsar_quirks=pulsar_quirks)
    for ledger, entries in spec.items():
        for entry in entries:
            rs.add(ledger, entry)
    return rs


# -- string form and ranges ---------------------------------------------------------------------


def test_hole_example_from_the_article() -> None:
    """Acking 5:0..5:5 and 5:7 leaves a hole at 5:6: two open-closed ranges, -1 lower bound."""
    rs = RangeSet()
    for entry in range(6):
        assert rs.add(5, entry)
    assert rs.add(5, 7)
    assert str(rs) == "[(5:-1..5:5],(5:6..5:7]]"
    assert repr(rs) == "RangeSet([(5:-1..5:5],(5:6..5:7]])"
    assert len(rs) == 2
    assert rs.ranges_array().tolist() == [[5, -1, 5, 5], [5, 6, 5, 7]]
    assert rs.first_range() == (Position(5, -1), Position(5, 5))
    assert rs.last_range() == (Position(5, 6), Position(5, 7))


def test_ranges_returns_open_closed_rows() -> None:
    """ranges() lists open-closed (lk, lv, uk, uv) int tuples, the rows of ranges_array()."""
    rs = RangeSet()
    rs.add_open_closed(5, -1, 5, 5)
    rs.add(5, 7)
    assert rs.ranges() == [(5, -1, 5, 5), (5, 6, 5, 7)]
    assert [tuple(r) for r in rs.ranges_array().tolist()] == rs.ranges()
    first = rs.first_range()
    assert first is not None
    assert (first[0].ledger_id, first[0].entry_id, first[1].ledger_id, first[1].entry_id) == rs.ranges()[0]
    assert isinstance(first[0], Position)
    assert RangeSet().ranges() == []


def test_two_ranges_string_form() -> None:
    """(0:5..0:75] + (0:97..0:105] prints exactly like Pulsar's toString (no spaces)."""
    rs = RangeSet()
    rs.add_open_closed(0, 5, 0, 75)
    rs.add_open_closed(0, 97, 0, 105)
    assert str(rs) == "[(0:5..0:75],(0:97..0:105]]"
    assert rs.total_cardinality() == 70 + 8
    assert str(RangeSet()) == "[]"
    assert repr(RangeSet()) == "RangeSet([])"


def test_adjacent_adds_merge() -> None:
    """(0:5..0:10] and (0:10..0:20] are one run; a single add bridging a gap merges two runs."""
    rs = RangeSet()
    rs.add_open_closed(0, 5, 0, 10)
    rs.add_open_closed(0, 10, 0, 20)
    assert str(rs) == "[(0:5..0:20]]"
    rs.add_open_closed(0, 21, 0, 30)
    assert len(rs) == 2
    assert rs.add(0, 21)
    assert str(rs) == "[(0:5..0:30]]"
    assert len(rs) == 1


def test_ranges_never_cross_ledgers() -> None:
    """Contiguous entries in consecutive ledgers are still separate ranges."""
    rs = RangeSet()
    rs.add_open_closed(1, -1, 1, 9)
    rs.add_open_closed(2, -1, 2, 9)
    assert str(rs) == "[(1:-1..1:9],(2:-1..2:9]]"
    assert len(rs) == 2


# -- add_open_closed ----------------------------------------------------------------------------


@pytest.mark.parametrize("quirks", [False, True])
def test_empty_same_ledger_add_is_a_noop(quirks: bool) -> None:
    """(0:8..0:8] adds nothing; so does a reversed same-ledger range."""
    rs = RangeSet(pulsar_quirks=quirks)
    rs.add_open_closed(0, 8, 0, 8)
    rs.add_open_closed(0, 9, 0, 3)
    assert rs.is_empty()
    assert len(rs) == 0
    assert str(rs) == "[]"
    assert rs.ledgers() == []
    assert rs.total_cardinality() == 0
    assert rs == RangeSet()


def test_empty_add_records_ledger_only_with_quirks() -> None:
    """With pulsar_quirks the empty add creates an empty bitmap: an empty word list in toRanges."""
    quirky = RangeSet(pulsar_quirks=True)
    quirky.add_open_closed(0, 8, 0, 8)
    words = quirky.to_long_list_map()
    assert list(words) == [0]
    assert words[0].dtype == np.int64
    assert words[0].tolist() == []
    assert quirky.long_list_map_wire_size() == len(encode_long_list_maps({0: []}))
    assert quirky.ledgers() == []
    assert quirky.is_empty()

    plain = RangeSet()
    plain.add_open_closed(0, 8, 0, 8)
    assert plain.to_long_list_map() == {}
    assert plain.long_list_map_wire_size() == 0


def test_add_open_closed_reversed_ledgers_is_a_noop() -> None:
    """A reversed range (lk > uk) adds nothing."""
    rs = filled({3: range(5)})
    rs.add_open_closed(4, 1, 3, 9)
    assert str(rs) == "[(3:-1..3:4]]"


def test_cross_ledger_add_upper_only_when_lower_absent() -> None:
    """(2:10..4:10] on an empty set: nothing in ledger 2 or 3, entries 0..10 of ledger 4."""
    rs = RangeSet()
    rs.add_open_closed(2, 10, 4, 10)
    assert str(rs) == "[(4:-1..4:10]]"
    assert rs.ledgers() == [4]


def test_cross_ledger_add_extends_lower_to_its_last_set_entry() -> None:
    """The lower ledger is filled from lv+1 up to its highest entry only, never to its end."""
    rs = filled({2: [3, 20]})
    rs.add_open_closed(2, 10, 4, 5)
    assert entries_of(rs, 2) == [3, *range(11, 21)]
    assert entries_of(rs, 4) == list(range(6))
    assert str(rs) == "[(2:2..2:3],(2:10..2:20],(4:-1..4:5]]"


def test_cross_ledger_add_leaves_lower_alone_when_its_last_entry_is_not_above_lv() -> None:
    """Lower ledger with highest entry <= lv is untouched."""
    rs = filled({2: [3, 10]})
    rs.add_open_closed(2, 10, 3, 1)
    assert entries_of(rs, 2) == [3, 10]
    assert entries_of(rs, 3) == [0, 1]


def test_cross_ledger_add_leaves_middle_ledgers_untouched() -> None:
    """Ledgers strictly between lk and uk are not filled (Pulsar does not know their sizes)."""
    rs = filled({1: [0, 50], 2: [7]})
    rs.add_open_closed(1, 10, 3, 2)
    assert entries_of(rs, 1) == [0, *range(11, 51)]
    assert entries_of(rs, 2) == [7]
    assert entries_of(rs, 3) == [0, 1, 2]


def test_cross_ledger_add_with_upper_entry_minus_one_adds_nothing_upper() -> None:
    """An upper entry of -1 on a cross-ledger add touches no upper entries."""
    rs = filled({1: [9]})
    rs.add_open_closed(1, 2, 2, -1)
    assert str(rs) == "[(1:2..1:9]]"
    assert rs.ledgers() == [1]


def test_cross_ledger_add_with_ledger_sizes() -> None:
    """With ledger_sizes the lower ledger runs to its end and middle ledgers are filled."""
    rs = RangeSet()
    rs.add_open_closed(1, 10, 4, 2, ledger_sizes={1: 15, 2: 3, 3: 0, 9: 100})
    assert str(rs) == "[(1:10..1:14],(2:-1..2:2],(4:-1..4:2]]"
    rs2 = RangeSet()
    rs2.add_open_closed(1, 10, 4, 2, ledger_sizes={2: 3})
    assert str(rs2) == "[(2:-1..2:2],(4:-1..4:2]]"


def test_add_ranges_rows() -> None:
    """add_ranges applies add_open_closed to each (lk, lv, uk, uv) row."""
    rs = RangeSet()
    rows = np.array([[0, 5, 0, 75], [0, 97, 0, 105], [2, 10, 4, 1]], dtype=np.int64)
    rs.add_ranges(rows)
    assert str(rs) == "[(0:5..0:75],(0:97..0:105],(4:-1..4:1]]"
    rs.add_ranges(np.array([[4, 1, 5, 0]]), ledger_sizes={4: 3})
    assert str(rs) == "[(0:5..0:75],(0:97..0:105],(4:-1..4:2],(5:-1..5:0]]"


def test_sentinel_integer_max_value_with_quirks() -> None:
    """pulsar_quirks: a cross-ledger side whose entry is Integer.MAX_VALUE is skipped."""
    int_max = 2**31 - 1
    quirky = RangeSet(pulsar_quirks=True)
    quirky.add_open_closed(0, 5, 1, int_max)
    assert quirky.is_empty()
    plain = RangeSet()
    plain.add_open_closed(0, 5, 1, int_max)
    assert plain.total_cardinality() == 2**31
    assert str(plain) == f"[(1:-1..1:{int_max}]]"

    quirky = filled({0: [int_max + 5]}, pulsar_quirks=True)
    quirky.add_open_closed(0, int_max - 1, 1, 0)
    assert entries_of(quirky, 0) == [int_max + 5]
    assert entries_of(quirky, 1) == [0]
    plain = filled({0: [int_max + 5]})
    plain.add_open_closed(0, int_max - 1, 1, 0)
    assert plain.cardinality(0, -1, 0, 2**32 - 1) == 6


def test_sentinel_with_ledger_sizes_with_quirks() -> None:
    """pulsar_quirks: the Integer.MAX_VALUE sentinel skips a side even when ledger_sizes is given."""
    int_max = 2**31 - 1
    lower = RangeSet(pulsar_quirks=True)
    lower.add_open_closed(0, int_max - 1, 1, 3, ledger_sizes={0: int_max + 10})
    assert str(lower) == "[(1:-1..1:3]]"
    upper = RangeSet(pulsar_quirks=True)
    upper.add_open_closed(0, 5, 1, int_max, ledger_sizes={0: 10})
    assert str(upper) == "[(0:5..0:9]]"
    plain = RangeSet()
    plain.add_open_closed(0, int_max - 1, 1, 3, ledger_sizes={0: int_max + 10})
    assert str(plain) == f"[(0:{int_max - 1}..0:{int_max + 9}],(1:-1..1:3]]"


# -- queries ------------------------------------------------------------------------------------


def test_range_containing_is_closed() -> None:
    """range_containing returns the CLOSED run [first, last], unlike every other accessor."""
    rs = RangeSet()
    rs.add_open_closed(0, 5, 0, 75)
    assert rs.range_containing(0, 6) == (Position(0, 6), Position(0, 75))
    assert rs.range_containing(0, 75) == (Position(0, 6), Position(0, 75))
    assert rs.range_containing(0, 5) is None
    assert rs.range_containing(0, 76) is None
    assert rs.range_containing(1, 6) is None
    assert rs.range_containing(0, -1) is None


def test_cardinality_is_inclusive_at_both_ends() -> None:
    """cardinality(lk, lv, uk, uv) counts entries in [lk:lv, uk:uv]."""
    rs = RangeSet()
    rs.add_open_closed(0, -1, 0, 9)  # 0:0..0:9
    rs.add_open_closed(2, 4, 2, 9)  # 2:5..2:9
    assert rs.cardinality(0, 0, 0, 9) == 10
    assert rs.cardinality(0, 3, 0, 3) == 1
    assert rs.cardinality(0, -1, 0, 0) == 1
    assert rs.cardinality(0, 9, 2, 5) == 2
    assert rs.cardinality(0, 0, 5, 0) == 15
    assert rs.cardinality(2, 6, 0, 1) == 0
    assert rs.cardinality(1, 0, 1, 100) == 0


def test_contains_minus_one_is_false() -> None:
    """contains(L, -1) is False even when entry 0 is present."""
    rs = filled({3: range(3)})
    assert rs.contains(3, 0)
    assert not rs.contains(3, -1)
    assert not rs.contains(4, 0)
    assert rs.contains_many([3, 3, 3], [-1, 0, 3]).tolist() == [False, True, False]


def test_span_crosses_ledgers() -> None:
    """The span runs from the first ledger's first entry - 1 to the last ledger's last entry."""
    rs = RangeSet()
    assert rs.span() is None
    assert rs.first_range() is None
    assert rs.last_range() is None
    rs.add_open_closed(3, 9, 3, 12)
    rs.add_open_closed(3, 20, 3, 22)
    rs.add_open_closed(7, -1, 7, 0)
    rs.add_open_closed(7, 4, 7, 8)
    assert rs.span() == (Position(3, 9), Position(7, 8))
    assert rs.first_range() == (Position(3, 9), Position(3, 12))
    assert rs.last_range() == (Position(7, 4), Position(7, 8))
    assert rs.ledgers() == [3, 7]


# -- removes ------------------------------------------------------------------------------------


def test_remove_at_most_drops_lower_ledgers_and_keeps_the_given_one() -> None:
    """remove_at_most(2, -1) drops ledgers 0 and 1 and leaves ledger 2 intact."""
    rs = filled({0: range(5), 1: range(5), 2: range(5), 3: range(2)})
    rs.remove_at_most(2, -1)
    assert str(rs) == "[(2:-1..2:4],(3:-1..3:1]]"
    rs.remove_at_most(2, 2)
    assert str(rs) == "[(2:2..2:4],(3:-1..3:1]]"
    rs.remove_at_most(2, 4)
    assert rs.ledgers() == [3]


def test_single_remove_splits_a_run() -> None:
    """Removing the middle of a run splits it; removing an absent entry returns False."""
    rs = filled({1: range(10)})
    assert rs.remove(1, 4)
    assert not rs.remove(1, 4)
    assert not rs.remove(9, 4)
    assert str(rs) == "[(1:-1..1:3],(1:4..1:9]]"


@pytest.mark.parametrize("quirks", [False, True])
def test_cross_ledger_remove_open_closed(quirks: bool) -> None:
    """(0:5..2:3]: lower from 0:6 to its end (quirk: the highest entry survives), middle dropped."""
    rs = filled({0: range(11), 1: range(11), 2: range(11), 3: range(2)}, pulsar_quirks=quirks)
    rs.remove_open_closed(0, 5, 2, 3)
    if quirks:
        assert entries_of(rs, 0) == [0, 1, 2, 3, 4, 5, 10]
        assert str(rs) == "[(0:-1..0:5],(0:9..0:10],(2:3..2:10],(3:-1..3:1]]"
    else:
        assert entries_of(rs, 0) == [0, 1, 2, 3, 4, 5]
        assert str(rs) == "[(0:-1..0:5],(2:3..2:10],(3:-1..3:1]]"
    assert rs.ledgers() == [0, 2, 3]


def test_same_ledger_remove_open_closed_has_no_quirk() -> None:
    """Inside one ledger the remove is exact in both modes."""
    for quirks in (False, True):
        rs = filled({0: range(11)}, pulsar_quirks=quirks)
        rs.remove_open_closed(0, 5, 0, 10)
        assert str(rs) == "[(0:-1..0:5]]"


def test_remove_open_closed_empties_and_drops_a_ledger() -> None:
    """A ledger emptied by a remove disappears from ledgers() and ranges."""
    rs = filled({0: range(3), 1: range(3)})
    rs.remove_open_closed(0, -1, 0, 2)
    assert rs.ledgers() == [1]
    assert str(rs) == "[(1:-1..1:2]]"


# -- persistence --------------------------------------------------------------------------------


def test_long_list_map_word_layout() -> None:
    """Entries {0, 1, 63} -> one word with bit 63 set: a negative Java long."""
    rs = filled({0: [0, 1, 63]})
    words = rs.to_long_list_map()
    assert list(words) == [0]
    assert words[0].dtype == np.int64
    assert words[0].tolist() == [-9223372036854775805]
    assert (1 | 2 | 1 << 63) - 2**64 == -9223372036854775805


def test_long_list_map_multiple_words_and_no_trailing_zeros() -> None:
    """Bit i of word j is entry 64*j + i; an all-zero middle word is kept, trailing ones are not."""
    rs = filled({7: [64, 65, 200], 2: [127]})
    words = rs.to_long_list_map()
    assert sorted(words) == [2, 7]
    assert words[2].tolist() == [0, -(2**63)]
    assert words[7].tolist() == [0, 3, 0, 1 << (200 - 192)]
    assert RangeSet.from_long_list_map(words) == rs
    rs.remove(7, 200)
    assert rs.to_long_list_map()[7].tolist() == [0, 3]


def test_long_list_map_all_ones_word() -> None:
    """64 consecutive entries give a -1 word."""
    rs = RangeSet()
    rs.add_open_closed(4, -1, 4, 63)
    assert rs.to_long_list_map()[4].tolist() == [-1]
    assert rs.long_list_map_wire_size() == len(encode_long_list_maps({4: [-1]}))
    # tag 0x32, length 13, key 08 04, value 10 + 10-byte varint
    assert rs.long_list_map_wire_size() == 2 + 2 + 11


def test_from_long_list_map_accepts_lists_and_negative_words() -> None:
    """from_long_list_map inverts to_long_list_map and accepts plain lists of signed words."""
    rs = RangeSet.from_long_list_map({3: [-9223372036854775805], 1: np.array([5], np.int64)})
    assert str(rs) == "[(1:-1..1:0],(1:1..1:2],(3:-1..3:1],(3:62..3:63]]"
    assert not rs.pulsar_quirks
    assert RangeSet.from_long_list_map({}, pulsar_quirks=True).pulsar_quirks


def test_long_list_map_truncation_default_vs_quirks() -> None:
    """Default keeps a ledger while the count INCLUDING it <= max; quirks use the count BEFORE it."""
    spec = {1: range(10), 2: range(5), 3: range(1)}
    plain = filled(spec)
    quirky = filled(spec, pulsar_quirks=True)
    assert sorted(plain.to_long_list_map(15)) == [1, 2]
    assert sorted(plain.to_long_list_map(14)) == [1]
    assert sorted(plain.to_long_list_map(9)) == []
    assert sorted(plain.to_long_list_map(16)) == [1, 2, 3]
    assert sorted(quirky.to_long_list_map(9)) == [1]
    assert sorted(quirky.to_long_list_map(10)) == [1, 2]
    assert sorted(quirky.to_long_list_map(0)) == [1]
    assert sorted(quirky.to_long_list_map(15)) == [1, 2, 3]
    assert sorted(quirky.to_long_list_map(14)) == [1, 2]
    for max_entries in (None, 0, 9, 10, 14, 15, 16):
        for rs, quirks in ((plain, False), (quirky, True)):
            model = ModelRangeSet(quirks)
            for ledger, entries in spec.items():
                for entry in entries:
                    model.add(ledger, entry)
            expected = model.to_long_list_map(max_entries)
            got = {k: v.tolist() for k, v in rs.to_long_list_map(max_entries).items()}
            assert got == expected
            assert rs.long_list_map_wire_size(max_entries) == len(encode_long_list_maps(expected))


def test_message_range_wire_size_hand_computed() -> None:
    """(5:-1..5:5] encodes as 1a 15 | 0a 0d 08 05 10 <-1 as 10 bytes> | 12 04 08 05 10 05."""
    rs = filled({5: range(6)})
    expected = bytes.fromhex("1a15" + "0a0d" + "0805" + "10" + "ff" * 9 + "01" + "1204" + "08051005")
    assert len(expected) == 23
    assert encode_message_ranges(rs.ranges_array().tolist()) == expected
    assert rs.message_range_wire_size() == 23
    assert rs.message_range_wire_size(0) == 0

    rs.add(5, 7)  # second range (5:6..5:7]: 1a 0c | 0a 04 08 05 10 06 | 12 04 08 05 10 07
    assert rs.message_range_wire_size() == 23 + 14
    assert rs.message_range_wire_size(1) == 23
    assert RangeSet().message_range_wire_size() == 0


def test_message_range_wire_size_multi_byte_varints() -> None:
    """Ledger ids around 3 M and entry ids past 127 use multi-byte varints (~22 B per range)."""
    rs = RangeSet()
    rs.add_open_closed(3_000_000, 200, 3_000_000, 16_000)
    # lower: 08 + 4 varint bytes (2^21 <= 3 M < 2^28) + 10 + 2 bytes (128 <= 200 < 2^14) = 8
    # upper: 08 + 4 + 10 + 2 (16000 < 2^14) = 8; range: 0a 08 .. 12 08 .. = 20; field: 1a 14 = 22
    assert rs.message_range_wire_size() == 22
    model = ModelRangeSet()
    model.add_open_closed(3_000_000, 200, 3_000_000, 16_000)
    assert model.message_range_wire_size() == 22
    assert rs.to_message_ranges().tolist() == [[3_000_000, 200, 3_000_000, 16_000]]


def test_equality_ignores_flags() -> None:
    """Two sets with the same positions are equal whatever their pulsar_quirks flag."""
    a = filled({1: range(3)})
    b = filled({1: range(3)}, pulsar_quirks=True)
    b.add_open_closed(9, 4, 9, 4)  # empty quirk ledger is ignored too
    assert a == b
    assert (a != b) is False
    b.add(1, 3)
    assert a != b
    assert a != "not a range set"
