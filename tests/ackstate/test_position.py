"""cursorkit.Position: validation, ordering, hashing, text forms and pickling."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import Position, errors

LEDGERS = st.integers(0, 2**63 - 1)
ENTRIES = st.integers(-1, 2**63 - 1)


def test_fields_str_repr() -> None:
    """Fields are exposed; str is "L:E" and repr "Position(L, E)"."""
    p = Position(3, 5)
    assert p.ledger_id == 3
    assert p.entry_id == 5
    assert str(p) == "3:5"
    assert repr(p) == "Position(3, 5)"
    assert str(Position(7, -1)) == "7:-1"
    assert repr(Position(2**63 - 1, 2**63 - 1)) == f"Position({2**63 - 1}, {2**63 - 1})"


def test_keyword_arguments() -> None:
    """The constructor takes ledger_id and entry_id by keyword too."""
    assert Position(ledger_id=1, entry_id=2) == Position(1, 2)


def test_immutable() -> None:
    """Positions are frozen."""
    p = Position(1, 2)
    with pytest.raises(AttributeError):
        p.ledger_id = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.entry_id = 5  # type: ignore[misc]


def test_extreme_legal_values() -> None:
    """Ledger 0..2^63-1 and entry -1..2^63-1 are legal (entries beyond 2^32 included)."""
    for ledger, entry in [(0, -1), (0, 0), (2**63 - 1, 2**63 - 1), (5, 2**32), (5, 2**32 - 1)]:
        p = Position(ledger, entry)
        assert (p.ledger_id, p.entry_id) == (ledger, entry)


@pytest.mark.parametrize(
    ("ledger", "entry", "named"),
    [
        (-1, 0, -1),
        (-(2**63), 0, -(2**63)),
        (2**63, 0, 2**63),
        (2**64, 0, 2**64),
        (0, -2, -2),
        (0, -(2**63), -(2**63)),
        (0, 2**63, 2**63),
        (0, -(2**70), -(2**70)),
    ],
)
def test_out_of_range_is_invalid_position(ledger: int, entry: int, named: int) -> None:
    """Out-of-range ids raise InvalidPosition (a ValueError and CursorkitError) naming the value."""
    with pytest.raises(errors.InvalidPosition) as info:
        Position(ledger, entry)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, errors.CursorkitError)
    assert str(named) in str(info.value)


@pytest.mark.parametrize("value", [1.0, 2.5, "1", None, b"1", [1], (1,), 1j])
def test_non_integers_are_invalid_input_type(value: Any) -> None:
    """Non-integer ids raise InvalidInputType (a TypeError and CursorkitError)."""
    for args in ((value, 1), (1, value)):
        with pytest.raises(errors.InvalidInputType) as info:
            Position(*args)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, errors.CursorkitError)


def test_ordering() -> None:
    """Ordered by ledger first, then entry."""
    a, b, c, d = Position(1, -1), Position(1, 100), Position(2, -1), Position(2, 0)
    assert a < b < c < d
    assert d > c > b > a
    assert a <= a
    assert a >= a
    assert Position(1, 2**40) < Position(2, 0)
    assert sorted([d, b, c, a]) == [a, b, c, d]
    assert max([a, d, c]) is d


def test_equality_and_hash() -> None:
    """Equal positions are equal and hash alike; other types compare unequal."""
    assert Position(1, 2) == Position(1, 2)
    assert Position(1, 2) != Position(2, 1)
    assert hash(Position(1, 2)) == hash(Position(1, 2))
    assert len({Position(1, 2), Position(1, 2), Position(1, 3)}) == 2
    assert {Position(4, 4): "x"}[Position(4, 4)] == "x"
    assert Position(1, 2) != (1, 2)
    assert Position(1, 2) != "1:2"
    assert Position(1, 2) != None  # noqa: E711
    assert Position(1, 2).__eq__(None) is NotImplemented
    with pytest.raises(TypeError):
        _ = Position(1, 2) < (1, 3)  # type: ignore[operator]


@given(LEDGERS, ENTRIES, LEDGERS, ENTRIES)
def test_order_matches_tuples(l1: int, e1: int, l2: int, e2: int) -> None:
    """Comparison and equality agree with (ledger, entry) tuples; hash agrees with ==."""
    p, q = Position(l1, e1), Position(l2, e2)
    assert (p < q) == ((l1, e1) < (l2, e2))
    assert (p <= q) == ((l1, e1) <= (l2, e2))
    assert (p == q) == ((l1, e1) == (l2, e2))
    assert (p != q) == ((l1, e1) != (l2, e2))
    if p == q:
        assert hash(p) == hash(q)


@given(LEDGERS, ENTRIES)
def test_parse_round_trips_str(ledger: int, entry: int) -> None:
    """Position.parse(str(p)) == p for every legal position; pickling and copies round-trip."""
    p = Position(ledger, entry)
    assert Position.parse(str(p)) == p
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(p, protocol))
        assert back == p
        assert type(back) is Position
    assert copy.copy(p) == p
    assert copy.deepcopy(p) == p


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_every_protocol(protocol: int) -> None:
    """Positions pickle under every protocol, including the old 0 and 1."""
    p = Position(3, -1)
    assert pickle.loads(pickle.dumps(p, protocol)) == p


def test_parse_examples() -> None:
    """Position.parse accepts "L:E" including the -1 open entry."""
    assert Position.parse("3:5") == Position(3, 5)
    assert Position.parse("7:-1") == Position(7, -1)
    assert Position.parse("0:0") == Position(0, 0)
    assert Position.parse(f"{2**63 - 1}:{2**63 - 1}") == Position(2**63 - 1, 2**63 - 1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":",
        "3",
        "3:",
        ":5",
        "a:b",
        "3:b",
        "3:5:7",
        "3.0:5",
        "3:5.5",
        "-1:5",
        "3:-2",
        f"{2**63}:0",
        f"0:{2**63}",
        "3;5",
        "3 5",
        "0x3:5",
    ],
)
def test_parse_rejects_bad_text(text: str) -> None:
    """Malformed or out-of-range text raises InvalidPosition naming the text."""
    with pytest.raises(errors.InvalidPosition) as info:
        Position.parse(text)
    assert isinstance(info.value, ValueError)
    named = {"-1:5": "-1", "3:-2": "-2"}.get(text, text)
    assert named in str(info.value)


@pytest.mark.parametrize("value", [None, 35, b"3:5"])
def test_parse_rejects_non_strings(value: Any) -> None:
    """Position.parse of a non-string raises InvalidInputType."""
    with pytest.raises(errors.InvalidInputType):
        Position.parse(value)
