"""Bad input is rejected with cursorkit.errors classes, names the bad value, and changes nothing."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import Position, RangeSet, errors

BAD_LEDGERS = [-1, -(2**63), -(2**63) - 1, 2**63, 2**64, 10**30]
BAD_ENTRIES = [-2, -(2**63), 2**32, 2**32 + 1, 2**63, 2**64]
NON_INTS: list[Any] = [1.0, 1.5, float("nan"), "1", None, b"1", [1], np.float64(2.0)]

# Format v1 of to_bytes (rust/cursorkit-core/src/codec.rs): "CKRS", version u8, flags u8,
# u32 record count, records (i64 ledger, u32 length, roaring bytes), CRC-32 (LE) of the rest.
VERSION_OFFSET = 4
FLAGS_OFFSET = 5
COUNT_OFFSET = 6
HEADER_LEN = 10
CRC_LEN = 4


def sample() -> RangeSet:
    """A small non-empty set spanning several ledgers and containers."""
    rs = RangeSet()
    rs.add_open_closed(1, -1, 1, 9)
    rs.add_open_closed(1, 20, 1, 70_000)
    rs.add_many([3, 3, 7], [5, 2**32 - 1, 0])
    rs.clear_dirty()
    return rs


def snapshot(rs: RangeSet) -> tuple[str, int, list[int], list[int]]:
    """Everything observable that a rejected call must leave alone."""
    return (str(rs), rs.total_cardinality(), rs.ledgers(), rs.dirty_ledgers())


def reseal(payload: bytes) -> bytes:
    """Append a valid CRC-32 so a tampered payload gets past the checksum."""
    return payload + struct.pack("<I", zlib.crc32(payload))


def assert_names(exc: BaseException, value: Any) -> None:
    """The error message names the rejected value."""
    message = str(exc)
    assert str(value) in message or repr(value) in message, (value, message)


def test_error_hierarchy() -> None:
    """Every cursorkit error is a CursorkitError and also the natural stdlib class."""
    assert issubclass(errors.InvalidPosition, ValueError)
    assert issubclass(errors.InvalidArgument, ValueError)
    assert issubclass(errors.InvalidInputType, TypeError)
    assert issubclass(errors.LengthMismatch, ValueError)
    assert issubclass(errors.CorruptSnapshot, ValueError)
    assert issubclass(errors.UnsupportedVersion, errors.CorruptSnapshot)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.CursorkitError)


# -- scalar ids ---------------------------------------------------------------------------------

TWO_ARG_METHODS = ["add", "remove", "contains", "range_containing", "remove_at_most"]
FOUR_ARG_METHODS = ["add_open_closed", "remove_open_closed", "cardinality"]


def call_with(method: str, ledger: Any, entry: Any) -> Callable[[RangeSet], Any]:
    """A call of the method with (ledger, entry) as the only / upper bound."""

    def call(rs: RangeSet) -> Any:
        fn = getattr(rs, method)
        if method in FOUR_ARG_METHODS:
            return fn(0, -1, ledger, entry)
        return fn(ledger, entry)

    return call


@pytest.mark.parametrize("method", TWO_ARG_METHODS + FOUR_ARG_METHODS)
@pytest.mark.parametrize("ledger", BAD_LEDGERS)
def test_bad_ledger_is_invalid_position(method: str, ledger: int) -> None:
    """Ledger ids outside [0, 2^63) raise InvalidPosition (a ValueError) naming the id."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.InvalidPosition) as info:
        call_with(method, ledger, 1)(rs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, errors.CursorkitError)
    assert_names(info.value, ledger)
    assert snapshot(rs) == before


@pytest.mark.parametrize("method", TWO_ARG_METHODS + FOUR_ARG_METHODS)
@pytest.mark.parametrize("entry", BAD_ENTRIES)
def test_bad_entry_is_invalid_position(method: str, entry: int) -> None:
    """Entry ids outside [-1, 2^32) raise InvalidPosition naming the id."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.InvalidPosition) as info:
        call_with(method, 1, entry)(rs)
    assert isinstance(info.value, ValueError)
    assert_names(info.value, entry)
    assert snapshot(rs) == before


@pytest.mark.parametrize("method", FOUR_ARG_METHODS)
@pytest.mark.parametrize(("lk", "lv"), [(-1, 0), (2**63, 0), (0, -2), (0, 2**32)])
def test_bad_lower_bound_is_invalid_position(method: str, lk: int, lv: int) -> None:
    """The lower bound of a four-argument call is validated too."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.InvalidPosition):
        getattr(rs, method)(lk, lv, 5, 5)
    assert snapshot(rs) == before


