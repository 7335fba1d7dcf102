"""Package names imported on first use (PEP 562), so ``import cursorkit`` stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str,
    namespace: dict[str, Any],
    lazy: Mapping[str, str],
    submodules: frozenset[str] = frozenset(),
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``.

    Each lazy name is imported once from its module, then kept in ``namespace`` like any other;
    each of ``submodules`` is imported as an attribute on first use.
    """

    def get(name: str) -> object:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return get, names
