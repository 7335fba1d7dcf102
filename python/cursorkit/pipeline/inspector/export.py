"""Inspection summaries as plain JSON values (``cursorkit inspect --json``), for scripts and monitoring.

Every summary becomes an object of its fields; positions become ``"L:E"`` strings, bytes hex, and
every object that can be damaged carries its ``damaged`` verdict, so a script needs no rules of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from cursorkit import _core

__all__ = ["as_json"]

_VERDICTS = ("damaged", "damaged_topics", "damaged_buckets", "messages")


def as_json(value: object) -> Any:
    """``value`` (a summary, or anything inside one) as JSON-ready dicts, lists, strings and numbers."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, _core.Position):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return [as_json(v) for v in items]
    if is_dataclass(value) and not isinstance(value, type):
        out = {f.name: as_json(getattr(value, f.name)) for f in fields(value)}
        for name in _VERDICTS:
            if name not in out and isinstance(getattr(type(value), name, None), property):
                out[name] = as_json(getattr(value, name))
        return out
    return str(value)