@pytest.mark.parametrize("method", ["add", "remove"])
def test_minus_one_is_not_an_entry(method: str) -> None:
    """add/remove(L, -1) raise InvalidPosition: -1 is only an open lower bound."""
    rs = sample()
    with pytest.raises(errors.InvalidPosition) as info:
        getattr(rs, method)(1, -1)
    assert_names(info.value, -1)


def test_minus_one_is_a_legal_bound() -> None:
    """contains/range_containing/remove_at_most accept -1 as an entry."""
    rs = sample()
    assert rs.contains(1, -1) is False
    assert rs.range_containing(1, -1) is None
    before = str(rs)
    rs.remove_at_most(1, -1)
    assert str(rs) == before


@pytest.mark.parametrize("method", TWO_ARG_METHODS + FOUR_ARG_METHODS)
@pytest.mark.parametrize("value", NON_INTS, ids=repr)
@pytest.mark.parametrize("slot", ["ledger", "entry"])
def test_non_integer_is_invalid_input_type(method: str, value: Any, slot: str) -> None:
    """Floats, strings, None, bytes and lists raise InvalidInputType (a TypeError)."""
    rs = sample()
    before = snapshot(rs)
    ledger, entry = (value, 1) if slot == "ledger" else (1, value)
    with pytest.raises(errors.InvalidInputType) as info:
        call_with(method, ledger, entry)(rs)
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, errors.CursorkitError)
    assert snapshot(rs) == before


def test_numpy_integer_scalars_are_integers() -> None:
    """Numpy integer scalars are accepted like Python ints."""
    rs = RangeSet()
    assert rs.add(np.int64(3), np.uint32(4))
    assert rs.contains(np.int32(3), np.int64(4))


# -- bulk calls ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bulk", ["add_many", "contains_many"])
def test_float_arrays_are_invalid_input_type(bulk: str) -> None:
    """Float numpy arrays are rejected, not truncated."""
    rs = sample()
    before = snapshot(rs)
    for ledgers, entries in [
        (np.array([1.0, 2.0]), np.array([1, 2])),
        (np.array([1, 2]), np.array([1.0, 2.5])),
        ([1, 2], [1, 2.5]),
        ([1, None], [1, 2]),
        ([1, 2], ["1", "2"]),
        ("12", "12"),
    ]:
        with pytest.raises(errors.InvalidInputType):
            getattr(rs, bulk)(ledgers, entries)
    assert snapshot(rs) == before


@pytest.mark.parametrize("bulk", ["add_many", "contains_many"])
def test_two_dimensional_arrays_are_invalid_input_type(bulk: str) -> None:
    """2-D columns raise InvalidInputType."""
    rs = sample()
    before = snapshot(rs)
    grid = np.arange(4, dtype=np.int64).reshape(2, 2)
    with pytest.raises(errors.InvalidInputType):
        getattr(rs, bulk)(grid, grid)
    with pytest.raises(errors.InvalidInputType):
        getattr(rs, bulk)(np.array([1, 2]), grid)
    assert snapshot(rs) == before


