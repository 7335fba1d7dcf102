r"""A regex subscription's pattern, matched on the broker in time linear in each topic name.

Pulsar's broker takes the topic domain off the pattern (``persistent://public/default/rx-.*``
becomes ``public/default/rx-.*``) and matches it against the whole of each topic's name without
domain and partition suffix, with RE2J: a linear-time engine. Here the pattern is parsed by Python's
own parser and run as a Thompson automaton (every state advanced together, one character at a
time), with RE2's meanings: ``\d``, ``\w``, ``\s`` and ``\b`` are ASCII, ``.`` is anything but a
newline, ``$`` is the end of the name. So a pattern costs at most ``states x characters`` per name,
whatever it is: ``(a|aa)*b`` cannot backtrack for hours.

What cannot be run that way (back-references, look-arounds, possessive and atomic forms, Java's
class unions and intersections, Java syntax Python's parser does not know) is not filtered: the
answer lists every topic, marked unfiltered, and the client filters it, as it does when Pulsar's
broker declines a pattern longer than ``subscriptionPatternMaxLength``. A pattern that does not
parse at all is refused (MetadataError, as Pulsar answers a pattern it cannot compile).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from cursorkit.errors import ProtocolError

__all__ = ["MAX_PATTERN_LENGTH", "MAX_STATES", "TopicPattern", "strip_domain", "topic_pattern"]

MAX_PATTERN_LENGTH = 50
"""Pulsar's default ``subscriptionPatternMaxLength``: a longer pattern is not filtered (Java chars)."""
MAX_STATES = 2000
"""States of a pattern's automaton past which it is not filtered (``(a{40}){60}`` and the like)."""

_sre: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
_IGNORECASE, _MULTILINE, _DOTALL = 2, 8, 16
_SPACE = frozenset("\t\n\f\r ")
"""RE2's ``\\s``."""
_ASSERTIONS = frozenset(
    _c.__dict__[n]
    for n in (
        "AT_BEGINNING",
        "AT_BEGINNING_STRING",
        "AT_END",
        "AT_END_STRING",
        "AT_BOUNDARY",
        "AT_NON_BOUNDARY",
    )
)
_JAVA_ONLY_ERRORS = ("bad escape", "unknown extension", "unknown flag", "missing -, : or )", "global flags")
"""Python parse errors of syntax Java has (``\\p{Alpha}``, ``\\Q..\\E``, ``(?<name>..)``, flags mid-way)."""

Test = Callable[[str], bool]


class _NotLinear(Exception):
    """The pattern holds something the automaton cannot run, or is too big: it is not filtered."""


def strip_domain(pattern: str) -> str:
    """The pattern without its topic domain, as Pulsar's broker takes it off.

    ``persistent://`` or ``non-persistent://`` goes, and so does a domain after a prefix (``^``).
    MetadataError for any other text before ``://``, as Pulsar refuses it.
    """
    if "://" not in pattern:
        return pattern
    parts = pattern.split("://")
    while parts and not parts[-1]:  # Java's split drops trailing empty strings
        parts.pop()
    prefix = parts[0] if parts else ""
    for domain in ("non-persistent", "persistent"):
        if prefix.endswith(domain) and len(parts) > 1:
            return prefix[: -len(domain)] + parts[1]
    raise _refused(pattern, f"does not support the topic domain {prefix[:50]!r}")


def _refused(pattern: str, why: str) -> ProtocolError:
    from cursorkit.proto import pulsar_api_pb2 as api

    return ProtocolError(f"topics pattern {pattern[:100]!r}: {why}", server_error=api.MetadataError)


def _java_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _java_classes(pattern: str) -> bool:
    """Whether a character class holds ``[`` or ``&&``: Java's union or intersection, not Python's."""
    in_class = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                return True
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":  # a leading ']' is a member
                i += 1
            continue
        i += 1
    return False


