"""Sticky-key hashing (issue 5 §1): Pulsar's vectors, a pure-Python Murmur3 reference, bulk inputs."""

from __future__ import annotations

import base64
import importlib
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorkit import _core, errors
from cursorkit.keyshared.hashing import (
    DEFAULT_RANGE_SIZE,
    NONE_KEY,
    hash_many,
    slot,
    slots,
    sticky_key,
    sticky_key_hash,
)

# Research §0: key -> (m & 0x7fffffff, consistent-hashing slot, auto-split slot).
VECTORS = {
    "0": (1383186559, 4850, 49279),
    "1": (337030291, 49322, 44179),
    "2": (19522071, 58177, 57879),
    "8": (1032978455, 15786, 23),
    "9": (613148321, 2862, 59041),
    "key1": (462881061, 7357, 293),
    "key2": (1936800180, 44326, 14772),
    "NONE_KEY": (504741539, 56505, 48803),
    "testKey": (269048979, 27805, 23699),
    "a": (1009084850, 42456, 27058),
}

# SMHasher's verification inputs and other published Murmur3 x86_32 vectors: (data, seed, hash).
MURMUR3_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\0\0\0\0", 0, 0x2362F9DE),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"!Ce\x87", 0, 0xF55B516B),
    (b"!Ce\x87", 0x5082EDEE, 0x2362F9DE),
    (b"!Ce", 0, 0x7E4A8634),
    (b"!C", 0, 0xA0F7B07A),
    (b"!", 0, 0x72661CF4),
    (b"\0\0\0", 0, 0x85F0B427),
    (b"hello", 0, 0x248BFA47),
    (b"Hello, world!", 1234, 0xFAF6CDB3),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]

M32 = 0xFFFFFFFF


def murmur3_reference(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86_32 in plain Python, written from Appleby's reference (the test's model)."""

    def mix(k: int) -> int:
        k = (k * 0xCC9E2D51) & M32
        k = ((k << 15) | (k >> 17)) & M32
        return (k * 0x1B873593) & M32

    h = seed & M32
    full = len(data) - len(data) % 4
    for i in range(0, full, 4):
        h ^= mix(int.from_bytes(data[i : i + 4], "little"))
        h = ((h << 13) | (h >> 19)) & M32
        h = (h * 5 + 0xE6546B64) & M32
    if len(data) > full:
        h ^= mix(int.from_bytes(data[full:], "little"))
    h ^= len(data) & M32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def _mmh3() -> Any:
    """The ``mmh3`` package when installed (an extra, independent oracle); it is not a dependency."""
    try:
        return importlib.import_module("mmh3")
    except ImportError:
        return None


MMH3 = _mmh3()


def slot_model(h: int, kind: str, range_size: int) -> int:
    """Pulsar 4.0's makeStickyKeyHash: ``h % size + start``, 0 -> 1."""
    if kind == "consistent":
        return h % (range_size - 1) + 1
    return h % range_size or 1


# ---------------------------------------------------------------------------------------- vectors


def test_constants() -> None:
    assert DEFAULT_RANGE_SIZE == 2 << 15
    assert NONE_KEY == b"NONE_KEY"


@pytest.mark.parametrize("key", sorted(VECTORS))
def test_research_vectors(key: str) -> None:
    hash_, ch_slot, auto_slot = VECTORS[key]
    assert sticky_key_hash(key) == hash_
    assert sticky_key_hash(key.encode()) == hash_
    assert sticky_key_hash(bytearray(key.encode())) == hash_
    assert sticky_key_hash(memoryview(key.encode())) == hash_
    assert slot(hash_, "consistent") == ch_slot
    assert slot(hash_, "range") == auto_slot
    assert _core.slot_for(hash_, "range") == auto_slot
    assert _core.slot_for(hash_, "consistent", None) == ch_slot


