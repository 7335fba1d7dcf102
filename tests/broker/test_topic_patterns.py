"""Regex subscriptions' patterns on the broker: Pulsar's domain stripping, RE2's meanings, linear time."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cursorkit.broker.server.topic_patterns import MAX_PATTERN_LENGTH, strip_domain, topic_pattern
from cursorkit.errors import ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

_ATOMS = ["a", "b", "A", "-", "/", ".", "[ab]", "[^a]", "[a-c1]", "[^\\w]", r"\d", r"\w", r"\s", r"\W", "1"]
_ANCHORS = ["^", "$", r"\b", r"\B", r"\A", r"\z"]
"""``\\z`` is RE2's (and Java's) end of text: Python spells it ``\\Z``."""
_QUANTIFIERS = ["*", "+", "?", "*?", "+?", "{2}", "{0,2}", "{1,}", "{1,3}?"]


def _regexes() -> st.SearchStrategy[str]:
    atom = st.sampled_from(_ATOMS) | st.sampled_from(_ANCHORS)

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map("|".join),
            inner.map(lambda p: f"({p})"),
            inner.map(lambda p: f"(?:{p})"),
            inner.map(lambda p: f"(?i:{p})"),
            st.tuples(inner.map(lambda p: f"(?:{p})"), st.sampled_from(_QUANTIFIERS)).map("".join),
        )

    body = st.recursive(atom, grow, max_leaves=8)
    return st.tuples(st.sampled_from(["", "(?i)", "(?s)", "(?m)"]), body).map("".join)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # the strategy's long repr
@settings(max_examples=400, deadline=None)
@given(_regexes(), st.lists(st.text(alphabet="aAb1_ -/", max_size=12), min_size=1, max_size=6))
def test_re2_agrees_with_pythons_backtracking_engine(regex: str, names: list[str]) -> None:
    """On names without newlines (where RE2's ``$`` and Python's agree), with ASCII classes."""
    assume("://" not in regex)  # a domain, which Pulsar takes off (or refuses) before matching
    assume(len(regex) <= MAX_PATTERN_LENGTH)  # a longer one is not filtered (its own test)
    pattern = topic_pattern(regex)
    assert pattern is not None, regex
    for name in names:
        if not name and r"\B" in regex:
            continue  # Python before 3.14 never matches \B in an empty string; RE2 and Java do
        expected = re.fullmatch(regex.replace(r"\z", r"\Z"), name, re.ASCII) is not None
        assert pattern.matches(name) is expected, (regex, name)


@pytest.mark.parametrize(
    "regex",
    [r"(a|aa)*b", r"(a*)*b", r"(a|a)*b", r"(.*){1,20}b", r".*.*.*.*.*.*.*.*.*.*b", r"(\w+\s?)*b"],
)
def test_catastrophic_patterns_cost_states_times_characters(regex: str) -> None:
    """Each of these makes a backtracking engine run for hours on 1000 characters; here, milliseconds."""
    pattern = topic_pattern(regex)
    assert pattern is not None
    name = "a" * 1000
    started = time.perf_counter()
    assert not pattern.matches(name)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, (regex, elapsed, pattern.states)
    assert pattern.cost(len(name)) <= 1001 * 400


@pytest.mark.parametrize(
    ("regex", "name", "matches"),
    [
        (".", "\n", False),  # RE2: '.' is anything but a newline
        ("(?s).", "\n", True),
        (r"a$\n", "a\n", False),  # RE2: '$' is the end, not "before a final newline" as in Python
        (r"(?m)a$\nb", "a\nb", True),
        (r"\d", "\u0663", False),  # ASCII classes, as RE2 and Java
        (r"\w", "é", False),
        (r"\s", "\u2003", False),
        (r"\s", "\x0b", False),  # RE2's \s is [\t\n\f\r ]
        (r"caf\bé", "café", True),  # "é" is not a word character: a boundary before it
        ("(?i)CAFÉ", "café", True),
        ("[^a]", "é", True),
        ("x{2,}", "xxxx", True),
        ("x{,2}", "xxx", False),
    ],
)
def test_re2_meanings(regex: str, name: str, matches: bool) -> None:
    pattern = topic_pattern(regex)
    assert pattern is not None
    assert pattern.matches(name) is matches


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ("persistent://public/default/rx-.*", "public/default/rx-.*"),
        ("non-persistent://public/default/rx-.*", "public/default/rx-.*"),
        ("^persistent://public/default/x", "^public/default/x"),
        ("(non-persistent://a/b/c)", "(a/b/c)"),
        ("public/default/rx-.*", "public/default/rx-.*"),
    ],
)
def test_the_domain_is_taken_off_as_pulsar_takes_it(given_: str, expected: str) -> None:
    assert strip_domain(given_) == expected


@pytest.mark.parametrize(
    ("regex", "name", "matches"),
    [(r"\Qa.b\E", "a.b", True), (r"\Qa.b\E", "axb", False), ("(?<name>a)b", "ab", True), (r"x\z", "x", True)],
)
def test_java_syntax_re2_shares_is_filtered(regex: str, name: str, matches: bool) -> None:
    """Quoting, named groups and the end-of-text anchor: Java's syntax, which RE2 (and RE2J) run."""
    pattern = topic_pattern(regex)
    assert pattern is not None and pattern.matches(name) is matches


@pytest.mark.parametrize("bad", ["a(", "[a", "*a", "a{2,1}", "foo://a/b/.*", "persistent://"])
def test_a_pattern_that_does_not_compile_is_metadata_error(bad: str) -> None:
    with pytest.raises(ProtocolError) as e:
        topic_pattern(bad)
    assert e.value.server_error == api.MetadataError


@pytest.mark.parametrize(
    "not_filtered",
    [
        r"(a)\1",  # a back-reference
        "(?=a)a",  # look-around
        "a*+",  # possessive
        "(?>a)",  # atomic
        r"\p{Alpha}+",  # Java syntax Python's parser lacks
        "[a-z&&[^e]]",  # Java's intersection: another set in Python
        "[a[bc]]",  # Java's union
        "(a{40}){60}",  # too many states
        "x" * (MAX_PATTERN_LENGTH + 1),  # Pulsar's subscriptionPatternMaxLength
        "é" * 26 + "\U0001f600" * 13,  # 52 Java chars (surrogate pairs count twice)
    ],
)
def test_what_is_not_linear_or_too_long_is_left_to_the_client(not_filtered: str) -> None:
    """None: the broker answers every topic, unfiltered, and the client filters them itself."""
    assert topic_pattern(not_filtered) is None


@pytest.mark.parametrize(
    "regex", ["(?:(?:(?:){999}){999}){999}", "(?:(?:(?:^){999}){999}){999}", "((a?){99}){99}"]
)
def test_building_the_automaton_is_bounded_too(regex: str) -> None:
    """Nested counts multiply: building stops at MAX_STATES, or copies nothing when a body has no state."""
    started = time.perf_counter()
    topic_pattern(regex)
    assert time.perf_counter() - started < 0.5


def test_match_all_is_every_topic() -> None:
    pattern = topic_pattern("persistent://.*")
    assert pattern is not None and pattern.states == 1
    assert pattern.matches("x\ny")  # Pulsar matches '.*' without a regex: newlines too
