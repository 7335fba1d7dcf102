"""What the README and the docs say: user-facing text, the two set-up commands, every page in the nav.

Also that every public method of the native module's stub carries a docstring, since the API
reference shows the stub's docstrings for the native classes.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

from doc_blocks import blocks

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
USER_FACING = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
INTERNAL = re.compile(r"\bissue[ -]?\d+|\bfinding[ -]?\d+|\bresearch\b|§", re.I)


def test_no_internal_references() -> None:
    for doc in USER_FACING:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            assert not INTERNAL.search(line), f"{doc.relative_to(REPO)}:{n}: {line.strip()}"


def test_readme_set_up_is_make_demo_and_make_test() -> None:
    setup = [
        [ln.split("#")[0].strip() for ln in b.code.splitlines() if ln.strip()]
        for b in blocks(REPO / "README.md")
        if b.lang == "sh" and "make demo" in b.code
    ]
    assert setup == [["make demo", "make test"]]


def test_readme_links_to_architecture_instead_of_listing_files() -> None:
    readme = (REPO / "README.md").read_text()
    assert "(ARCHITECTURE.md)" in readme
    assert "python/cursorkit/" not in readme and "rust/cursorkit-core/src" not in readme


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1].split("\nmarkdown_extensions:", 1)[0]
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed, (pages - listed, listed - pages)


def test_every_public_method_of_the_stub_has_a_docstring() -> None:
    tree = ast.parse((REPO / "python" / "cursorkit" / "_core.pyi").read_text())
    bare = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        assert ast.get_docstring(cls), cls.name
        documented: set[str] = set()
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")):
            if ast.get_docstring(fn):
                documented.add(fn.name)
        names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
        bare += [f"{cls.name}.{name}" for name in sorted(names - documented)]
    assert not bare, bare


def _docs_links() -> Any:
    spec = importlib.util.spec_from_file_location("docs_links", REPO / "scripts" / "docs_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_guide_identifiers_link_to_the_reference() -> None:
    """The docs hook links a rendered class (or member) once per section, never inside code."""
    links = _docs_links()
    links.on_config({"docs_dir": str(DOCS)})
    assert links._targets["CursorStore"] == "cursorkit.ackstate.store.api.CursorStore"
    assert links._targets["Position"] == "cursorkit.Position"
    page = (
        "Open it with `CursorStore.open(path)`; `CursorStore` again.\n"
        "```python\nstore = `CursorStore`\n```\n"
        "## Next\nA `Cursor` and a [`Cursor`][x] and `Cursor.no_such_member` and `NotAClass`.\n"
    )
    assert links.link_identifiers(page).splitlines() == [
        "Open it with [`CursorStore.open(path)`][cursorkit.ackstate.store.api.CursorStore.open]; "
        "[`CursorStore`][cursorkit.ackstate.store.api.CursorStore] again.",
        "```python",
        "store = `CursorStore`",
        "```",
        "## Next",
        "A [`Cursor`][cursorkit.ackstate.cursor.Cursor] and a [`Cursor`][x] and `Cursor.no_such_member` "
        "and `NotAClass`.",
    ]