@pytest.mark.parametrize("bulk", ["add_many", "contains_many"])
def test_length_mismatch(bulk: str) -> None:
    """Columns of different lengths raise LengthMismatch (a ValueError) naming both lengths."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.LengthMismatch) as info:
        getattr(rs, bulk)(np.array([1, 2, 3]), np.array([1, 2]))
    assert isinstance(info.value, ValueError)
    assert "3" in str(info.value)
    assert "2" in str(info.value)
    with pytest.raises(errors.LengthMismatch):
        getattr(rs, bulk)([1], [])
    assert snapshot(rs) == before


@pytest.mark.parametrize(
    ("ledger", "entry"),
    [(-1, 0), (2**63, 0), (0, -1), (0, -2), (0, 2**32), (0, 2**63)],
)
@pytest.mark.parametrize("as_numpy", [False, True])
def test_add_many_with_one_bad_position_at_the_end_adds_nothing(
    ledger: int, entry: int, as_numpy: bool
) -> None:
    """Validation happens before any mutation: the set and its dirty ledgers are unchanged."""
    rs = sample()
    before = snapshot(rs)
    ledgers = [9, 9, 10, 1, ledger]
    entries = [0, 1, 2, 50, entry]
    if as_numpy:
        dtype = np.uint64 if ledger >= 2**63 or entry >= 2**63 else np.int64
        args: tuple[Any, Any] = (np.array(ledgers, dtype=dtype), np.array(entries, dtype=dtype))
    else:
        args = (ledgers, entries)
    with pytest.raises(errors.InvalidPosition) as info:
        rs.add_many(*args)
    assert_names(info.value, ledger if ledger != 0 else entry)
    assert snapshot(rs) == before
    assert not rs.contains(9, 0)


def test_pyarrow_columns() -> None:
    """Arrow int arrays are accepted like numpy ones; Arrow float arrays are InvalidInputType."""
    import pyarrow as pa

    rs = RangeSet()
    assert rs.add_many(pa.array([1, 1, 2], pa.int64()), pa.array([0, 1, 0], pa.int32())) == 3
    assert rs.contains_many(pa.array([1, 2]), pa.array([1, 1])).tolist() == [True, False]
    with pytest.raises(errors.InvalidInputType):
        rs.add_many(pa.array([1.5]), pa.array([1]))


def test_contains_many_bounds() -> None:
    """contains_many accepts -1 (False) but rejects ids outside the legal ranges."""
    rs = sample()
    assert rs.contains_many([1, 1], [-1, 0]).tolist() == [False, True]
    with pytest.raises(errors.InvalidPosition):
        rs.contains_many([1, 1], [0, -2])
    with pytest.raises(errors.InvalidPosition):
        rs.contains_many(np.array([2**63], dtype=np.uint64), np.array([0], dtype=np.uint64))
    with pytest.raises(errors.InvalidPosition):
        rs.contains_many([1], [2**32])


def test_empty_columns() -> None:
    """Empty columns are fine: nothing added, an empty bool array back."""
    rs = sample()
    assert rs.add_many([], []) == 0
    assert rs.add_many(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0
    got = rs.contains_many(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert got.dtype == np.bool_
    assert got.shape == (0,)


def test_other_integer_dtypes_are_converted() -> None:
    """int8..uint64 columns are converted; non-contiguous views work."""
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        rs = RangeSet()
        assert rs.add_many(np.array([1, 1, 2], dtype=dtype), np.array([5, 6, 5], dtype=dtype)) == 3
        assert str(rs) == "[(1:4..1:6],(2:4..2:5]]"
    rs = RangeSet()
    wide = np.arange(20, dtype=np.int64)
    fours = np.full(20, 4, dtype=np.int64)
    assert rs.add_many(fours[::2], wide[::2]) == 10  # strided views
    assert rs.contains_many(fours[1::2], wide[1::2]).tolist() == [False] * 10
    assert rs.contains_many(fours[::-2], wide[::-2]).tolist() == [False] * 10
    assert rs.contains_many(fours[::-2], wide[-2::-2]).tolist() == [True] * 10


def test_add_ranges_rejects_bad_rows_without_changes() -> None:
    """add_ranges validates every row (and the shape) before adding any."""
    rs = sample()
    before = snapshot(rs)
    rows = np.array([[9, -1, 9, 5], [10, -1, 10, 5], [11, -2, 11, 5]], dtype=np.int64)
    with pytest.raises(errors.InvalidPosition):
        rs.add_ranges(rows)
    with pytest.raises((errors.InvalidInputType, errors.InvalidArgument)):
        rs.add_ranges(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(errors.InvalidInputType):
        rs.add_ranges(np.zeros((2, 4), dtype=np.float64))
    assert snapshot(rs) == before


@pytest.mark.parametrize(
    "rows",
    [[[1, 2], [3]], [[1, -1, 1, 3], [1, 2, 3]], [[1, -1, 1, "x"]], "rows", None],
    ids=["ragged", "ragged4", "str-cell", "str", "none"],
)
def test_add_ranges_rejects_malformed_rows(rows: Any) -> None:
    """Ragged, non-numeric or missing rows raise a CursorkitError (InvalidInputType)."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.InvalidInputType):
        rs.add_ranges(rows)
    assert snapshot(rs) == before