def test_research_vectors_in_bulk() -> None:
    keys = list(VECTORS)
    hashes = hash_many(keys)
    assert hashes.dtype == np.uint32
    assert hashes.tolist() == [v[0] for v in VECTORS.values()]
    assert slots(hashes, "consistent").tolist() == [v[1] for v in VECTORS.values()]
    assert slots(hashes, "range").tolist() == [v[2] for v in VECTORS.values()]
    assert slots(hashes.astype(np.int64), "range").tolist() == [v[2] for v in VECTORS.values()]


@pytest.mark.parametrize(("data", "seed", "expected"), MURMUR3_VECTORS)
def test_reference_model_reproduces_published_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_reference(data, seed) == expected
    if seed == 0:
        assert sticky_key_hash(data) == expected & 0x7FFFFFFF


@settings(max_examples=400)
@given(st.binary(max_size=80))
def test_murmur3_matches_the_reference(data: bytes) -> None:
    expected = murmur3_reference(data) & 0x7FFFFFFF
    assert sticky_key_hash(data) == expected
    if MMH3 is not None:
        assert MMH3.hash(data, 0, signed=False) & 0x7FFFFFFF == expected


@given(st.text(max_size=40))
def test_str_is_hashed_as_utf8(text: str) -> None:
    assert sticky_key_hash(text) == murmur3_reference(text.encode()) & 0x7FFFFFFF


# ------------------------------------------------------------------------------------------- slots


def test_slot_edges() -> None:
    assert slot(0, "range") == 1  # STICKY_KEY_HASH_NOT_SET becomes 1
    assert slot(65536, "range") == 1
    assert slot(65535, "range") == 65535
    assert slot(0, "consistent") == 1
    assert slot(65534, "consistent") == 65535
    assert slot(65535, "consistent") == 1
    assert slot(2**31 - 1, "consistent") == (2**31 - 1) % 65535 + 1
    assert slot(12345, "range", range_size=1) == 1
    assert slot(25, "consistent", range_size=11) == 6
    assert slot(np.uint32(65537), "range") == 1


@given(
    st.lists(st.integers(0, 2**31 - 1), max_size=50),
    st.sampled_from(["consistent", "range"]),
    st.integers(2, 2**31 - 1) | st.sampled_from([2, 16, 65536, 2**31 - 1]),
)
def test_slots_match_the_model(hashes: list[int], kind: Any, range_size: int) -> None:
    expected = [slot_model(h, kind, range_size) for h in hashes]
    assert [slot(h, kind, range_size) for h in hashes] == expected
    for column in (hashes, np.array(hashes, dtype=np.uint32), np.array(hashes, dtype=np.int64)):
        out = slots(column, kind, range_size)
        assert out.dtype == np.uint32
        assert out.tolist() == expected


def test_slots_of_strided_and_arrow_columns() -> None:
    hashes = hash_many([str(i) for i in range(100)])
    strided = hashes[::3]
    assert not strided.flags.c_contiguous
    assert slots(strided, "range").tolist() == [slot(int(h), "range") for h in strided]
    arrow = pa.array(hashes)
    assert slots(arrow, "consistent").tolist() == [slot(int(h), "consistent") for h in hashes]
    assert slots([], "range").tolist() == []


# ------------------------------------------------------------------------------------- bulk inputs

ARROW_TYPES = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()]


def _keys_for(arrow_type: pa.DataType) -> st.SearchStrategy[list[Any]]:
    item: st.SearchStrategy[Any] = (
        st.binary(max_size=40) if arrow_type in (pa.binary(), pa.large_binary()) else st.text(max_size=20)
    )
    return st.lists(item, max_size=60)


def _expected(keys: list[Any]) -> list[int]:
    return [murmur3_reference(k.encode() if isinstance(k, str) else k) & 0x7FFFFFFF for k in keys]


@given(st.lists(st.binary(max_size=40) | st.text(max_size=20), max_size=60))
def test_hash_many_of_python_sequences(keys: list[Any]) -> None:
    expected = _expected(keys)
    assert hash_many(keys).tolist() == expected
    assert hash_many(tuple(keys)).tolist() == expected
    assert hash_many(np.array(keys, dtype=object)).tolist() == expected
    assert [sticky_key_hash(k) for k in keys] == expected