def topic_pattern(pattern: str) -> TopicPattern | None:
    """The pattern a broker filters with; None when it does not filter (too long, not linear).

    ``ProtocolError`` (MetadataError) for a pattern that does not parse.
    """
    if len(pattern) > MAX_PATTERN_LENGTH or _java_length(pattern) > MAX_PATTERN_LENGTH:
        return None
    regex = strip_domain(pattern)
    if regex == ".*":
        return TopicPattern.everything()
    if _java_classes(regex):
        return None
    try:
        parsed = _sre.parse(regex)
    except Exception as e:  # noqa: BLE001 - re.error, or the parser's own limits (recursion)
        if any(str(e).startswith(m) for m in _JAVA_ONLY_ERRORS):
            return None
        raise _refused(pattern, f"does not compile: {e}") from None
    try:
        return TopicPattern(_Builder(MAX_STATES).build(parsed))
    except _NotLinear:
        return None


class _Automaton:
    """States in parallel lists: what each is, its character test, where it goes, its assertion."""

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.test: list[Test | None] = []
        self.out: list[list[int]] = []
        self.at: list[Any] = []
        self.start = 0
        self.match = 0

    def __len__(self) -> int:
        return len(self.kind)


class _Builder:
    """Builds the automaton from the parse tree, back to front (each piece knows what follows it)."""

    def __init__(self, max_states: int) -> None:
        self.a = _Automaton()
        self.max_states = max_states

    def build(self, parsed: Any) -> _Automaton:
        a = self.a
        a.match = self._new(_MATCH)
        a.start = self._seq(parsed.data, int(parsed.state.flags), a.match)
        return a

    def _new(self, kind: int, test: Test | None = None, out: list[int] | None = None, at: Any = None) -> int:
        a = self.a
        if len(a.kind) >= self.max_states:
            raise _NotLinear("too many states")
        a.kind.append(kind)
        a.test.append(test)
        a.out.append(out if out is not None else [])
        a.at.append(at)
        return len(a.kind) - 1

    def _seq(self, items: list[tuple[Any, Any]], flags: int, then: int) -> int:
        for op, av in reversed(items):
            then = self._item(op, av, flags, then)
        return then

    def _item(self, op: Any, av: Any, flags: int, then: int) -> int:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self._new(_CHAR, _test(op, av, flags), [then])
        if op is _c.AT:
            if av not in _ASSERTIONS:
                raise _NotLinear(f"the assertion {av}")
            return self._new(_ASSERT, out=[then], at=(av, flags))
        if op is _c.BRANCH:
            return self._new(_SPLIT, out=[self._seq(alt.data, flags, then) for alt in av[1]])
        if op is _c.SUBPATTERN:
            _group, add, remove, sub = av
            return self._seq(sub.data, (flags | add) & ~remove, then)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):  # greedy or lazy: the same for a whole-name match
            return self._repeat(av, flags, then)
        raise _NotLinear(f"{op} has no linear-time match")

    def _repeat(self, av: Any, flags: int, then: int) -> int:
        low, high, sub = av
        unbounded = high is _c.MAXREPEAT
        if low > self.max_states or (not unbounded and high > self.max_states):
            raise _NotLinear("a repeat count past the states allowed")
        if unbounded:
            loop = self._new(_SPLIT)
            self.a.out[loop] = [self._seq(sub.data, flags, loop), then]
            at = loop
        else:
            at = then
            for _ in range(high - low):
                optional = self._new(_SPLIT)
                self.a.out[optional] = [self._seq(sub.data, flags, at), then]
                at = optional
        for _ in range(low):
            size = len(self.a)
            at = self._seq(sub.data, flags, at)
            if len(self.a) == size:  # a body without states (``(?:)``): more copies add nothing
                break
        return at


def _variants(c: str, flags: int) -> frozenset[str]:
    """``c`` and, ignoring case, its one-character upper and lower forms."""
    if not flags & _IGNORECASE:
        return frozenset(c)
    return frozenset(v for v in (c, c.lower(), c.upper(), c.swapcase()) if len(v) == 1)


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _category(name: str) -> Test:
    tests: dict[str, Test] = {
        "CATEGORY_DIGIT": lambda c: "0" <= c <= "9",
        "CATEGORY_NOT_DIGIT": lambda c: not "0" <= c <= "9",
        "CATEGORY_SPACE": lambda c: c in _SPACE,
        "CATEGORY_NOT_SPACE": lambda c: c not in _SPACE,
        "CATEGORY_WORD": _is_word,
        "CATEGORY_NOT_WORD": lambda c: not _is_word(c),
    }
    found = tests.get(name)
    if found is None:
        raise _NotLinear(f"the class {name}")
    return found


