"""The protobuf contract: generated modules are current, and RangeSet's wire sizes are real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cursorkit import RangeSet
from cursorkit.proto import pulsar_ml_pb2 as ml

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "python" / "cursorkit" / "proto"


def test_generated_modules_are_current(tmp_path: Path) -> None:
    """Regenerating every .proto reproduces the checked-in *_pb2.py and *_pb2.pyi byte for byte."""
    sources = sorted(PROTO_DIR.glob("*.proto"))
    assert sources
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{REPO / 'python'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            *map(str, sources),
        ],
        check=True,
    )
    for source in sources:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            name = source.stem + suffix
            fresh = (tmp_path / "cursorkit" / "proto" / name).read_bytes()
            assert (PROTO_DIR / name).read_bytes() == fresh, f"{name} is stale: run `make proto`"


def _sample() -> RangeSet:
    rs = RangeSet()
    odd = np.arange(1, 3000, 2, dtype=np.int64)
    rs.add_many(np.full_like(odd, 3_000_000), odd)
    rs.add_open_closed(7, -1, 7, 9)  # a range from entry 0: lower bound -1 (a 10-byte varint)
    rs.add_many([9, 9, 9], [0, 63, 64])  # a negative BitSet word (bit 63 set)
    return rs


@pytest.mark.parametrize("max_ranges", [None, 0, 1, 700])
def test_message_range_wire_size_matches_protobuf(max_ranges: int | None) -> None:
    """message_range_wire_size() is the exact size of PositionInfo field 3 as protobuf encodes it."""
    rs = _sample()
    info = ml.PositionInfo(ledgerId=1, entryId=2)
    base = info.ByteSize()
    for lk, lv, uk, uv in rs.to_message_ranges(max_ranges).tolist():
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lk, lv
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = uk, uv
    assert info.ByteSize() - base == rs.message_range_wire_size(max_ranges)


@pytest.mark.parametrize("max_entries", [None, 3, 1500])
def test_long_list_map_round_trips_through_protobuf(max_entries: int | None) -> None:
    """LongListMap words survive a protobuf round trip and their wire size is exact."""
    rs = _sample()
    info = ml.PositionInfo(ledgerId=1, entryId=2)
    base = info.ByteSize()
    for key, words in rs.to_long_list_map(max_entries).items():
        info.individualDeletedMessageRanges.add(key=key, values=words.tolist())
    assert info.ByteSize() - base == rs.long_list_map_wire_size(max_entries)
    decoded = ml.PositionInfo.FromString(info.SerializeToString())
    back = RangeSet.from_long_list_map(
        {m.key: list(m.values) for m in decoded.individualDeletedMessageRanges}
    )
    if max_entries is None:
        assert back == rs
    else:
        assert back.total_cardinality() <= max_entries


def test_rust_field_bytes_are_what_protobuf_writes() -> None:
    """The Rust fast path for fields 3 and 6 is byte-identical to protobuf's own serialisation."""
    rs = _sample()
    info = ml.PositionInfo()
    for lk, lv, uk, uv in rs.to_message_ranges().tolist():
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lk, lv
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = uk, uv
    assert rs.message_range_field_bytes() == info.SerializePartialToString()
    assert rs.message_range_field_bytes(7) == info.SerializePartialToString()[: rs.message_range_wire_size(7)]
    info = ml.PositionInfo()
    for key, words in rs.to_long_list_map().items():
        info.individualDeletedMessageRanges.add(key=key, values=words.tolist())
    assert rs.long_list_map_field_bytes() == info.SerializePartialToString()
    head = ml.PositionInfo(ledgerId=1, entryId=2).SerializeToString()
    back = ml.PositionInfo.FromString(head + rs.long_list_map_field_bytes() + rs.message_range_field_bytes())
    assert len(back.individualDeletedMessages) == len(rs)


def test_range_field_bytes_as_managed_cursor_info_field_4() -> None:
    """``field=4`` writes what protobuf writes for ManagedCursorInfo's ranges; other tags are refused."""
    from cursorkit.errors import InvalidArgument, InvalidInputType

    rs = _sample()
    info = ml.ManagedCursorInfo()
    for lk, lv, uk, uv in rs.to_message_ranges().tolist():
        r = info.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lk, lv
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = uk, uv
    assert rs.message_range_field_bytes(None, 4) == info.SerializePartialToString()
    for bad in (0, 16, -1, 1 << 40):
        with pytest.raises(InvalidArgument, match="1..15"):
            rs.message_range_field_bytes(None, bad)
    with pytest.raises(InvalidInputType):
        rs.message_range_field_bytes(None, True)