@given(st.data(), st.sampled_from(ARROW_TYPES))
def test_hash_many_of_arrow_arrays_slices_and_chunks(data: st.DataObject, arrow_type: pa.DataType) -> None:
    keys = data.draw(_keys_for(arrow_type))
    expected = _expected(keys)
    arr = pa.array(keys, type=arrow_type)
    assert hash_many(arr).tolist() == expected
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.integers(start, len(keys)))
    sliced = arr.slice(start, stop - start)
    assert hash_many(sliced).tolist() == expected[start:stop]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(keys)), max_size=4)))
    bounds = [0, *cuts, len(keys)]
    chunks = [arr.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]
    chunked = pa.chunked_array(chunks, type=arrow_type)
    assert hash_many(chunked).tolist() == expected


def _as_layout(keys: list[Any], layout: str) -> pa.Array:
    """``keys`` (bytes) as an Arrow array of one of the other binary-like layouts."""
    if layout == "fixed_size_binary":
        width = len(keys[0]) if keys else 3
        return pa.array(keys, type=pa.binary(width))
    if layout == "binary_view":
        return pa.array(keys, type=pa.binary_view())
    if layout == "string_view":
        return pa.array([k.decode() for k in keys], type=pa.string_view())
    index = {"dict8": pa.int8(), "dict16": pa.uint16(), "dict32": pa.int32(), "dict64": pa.int64()}[layout]
    values = pa.array(keys, type=pa.binary() if layout != "dict16" else pa.large_string())
    if layout == "dict16":
        values = pa.array([k.decode() for k in keys], type=pa.large_string())
    encoded = values.dictionary_encode()
    return pa.DictionaryArray.from_arrays(encoded.indices.cast(index), encoded.dictionary)


OTHER_LAYOUTS = ["fixed_size_binary", "binary_view", "string_view", "dict8", "dict16", "dict32", "dict64"]


@given(st.data(), st.sampled_from(OTHER_LAYOUTS))
def test_hash_many_of_every_binary_like_arrow_layout(data: st.DataObject, layout: str) -> None:
    """Every other binary-like layout hashes like the same keys given as bytes.

    Fixed-size binary, binary/string views (inline and out-of-line) and dictionaries of any index
    width; sliced and chunked too.
    """
    if layout == "fixed_size_binary":
        width = data.draw(st.integers(0, 20))
        keys = data.draw(st.lists(st.binary(min_size=width, max_size=width), max_size=40))
    else:
        text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", max_size=30)
        keys = [t.encode() for t in data.draw(st.lists(text, max_size=40))]
    arr = _as_layout(keys, layout)
    expected = _expected(keys)
    assert hash_many(arr).tolist() == expected
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.integers(start, len(keys)))
    assert hash_many(arr.slice(start, stop - start)).tolist() == expected[start:stop]
    cut = data.draw(st.integers(0, len(keys)))
    chunked = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=arr.type)
    assert hash_many(chunked).tolist() == expected
    assert hash_many(StreamOnly(chunked)).tolist() == expected


def test_hash_many_of_layouts_is_pulsars_hash() -> None:
    keys = list(VECTORS)
    expected = [v[0] for v in VECTORS.values()]
    assert hash_many(pa.array(keys, type=pa.string_view())).tolist() == expected
    assert hash_many(pa.array(keys).dictionary_encode()).tolist() == expected
    long_keys = [k * 5 for k in keys]  # beyond 12 bytes: views point into data buffers
    assert hash_many(pa.array(long_keys, type=pa.binary_view())).tolist() == _expected(
        [k.encode() for k in long_keys]
    )


