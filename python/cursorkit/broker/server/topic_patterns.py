r"""A regex subscription's pattern, matched on the broker in time linear in each topic name.

Pulsar's broker takes the topic domain off the pattern (``persistent://public/default/rx-.*``
becomes ``public/default/rx-.*``) and matches it against the whole of each topic's name without
domain and partition suffix, with RE2J. Here it is RE2 itself (Google's ``google-re2``): the same
syntax and meanings (``\d``, ``\w``, ``\s`` and ``\b`` ASCII, ``.`` anything but a newline, ``$``
the end of the name) and the same guarantee: a match costs time linear in the name, so
``(a|aa)*b`` cannot backtrack for hours, and a pattern's program is bounded in memory.

What RE2 cannot run (back-references, look-arounds, possessive and atomic forms, Java's class
unions and intersections, Java-only syntax) is not filtered: the answer lists every topic, marked
unfiltered, and the client filters it, as it does when Pulsar's broker declines a pattern longer
than ``subscriptionPatternMaxLength``. A pattern no engine parses is refused (MetadataError, as
Pulsar answers a pattern it cannot compile).
"""

from __future__ import annotations

import re

import re2

from cursorkit.errors import ProtocolError

__all__ = ["MAX_PATTERN_LENGTH", "MAX_PROGRAM", "TopicPattern", "strip_domain", "topic_pattern"]

MAX_PATTERN_LENGTH = 50
"""Pulsar's default ``subscriptionPatternMaxLength``: a longer pattern is not filtered (Java chars)."""
MAX_PROGRAM = 2000
"""RE2 program instructions past which a pattern is not filtered (``(a{40}){60}`` and the like)."""
_MAX_MEM = 1 << 20
"""RE2's memory budget for compiling one pattern."""
_JAVA_ONLY_ERRORS = ("bad escape", "unknown extension", "unknown flag", "missing -, : or )", "global flags")
"""Python parse errors of syntax Java has (``\\p{Alpha}``, ``\\Q..\\E``, ``(?<name>..)``, flags mid-way)."""


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # a client's bad pattern is answered, not logged by RE2
    return options


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
        compiled = re2.compile(regex, _options())
    except re2.error:
        try:
            re.compile(regex)
        except re.error as e:
            if any(str(e).startswith(m) for m in _JAVA_ONLY_ERRORS):
                return None
            raise _refused(pattern, f"does not compile: {e}") from None
        except RecursionError:
            raise _refused(pattern, "does not compile: nested too deeply") from None
        return None  # a backtracking engine's syntax: the client filters
    if compiled.programsize > MAX_PROGRAM:
        return None
    return TopicPattern(compiled)


class TopicPattern:
    """A compiled pattern: :meth:`matches` costs at most ``cost(len(name))`` steps."""

    def __init__(self, compiled: re2._Regexp | None) -> None:
        self._re = compiled

    @classmethod
    def everything(cls) -> TopicPattern:
        """``.*``: every topic (Pulsar matches it without a regex)."""
        return cls(None)

    @property
    def states(self) -> int:
        """The size of the pattern's RE2 program (1 for ``.*``)."""
        return 1 if self._re is None else int(self._re.programsize)

    def cost(self, length: int) -> int:
        """An upper bound of the steps matching a name of ``length`` characters takes."""
        return self.states * (length + 1)

    def matches(self, name: str) -> bool:
        """Whether the pattern matches all of ``name``."""
        return self._re is None or self._re.fullmatch(name) is not None