def test_bad_ledger_sizes() -> None:
    """ledger_sizes keys are ledger ids and values entry counts in [0, 2^32]."""
    rs = sample()
    before = snapshot(rs)
    with pytest.raises(errors.InvalidPosition):
        rs.add_open_closed(1, 5, 4, 5, ledger_sizes={-1: 3})
    with pytest.raises((errors.InvalidArgument, errors.InvalidPosition)):
        rs.add_open_closed(1, 5, 4, 5, ledger_sizes={2: -1})
    with pytest.raises((errors.InvalidArgument, errors.InvalidPosition)):
        rs.add_open_closed(1, 5, 4, 5, ledger_sizes={2: 2**32 + 1})
    with pytest.raises(errors.InvalidInputType):
        rs.add_open_closed(1, 5, 4, 5, ledger_sizes={2: 1.5})
    with pytest.raises(errors.InvalidInputType):
        rs.add_open_closed(1, 5, 4, 5, ledger_sizes={"2": 3})
    assert snapshot(rs) == before
    rs.add_open_closed(1, 5, 4, 5, ledger_sizes={2: 2**32})
    assert rs.cardinality(2, 0, 2, 2**32 - 1) == 2**32


@pytest.mark.parametrize(
    "call",
    [
        lambda rs: rs.ranges_array(-1),
        lambda rs: rs.to_message_ranges(-1),
        lambda rs: rs.message_range_wire_size(-1),
        lambda rs: rs.to_long_list_map(-1),
        lambda rs: rs.long_list_map_wire_size(-1),
    ],
)
def test_negative_limits_are_invalid_argument(call: Callable[[RangeSet], Any]) -> None:
    """A negative max_ranges / max_entries is an InvalidArgument (a ValueError)."""
    with pytest.raises(errors.InvalidArgument) as info:
        call(sample())
    assert isinstance(info.value, ValueError)
    assert_names(info.value, -1)


def test_float_limit_is_invalid_input_type() -> None:
    """A float limit is an InvalidInputType."""
    with pytest.raises(errors.InvalidInputType):
        sample().ranges_array(1.5)


# -- snapshots ----------------------------------------------------------------------------------


def test_snapshot_layout_assumptions() -> None:
    """The offsets used below match the v1 layout: magic, version 1, flags, record count, CRC."""
    data = sample().to_bytes()
    assert data[:4] == b"CKRS"
    assert data[VERSION_OFFSET] == 1
    assert data[FLAGS_OFFSET] == 0
    assert struct.unpack_from("<I", data, COUNT_OFFSET)[0] == 3
    assert struct.unpack("<I", data[-CRC_LEN:])[0] == zlib.crc32(data[:-CRC_LEN])
    quirky = RangeSet.from_bytes(reseal(data[:FLAGS_OFFSET] + b"\x01" + data[FLAGS_OFFSET + 1 : -4]))
    assert quirky.pulsar_quirks
    assert quirky == sample()


def test_every_truncation_is_corrupt() -> None:
    """Every proper prefix of a snapshot raises CorruptSnapshot."""
    data = sample().to_bytes()
    for n in range(len(data)):
        with pytest.raises(errors.CorruptSnapshot):
            RangeSet.from_bytes(data[:n])
    with pytest.raises(errors.CorruptSnapshot):
        RangeSet.from_bytes(data + b"\x00")


@pytest.mark.parametrize("region", ["magic", "flags", "count", "body", "checksum"])
def test_flipped_bytes_are_corrupt(region: str) -> None:
    """A flipped bit in the header, the body or the checksum raises CorruptSnapshot."""
    data = sample().to_bytes()
    spans = {
        "magic": range(0, 4),
        "flags": range(FLAGS_OFFSET, FLAGS_OFFSET + 1),
        "count": range(COUNT_OFFSET, HEADER_LEN),
        "body": range(HEADER_LEN, len(data) - CRC_LEN),
        "checksum": range(len(data) - CRC_LEN, len(data)),
    }
    for offset in spans[region]:
        for bit in (0x01, 0x80):
            bad = bytearray(data)
            bad[offset] ^= bit
            with pytest.raises(errors.CorruptSnapshot) as info:
                RangeSet.from_bytes(bytes(bad))
            assert isinstance(info.value, ValueError)
            assert not isinstance(info.value, errors.UnsupportedVersion)


@pytest.mark.parametrize("version", [0, 2, 9, 255])
def test_unknown_version(version: int) -> None:
    """A different version byte raises UnsupportedVersion (a CorruptSnapshot) naming it."""
    data = bytearray(sample().to_bytes())
    data[VERSION_OFFSET] = version
    with pytest.raises(errors.UnsupportedVersion) as info:
        RangeSet.from_bytes(bytes(data))
    assert isinstance(info.value, errors.CorruptSnapshot)
    assert_names(info.value, version)
    with pytest.raises(errors.UnsupportedVersion):
        RangeSet.from_bytes(reseal(bytes(data[:-CRC_LEN])))