def _test(op: Any, av: Any, flags: int) -> Test:
    """The character test of one atom: a literal, its negation, ``.``, or a class."""
    if op is _c.LITERAL:
        members = _variants(chr(av), flags)
        return members.__contains__
    if op is _c.NOT_LITERAL:
        excluded = _variants(chr(av), flags)
        return lambda c: c not in excluded
    if op is _c.ANY:
        return (lambda c: True) if flags & _DOTALL else (lambda c: c != "\n")
    return _class(av, flags)


def _class(items: list[tuple[Any, Any]], flags: int) -> Test:
    negate = bool(items) and items[0][0] is _c.NEGATE
    literals: set[str] = set()
    ranges: list[tuple[int, int]] = []
    categories: list[Test] = []
    for op, av in items[1:] if negate else items:
        if op is _c.LITERAL:
            literals.add(chr(av))
        elif op is _c.RANGE:
            ranges.append(av)
        elif op is _c.CATEGORY:
            categories.append(_category(str(av)))
        else:
            raise _NotLinear(f"{op} in a class")
    members = frozenset(literals)

    def one(c: str) -> bool:
        if c in members:
            return True
        o = ord(c)
        return any(lo <= o <= hi for lo, hi in ranges) or any(t(c) for t in categories)

    def test(c: str) -> bool:
        found = any(one(v) for v in _variants(c, flags)) if flags & _IGNORECASE else one(c)
        return found != negate

    return test


def _holds(at: Any, flags: int, name: str, pos: int) -> bool:
    """Whether the assertion ``at`` holds between ``name[pos - 1]`` and ``name[pos]``."""
    n = len(name)
    if at is _c.AT_BEGINNING:
        return pos == 0 or (bool(flags & _MULTILINE) and name[pos - 1] == "\n")
    if at is _c.AT_BEGINNING_STRING:
        return pos == 0
    if at is _c.AT_END:
        return pos == n or (bool(flags & _MULTILINE) and name[pos] == "\n")
    if at is _c.AT_END_STRING:
        return pos == n
    before = pos > 0 and _is_word(name[pos - 1])
    after = pos < n and _is_word(name[pos])
    if at is _c.AT_BOUNDARY:
        return before != after
    if at is _c.AT_NON_BOUNDARY:
        return before == after
    raise AssertionError(f"the assertion {at} was let through")


class TopicPattern:
    """A pattern run as an automaton: :meth:`matches` costs at most ``cost(len(name))`` steps."""

    def __init__(self, automaton: _Automaton | None) -> None:
        self._a = automaton

    @classmethod
    def everything(cls) -> TopicPattern:
        """``.*``: every topic (Pulsar matches it without a regex)."""
        return cls(None)

    @property
    def states(self) -> int:
        """The automaton's states (1 for ``.*``)."""
        return 1 if self._a is None else len(self._a)

    def cost(self, length: int) -> int:
        """An upper bound of the steps matching a name of ``length`` characters takes."""
        return self.states * (length + 1)

    def matches(self, name: str) -> bool:
        """Whether the pattern matches all of ``name``."""
        a = self._a
        if a is None:
            return True
        tests, outs = a.test, a.out
        current = self._closure([a.start], name, 0)
        for i, c in enumerate(name):
            following = []
            for s in current:
                test = tests[s]  # None: the final state
                if test is not None and test(c):
                    following.append(outs[s][0])
            if not following:
                return False
            current = self._closure(following, name, i + 1)
        return a.match in current

    def _closure(self, starts: list[int], name: str, pos: int) -> list[int]:
        """The character-consuming and final states reached from ``starts`` without consuming."""
        a = self._a
        assert a is not None
        seen: set[int] = set()
        found: list[int] = []
        stack = list(reversed(starts))
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = a.kind[s]
            if kind == _SPLIT:
                stack.extend(reversed(a.out[s]))
            elif kind == _ASSERT:
                at, flags = a.at[s]
                if _holds(at, flags, name, pos):
                    stack.append(a.out[s][0])
            else:
                found.append(s)
        return found