def test_hash_many_of_layouts_refuses_nulls_and_bad_indices() -> None:
    with pytest.raises(errors.InvalidArgument, match="key 1 is null"):
        hash_many(pa.array(["a", None, "b"]).dictionary_encode())
    with pytest.raises(errors.InvalidArgument, match="key 2 is null"):
        hash_many(pa.array([b"ab", b"cd", None], type=pa.binary(2)))
    with pytest.raises(errors.InvalidArgument, match="key 0 is null"):
        hash_many(pa.array([None, "x"], type=pa.string_view()))
    nulls_inside = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["a", None]))
    with pytest.raises(errors.InvalidArgument, match="the dictionary of the keys: key 1 is null"):
        hash_many(nulls_inside)
    out_of_range = pa.DictionaryArray.from_arrays(
        pa.array([0, 5], pa.int32()), pa.array(["a", "b"]), safe=False
    )
    with pytest.raises(errors.InvalidArgument, match="index 1 is outside the dictionary of 2 keys"):
        hash_many(out_of_range)


def test_hash_many_of_numpy_fixed_width_arrays() -> None:
    assert hash_many(np.array([b"0", b"key1"])).tolist() == [1383186559, 462881061]
    assert hash_many(np.array(["0", "key1"])).tolist() == [1383186559, 462881061]


class ArrayOnly:
    """An Arrow producer other than pyarrow's own classes: only ``__arrow_c_array__``."""

    def __init__(self, arr: pa.Array) -> None:
        self.arr = arr

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self.arr.__arrow_c_array__(requested_schema)


class StreamOnly:
    """An Arrow producer exporting only ``__arrow_c_stream__``."""

    def __init__(self, arr: pa.ChunkedArray) -> None:
        self.arr = arr

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.arr.__arrow_c_stream__(requested_schema)


def test_hash_many_reads_the_arrow_pycapsule_protocol() -> None:
    keys = list(VECTORS)
    expected = [v[0] for v in VECTORS.values()]
    arr = pa.array(keys, type=pa.large_string())
    assert hash_many(ArrayOnly(arr.slice(2, 5))).tolist() == expected[2:7]
    chunked = pa.chunked_array([arr.slice(0, 3), arr.slice(3, 0), arr.slice(3)])
    assert hash_many(StreamOnly(chunked)).tolist() == expected
    assert hash_many(StreamOnly(pa.chunked_array([], type=pa.binary()))).tolist() == []


def test_hash_many_of_empty_inputs() -> None:
    for empty in ([], (), np.array([], dtype=object), pa.array([], pa.binary()), pa.array(["a"]).slice(1)):
        out = hash_many(empty)
        assert out.dtype == np.uint32
        assert out.shape == (0,)
    assert hash_many([b""]).tolist() == [0]
    assert hash_many(pa.array([b"", b""])).tolist() == [0, 0]


def test_hash_many_from_threads_agrees() -> None:
    keys = pa.array([f"key-{i}" for i in range(50_000)])
    expected = hash_many(keys.to_pylist())
    results: list[np.ndarray[Any, Any]] = []

    def work() -> None:
        results.extend(hash_many(keys) for _ in range(5))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20
    assert all(np.array_equal(r, expected) for r in results)


# ------------------------------------------------------------------------------------------ nulls


def test_arrow_nulls_name_the_index() -> None:
    with pytest.raises(errors.InvalidArgument, match="key 2 is null"):
        hash_many(pa.array([b"a", b"b", None, b"c"]))
    # Index within the slice the caller passed.
    arr = pa.array(["a", None, "b", "c", None, "d"])
    with pytest.raises(errors.InvalidArgument, match="key 2 is null"):
        hash_many(arr.slice(2))
    assert hash_many(arr.slice(2, 2)).tolist() == _expected(["b", "c"])
    # Index across the chunks.
    chunked = pa.chunked_array([pa.array(["x", "y"]), pa.array(["z", None])])
    with pytest.raises(errors.InvalidArgument, match="key 3 is null"):
        hash_many(chunked)
    many = pa.array([*(f"k{i}" for i in range(1000)), None])
    with pytest.raises(errors.InvalidArgument, match="key 1000 is null"):
        hash_many(many)


# -------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [1, 1.5, None, ["a"], object()])
def test_sticky_key_hash_rejects_other_types(bad: Any) -> None:
    with pytest.raises(errors.InvalidInputType, match="key must be bytes or str"):
        sticky_key_hash(bad)