def test_resealed_garbage_is_corrupt() -> None:
    """Structurally bad payloads with a valid checksum still raise CorruptSnapshot."""
    data = sample().to_bytes()
    payload = data[:-CRC_LEN]
    header = payload[:HEADER_LEN]
    bad_payloads = [
        payload[:FLAGS_OFFSET] + b"\x80" + payload[FLAGS_OFFSET + 1 :],  # unknown flag
        header[:COUNT_OFFSET] + struct.pack("<I", 4) + payload[HEADER_LEN:],  # count too big
        header[:COUNT_OFFSET] + struct.pack("<I", 2) + payload[HEADER_LEN:],  # trailing bytes
        header[:COUNT_OFFSET] + struct.pack("<I", 2**32 - 1) + payload[HEADER_LEN:],
        header + struct.pack("<qI", -5, 0),  # negative ledger id
        header[:COUNT_OFFSET] + struct.pack("<I", 1) + struct.pack("<qI", 1, 2**32 - 1),
        header[:COUNT_OFFSET] + struct.pack("<I", 1) + struct.pack("<qI", 1, 0),  # empty, no quirks
        header[:COUNT_OFFSET] + struct.pack("<I", 1) + struct.pack("<qI", 1, 8) + b"\xff" * 8,
        payload[: HEADER_LEN + 12] + b"\x00" * (len(payload) - HEADER_LEN - 12),
    ]
    records = RangeSet()
    records.add(2, 1)
    records.add(1, 1)
    two = records.to_bytes()[:-CRC_LEN]
    first, second = two[HEADER_LEN : (len(two) + HEADER_LEN) // 2], two[(len(two) + HEADER_LEN) // 2 :]
    bad_payloads.append(two[:HEADER_LEN] + second + first)  # ledgers out of order
    bad_payloads.append(two[:HEADER_LEN] + first + first)  # duplicate ledger
    for bad in bad_payloads:
        with pytest.raises(errors.CorruptSnapshot):
            RangeSet.from_bytes(reseal(bad))


@pytest.mark.parametrize("data", [b"", b"CKRS", b"\x00" * 64, "CKRS", None, 12])
def test_garbage_snapshots(data: Any) -> None:
    """Garbage bytes raise CorruptSnapshot; non-bytes raise InvalidInputType."""
    expected = errors.CorruptSnapshot if isinstance(data, bytes) else errors.InvalidInputType
    with pytest.raises(expected):
        RangeSet.from_bytes(data)


def test_bad_long_list_maps() -> None:
    """from_long_list_map validates ledger ids and word types."""
    with pytest.raises(errors.InvalidPosition):
        RangeSet.from_long_list_map({-1: [1]})
    with pytest.raises(errors.InvalidInputType):
        RangeSet.from_long_list_map({1: np.array([1.0])})
    with pytest.raises(errors.InvalidInputType):
        RangeSet.from_long_list_map({"1": [1]})
    with pytest.raises(errors.InvalidInputType):
        RangeSet.from_long_list_map({1: [1, None]})
    with pytest.raises((errors.InvalidArgument, errors.InvalidPosition)):
        RangeSet.from_long_list_map({1: [2**64]})


def test_ledger_to_bytes_validation() -> None:
    """ledger_to_bytes validates the id and returns None for an absent ledger."""
    rs = sample()
    assert rs.ledger_to_bytes(99) is None
    with pytest.raises(errors.InvalidPosition):
        rs.ledger_to_bytes(-1)
    with pytest.raises(errors.InvalidInputType):
        rs.ledger_to_bytes("1")


# -- no panic reaches Python --------------------------------------------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)
ANY_INT = st.one_of(
    INT64,
    st.integers(-1, 300),
    st.sampled_from([-(2**63) - 1, 2**63, 2**64, 2**32 - 1, 2**32, 2**31 - 1, -2, -1, 0]),
)


def guarded(call: Callable[..., Any], *args: Any) -> None:
    """Run call(*args); only CursorkitError subclasses may escape (a PanicException is a failure)."""
    try:
        call(*args)
    except BaseException as exc:  # PanicException derives from BaseException
        if not isinstance(exc, errors.CursorkitError):
            pytest.fail(f"{call.__name__}{args!r}: {type(exc).__module__}.{type(exc).__name__}: {exc!r}")


@given(
    quirks=st.booleans(),
    args=st.lists(st.tuples(ANY_INT, ANY_INT, ANY_INT, ANY_INT), min_size=1, max_size=5),
    sizes=st.none() | st.dictionaries(ANY_INT, ANY_INT, max_size=3),
    limit=st.none() | ANY_INT,
)
def test_no_panic_on_any_int64(
    quirks: bool,
    args: list[tuple[int, int, int, int]],
    sizes: dict[int, int] | None,
    limit: int | None,
) -> None:
    """Every method given arbitrary (even out-of-range) ints raises only CursorkitError."""
    rs = RangeSet(pulsar_quirks=quirks)
    rs.add_open_closed(0, -1, 0, 10)
    rs.add_open_closed(2**63 - 1, 5, 2**63 - 1, 100)
    rs.add(2**63 - 1, 2**32 - 1)
    for a, b, c, d in args:
        guarded(rs.add, a, b)
        guarded(rs.remove, c, d)
        guarded(rs.contains, a, b)
        guarded(rs.range_containing, a, b)
        guarded(rs.add_many, [a, c], [b, d])
        guarded(rs.add_many, np.array([a, c], dtype=object), np.array([b, d], dtype=object))
        guarded(rs.contains_many, [a, c], [b, d])
        guarded(rs.add_open_closed, a, b, c, d)
        guarded(rs.add_open_closed, a, b, c, d, sizes)
        guarded(rs.add_ranges, [[a, b, c, d]], sizes)
        guarded(rs.cardinality, a, b, c, d)
        guarded(rs.remove_open_closed, a, b, c, d)
        guarded(rs.ledger_to_bytes, a)
        guarded(rs.ranges_array, limit)
        guarded(rs.to_message_ranges, limit)
        guarded(rs.message_range_wire_size, limit)
        guarded(RangeSet.from_long_list_map, {a: [b, c, d]}, quirks)
        guarded(Position, a, b)
        guarded(rs.remove_at_most, a % 8 if a >= 0 else a, b)
    if max(rs.ranges_array()[:, 3].tolist(), default=0) < 1 << 16:
        guarded(rs.to_long_list_map, limit)
        guarded(rs.long_list_map_wire_size, limit)
    for method in (rs.span, rs.first_range, rs.last_range, rs.ranges, rs.compact, rs.__len__, rs.__str__):
        guarded(method)
    guarded(RangeSet.from_bytes, rs.to_bytes())


@given(data=st.binary(max_size=200))
def test_no_panic_on_random_bytes(data: bytes) -> None:
    """from_bytes on random bytes (with and without a valid header and CRC) never panics."""
    guarded(RangeSet.from_bytes, data)
    guarded(RangeSet.from_bytes, b"CKRS\x01" + data)
    guarded(RangeSet.from_bytes, reseal(b"CKRS\x01" + data))
    guarded(RangeSet.from_bytes, reseal(b"CKRS\x01\x00" + data))
    guarded(Position.parse, data.decode("latin-1"))


@given(
    position=st.integers(0, 200),
    replacement=st.binary(min_size=1, max_size=8),
    quirks=st.booleans(),
)
def test_no_panic_on_tampered_resealed_snapshots(position: int, replacement: bytes, quirks: bool) -> None:
    """Valid snapshots with bytes overwritten and the CRC fixed decode or raise CorruptSnapshot."""
    rs = RangeSet(pulsar_quirks=quirks)
    rs.add_many([1, 1, 3, 3], [0, 70_000, 5, 2**32 - 1])
    rs.add_open_closed(2, 7, 2, 7)  # an empty ledger record with quirks
    payload = bytearray(rs.to_bytes()[:-CRC_LEN])
    at = min(position, len(payload) - 1)
    payload[at : at + len(replacement)] = replacement
    try:
        RangeSet.from_bytes(reseal(bytes(payload)))
    except BaseException as exc:  # PanicException derives from BaseException
        if not isinstance(exc, errors.CorruptSnapshot):
            pytest.fail(f"{type(exc).__name__} escaped: {exc!r}")


def test_a_long_list_map_past_its_word_budget_is_refused() -> None:
    """A long-list map past its word budget is refused before anything is built.

    One ack far into a ledger needs a word per 64 entries before it; ``max_bytes``, when given,
    bounds the build instead.
    """
    rs = RangeSet()
    rs.add(1, 0)
    rs.add(1, 1 << 20)  # 2**14 + 1 words
    with pytest.raises(errors.BudgetExceeded, match="max_words"):
        rs.to_long_list_map(max_words=1 << 14)
    assert len(rs.to_long_list_map(max_words=(1 << 14) + 1)[1]) == (1 << 14) + 1
    assert rs.to_long_list_map(max_bytes=16, max_words=1) == {}
