"""A mkdocs hook: identifiers in the guides and semantics pages link to their API reference entry.

A backticked public name (`` `CursorStore` ``, `` `Cursor.ack` ``, `` `Cursor.ack()` ``) outside code
blocks becomes an autorefs link to the object the reference renders (``docs/reference/*.md``'s
``:::`` lines say which modules those are), the first time it appears in each section. A name the
reference does not render is left as it is, and a link autorefs cannot resolve fails the strict
build, so a renamed class shows up there.
"""

from __future__ import annotations

import importlib
import re
from functools import partial
from pathlib import Path
from typing import Any

_LINKED_PAGES = ("guides/", "semantics/", "index.md")
_FENCE = re.compile(r"^(```|~~~)")
_CODE_NAME = re.compile(
    r"(?<![\[\w`])`([A-Z][A-Za-z0-9_]*)(?:\.([a-z_][A-Za-z0-9_]*))?(\([^`]*\))?`(?![\]\w])"
)
_HEADING = re.compile(r"^#{1,6} ")

_targets: dict[str, str] = {}


def _rendered_modules(docs: Path) -> list[str]:
    """The objects the reference pages render, from their ``:::`` lines."""
    found: list[str] = []
    for page in sorted((docs / "reference").glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        found.extend(line[4:].strip() for line in lines if line.startswith("::: "))
    return found


def _public(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in vars(module) if not n.startswith("_")]


def _collect(docs: Path) -> dict[str, str]:
    """Public class name -> the identifier its reference entry has."""
    targets: dict[str, str] = {}
    for path in _rendered_modules(docs):
        try:
            module = importlib.import_module(path)
        except ImportError:  # a class rendered on its own (``::: cursorkit.Position``)
            owner, _, name = path.rpartition(".")
            if isinstance(getattr(importlib.import_module(owner), name, None), type):
                targets.setdefault(name, path)
            continue
        for name in _public(module):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and obj.__module__ == path:
                targets.setdefault(name, f"{path}.{name}")
    return targets


def on_config(config: Any) -> Any:
    """Reads which classes the reference renders, once per build."""
    _targets.clear()
    _targets.update(_collect(Path(config["docs_dir"])))
    return config


def _link(match: re.Match[str], seen: set[str]) -> str:
    cls, attr = match.group(1), match.group(2)
    target = _targets.get(cls)
    if target is None:
        return match.group(0)
    if attr is not None:
        owner = importlib.import_module(target.rpartition(".")[0])
        if not hasattr(getattr(owner, cls), attr):
            return match.group(0)
        target = f"{target}.{attr}"
    if target in seen:
        return match.group(0)
    seen.add(target)
    return f"[{match.group(0)}][{target}]"


def link_identifiers(markdown: str) -> str:
    """``markdown`` with each section's first mention of a rendered class (or its member) linked."""
    out: list[str] = []
    fenced = False
    seen: set[str] = set()
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            if _HEADING.match(line):
                seen = set()
            else:
                line = _CODE_NAME.sub(partial(_link, seen=seen), line)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Links identifiers on the guide, semantics and home pages."""
    if not page.file.src_uri.startswith(_LINKED_PAGES):
        return markdown
    return link_identifiers(markdown)