def test_unencodable_str_is_invalid_argument() -> None:
    with pytest.raises(errors.InvalidArgument, match="not valid UTF-8"):
        sticky_key_hash("a\ud800")
    with pytest.raises(errors.InvalidArgument, match="key 1 is a str"):
        hash_many(["ok", "a\ud800"])


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([b"a", 3], "key 1 must be bytes or str, got int"),
        ([None], r"key 0 must be bytes or str, got NoneType \(a message without a key"),
        ((b"a", b"b", 2.0), "key 2 must be bytes or str, got float"),
        (np.array([1, 2]), "key 0 must be bytes or str"),
        (np.array([[b"a"]]), "one-dimensional"),
        (b"abc", "got bytes"),
        ("abc", "got str"),
        (5, "got int"),
        ({b"a": 1}, "got dict"),
        (pa.array([1, 2]), 'Arrow format "l"'),
        (pa.array([1, 2]).dictionary_encode(), "dictionary-encoded"),
        (pa.record_batch([pa.array(["a"])], names=["k"]), r'Arrow format "\+s"'),
        (pa.chunked_array([pa.array([1.5])]), 'Arrow format "g"'),
    ],
)
def test_hash_many_rejects_bad_keys(bad: Any, match: str) -> None:
    with pytest.raises(errors.InvalidInputType, match=match):
        hash_many(bad)


