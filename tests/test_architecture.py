"""The import rules of ARCHITECTURE.md, checked: layers import downward only, and no module cycles."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "cursorkit"
ALLOWED = {
    "ackstate": {"ackstate"},
    "delayed": {"delayed", "ackstate"},
    "keyshared": {"keyshared", "ackstate"},
    "pipeline": {"pipeline", "delayed", "keyshared", "ackstate"},
    "stores": {"stores"},
    "bench": {"bench", "pipeline", "delayed", "keyshared", "ackstate"},
}
BASE = {"_core", "errors", "fsio", "proto", "stores"}


def imports_of(path: Path) -> set[str]:
    """Every ``cursorkit.*`` module a file imports at run time (``TYPE_CHECKING`` blocks excluded)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cursorkit."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cursorkit."))
    return found


def test_layers_import_downward_only() -> None:
    for layer, allowed in ALLOWED.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for module in imports_of(path):
                top = module.split(".")[1]
                assert top in allowed | BASE, f"{path.relative_to(PACKAGE)} imports {module}"


def test_no_import_cycles_between_modules() -> None:
    """Module-to-module imports form no cycle (package ``__init__`` re-exports aside)."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            modules[".".join(rel.parts)] = path
    graph = {
        name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()
    }
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for nxt in graph[name]:
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*trail, name, nxt])
            if nxt not in state:
                visit(nxt, [*trail, name])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