@pytest.mark.parametrize(
    ("hash_", "error", "match"),
    [
        (-1, errors.InvalidArgument, r"hash must be in \[0, 2147483647\], got -1"),
        (2**31, errors.InvalidArgument, "hash must be in"),
        (2**70, errors.InvalidArgument, "hash must be in"),
        ("1", errors.InvalidInputType, "hash must be an int, got str"),
        (1.0, errors.InvalidInputType, "hash must be an int, got float"),
        (True, errors.InvalidInputType, "got bool"),
        (None, errors.InvalidInputType, "got NoneType"),
    ],
)
def test_slot_rejects_bad_hashes(hash_: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        slot(hash_, "range")


@pytest.mark.parametrize(
    ("kind", "range_size", "error", "match"),
    [
        ("sticky", 65536, errors.InvalidArgument, '"consistent" or "range", got "sticky"'),
        (3, 65536, errors.InvalidInputType, "selector_kind must be a str"),
        ("range", 0, errors.InvalidArgument, r"range_size must be in \[1, 2147483647\]"),
        ("range", 2**31, errors.InvalidArgument, "range_size must be in"),
        ("range", -(2**70), errors.InvalidArgument, "range_size must be in"),
        ("consistent", 1, errors.InvalidArgument, r"consistent slot function must be in \[2,"),
        ("range", 2.5, errors.InvalidInputType, "range_size must be an int"),
        ("range", False, errors.InvalidInputType, "range_size must be an int, got bool"),
    ],
)
def test_slot_functions_reject_bad_kinds_and_sizes(
    kind: Any, range_size: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        slot(1, kind, range_size)
    with pytest.raises(error, match=match):
        slots([1], kind, range_size)


@pytest.mark.parametrize(
    ("hashes", "error", "match"),
    [
        ([1, -1], errors.InvalidArgument, r"hash -1 at index 1 is not a sticky-key hash"),
        (np.array([0, 2**31], dtype=np.uint32), errors.InvalidArgument, "index 1"),
        (np.array([5, 2**40], dtype=np.int64), errors.InvalidArgument, "index 1"),
        (np.array([1.0]), errors.InvalidInputType, "must hold integers"),
        (np.zeros((2, 2), dtype=np.uint32), errors.InvalidInputType, "one-dimensional"),
        (["a"], errors.InvalidInputType, "hashes must be an int"),
    ],
)
def test_slots_rejects_bad_hashes(hashes: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        slots(hashes, "range")


# ---------------------------------------------------------------------------------- sticky_key()


def test_sticky_key_resolution_order() -> None:
    full = {
        "ordering_key": b"ok",
        "partition_key": "pk",
        "producer_name": "prod",
        "sequence_id": 7,
    }
    assert sticky_key(**full) == b"ok"
    assert sticky_key(**{**full, "ordering_key": b""}) == b""
    assert sticky_key(**{**full, "ordering_key": None}) == b"pk"
    no_keys = {"producer_name": "prod", "sequence_id": 7}
    assert sticky_key(**no_keys) == b"prod-7"
    assert sticky_key(partition_key="") == b""
    assert sticky_key(partition_key="ключ") == "ключ".encode()
    assert sticky_key(producer_name="prod") == NONE_KEY  # Pulsar needs both fields
    assert sticky_key(sequence_id=7) == NONE_KEY
    assert sticky_key() == NONE_KEY
    assert sticky_key_hash(sticky_key()) == VECTORS["NONE_KEY"][0]


def test_sticky_key_producer_fallback_prints_java_longs() -> None:
    assert sticky_key(producer_name="p", sequence_id=0) == b"p-0"
    assert sticky_key(producer_name="p", sequence_id=-5) == b"p--5"
    assert sticky_key(producer_name="p", sequence_id=2**63 - 1) == f"p-{2**63 - 1}".encode()
    assert sticky_key(producer_name="p", sequence_id=2**64 - 1) == b"p--1"  # uint64 read as a long
    assert sticky_key(producer_name="p", sequence_id=np.int64(3)) == b"p-3"
    assert sticky_key(producer_name="生产者", sequence_id=1) == "生产者-1".encode()


@pytest.mark.parametrize(
    ("text", "decoded"),
    [
        ("", b""),
        ("QQ==", b"A"),
        ("QQ", b"A"),  # Java's decoder does not require padding
        ("QUI=", b"AB"),
        ("QUI", b"AB"),
        ("QUJD", b"ABC"),
        ("a2V5MQ==", b"key1"),
        ("+/+/", b"\xfb\xff\xbf"),
    ],
)
def test_sticky_key_decodes_base64_like_java(text: str, decoded: bytes) -> None:
    assert sticky_key(partition_key=text, partition_key_b64_encoded=True) == decoded
    assert sticky_key(partition_key=text) == text.encode()


@pytest.mark.parametrize("text", ["Q", "QQ=", "QQ===", "QUJD=", "QQ==QQ==", "Q Q=", "QQ\n", "a-_b", "é"])
def test_sticky_key_rejects_bad_base64(text: str) -> None:
    with pytest.raises(errors.InvalidArgument, match="not Base64"):
        sticky_key(partition_key=text, partition_key_b64_encoded=True)


@given(st.binary(max_size=64), st.booleans())
def test_sticky_key_base64_round_trip(data: bytes, strip_padding: bool) -> None:
    text = base64.b64encode(data).decode()
    if strip_padding:
        text = text.rstrip("=")
    assert sticky_key(partition_key=text, partition_key_b64_encoded=True) == data
    assert sticky_key(ordering_key=data, partition_key=text, partition_key_b64_encoded=True) == data


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"ordering_key": "text"}, errors.InvalidInputType, "ordering_key must be bytes"),
        ({"partition_key": b"pk"}, errors.InvalidInputType, "partition_key must be a str"),
        ({"producer_name": 1, "sequence_id": 1}, errors.InvalidInputType, "producer_name must be a str"),
        ({"producer_name": "p", "sequence_id": "1"}, errors.InvalidInputType, "sequence_id must be an int"),
        ({"producer_name": "p", "sequence_id": True}, errors.InvalidInputType, "sequence_id must be an int"),
        ({"partition_key_b64_encoded": 1}, errors.InvalidInputType, "must be a bool"),
        ({"producer_name": "p", "sequence_id": 2**64}, errors.InvalidArgument, "64-bit"),
        ({"producer_name": "p", "sequence_id": -(2**63) - 1}, errors.InvalidArgument, "64-bit"),
        ({"partition_key": "a\ud800"}, errors.InvalidArgument, "partition_key is not valid Unicode"),
        ({"producer_name": "a\ud800", "sequence_id": 1}, errors.InvalidArgument, "not valid Unicode"),
    ],
)
def test_sticky_key_rejects_bad_fields(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        sticky_key(**kwargs)
