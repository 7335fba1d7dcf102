"""The import rules of ARCHITECTURE.md, checked: layers import downward only, and no module cycles."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "cursorkit"
ALLOWED = {
    "ackstate": {"ackstate"},
    "delayed": {"delayed", "ackstate"},
    "keyshared": {"keyshared", "ackstate"},
    "shared": {"shared", "keyshared", "ackstate"},
    "pipeline": {"pipeline", "delayed", "keyshared", "ackstate"},
    "stores": {"stores"},
    "bench": {"bench", "pipeline", "delayed", "keyshared", "ackstate"},
    "broker": {"broker", "shared", "delayed", "keyshared", "ackstate"},
}
BASE = {"_core", "_lazy", "errors", "fsio", "proto", "stores", "wire"}


def imports_of(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """Every ``cursorkit`` module a file imports, ``if TYPE_CHECKING:`` blocks and function bodies included.

    ``from cursorkit.a import b`` imports the module ``cursorkit.a.b`` when there is one (else the
    module ``cursorkit.a``, and ``b`` is a name in it); relative imports are read as absolute ones.
    ``root`` is the folder that holds the ``cursorkit`` package. An import made only for type
    checking is an edge as well: a cycle through one is a cycle in the design, whatever Python
    does at run time.
    """
    here = path.relative_to(root).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the file's package, ``level - 1`` folders up
                module = ".".join([*here[: len(here) - node.level + 1], *([module] if module else [])])
            if module.split(".")[0] != "cursorkit":
                continue
            for alias in node.names:
                child = f"{module}.{alias.name}"
                found.add(child if _is_module(child, root) else module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "cursorkit")
    return found


def _is_module(name: str, root: Path) -> bool:
    """Whether ``name`` (dotted) is a module or package under ``root``."""
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_layers_import_downward_only() -> None:
    for layer, allowed in ALLOWED.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for module in imports_of(path):
                if module == "cursorkit":
                    continue  # the package's root: its re-exports of the extension and the base modules
                top = module.split(".")[1]
                assert top in allowed | BASE, f"{path.relative_to(PACKAGE)} imports {module}"


PUBLIC_KEYSHARED = "cursorkit.keyshared"
"""What the reference broker's server may use of the Key_Shared layer: its package's public names."""


def test_the_broker_uses_only_public_api() -> None:
    """The reference broker is what a broker author copies: no extension module, no library internals.

    Its byte work in Rust comes through ``cursorkit.wire``; its server takes Key_Shared's public names.
    """
    for path in (PACKAGE / "broker").rglob("*.py"):
        for module in imports_of(path):
            where = path.relative_to(PACKAGE)
            assert module != "cursorkit._core", f"{where} imports the extension module"
            if "server" in path.parts and module.startswith(PUBLIC_KEYSHARED + "."):
                raise AssertionError(f"{where} imports {module}: use cursorkit.keyshared's public names")


def python_graph(package: Path) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports (package ``__init__`` re-exports aside)."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        if path.name != "__init__.py":
            rel = path.relative_to(package.parent).with_suffix("")
            modules[".".join(rel.parts)] = path
    return {
        name: {m for m in imports_of(path, package.parent) if m in modules and m != name}
        for name, path in modules.items()
    }


def test_no_import_cycles_between_modules() -> None:
    """Module-to-module imports form no cycle, counting imports made only for type checking."""
    graph = python_graph(PACKAGE)
    assert "cursorkit.delayed.bucket_tracker" in graph and graph["cursorkit.delayed.bucket_tracker"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_python_reader_sees_a_type_checking_cycle(tmp_path: Path) -> None:
    """A loop closed only by an ``if TYPE_CHECKING:`` import is caught (as bucket_tracker <-> merge was)."""
    package = tmp_path / "cursorkit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tracker.py").write_text("from cursorkit.merge import merge\n")
    (package / "merge.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from cursorkit.tracker import Tracker\n"
    )
    graph = python_graph(package)
    assert graph == {"cursorkit.tracker": {"cursorkit.merge"}, "cursorkit.merge": {"cursorkit.tracker"}}
    assert find_cycle(graph) == ["cursorkit.merge", "cursorkit.tracker", "cursorkit.merge"]


def test_the_python_reader_sees_a_module_imported_from_its_package(tmp_path: Path) -> None:
    """``from cursorkit.server import commands`` imports the module ``commands``, not the package.

    As ``connection.py`` and ``consumer_commands.py`` did: the package import hid their loop. A
    relative import reads the same; a name that is no module stays an import of its module.
    """
    server = tmp_path / "cursorkit" / "server"
    server.mkdir(parents=True)
    for init in (server.parent / "__init__.py", server / "__init__.py"):
        init.write_text("")
    (server / "connection.py").write_text(
        "from cursorkit.server import commands\nfrom cursorkit.server.names import topic_name\n"
    )
    (server / "commands.py").write_text("from . import connection\n")
    (server / "names.py").write_text("from .. import server\n\ndef topic_name() -> None: ...\n")
    graph = python_graph(tmp_path / "cursorkit")
    assert graph == {
        "cursorkit.server.connection": {"cursorkit.server.commands", "cursorkit.server.names"},
        "cursorkit.server.commands": {"cursorkit.server.connection"},
        "cursorkit.server.names": set(),
    }
    assert find_cycle(graph) == [
        "cursorkit.server.commands",
        "cursorkit.server.connection",
        "cursorkit.server.commands",
    ]


RUST = Path(__file__).resolve().parents[2] / "rust"
# The core's domains and what each may import (the crate's shared modules always).
RUST_ALLOWED = {
    "ackstate": {"ackstate"},
    "delayed": {"delayed", "ackstate"},
    "keyshared": {"keyshared", "ackstate"},
    "shared": {"shared", "ackstate"},
    "broker": {"broker", "ackstate"},
}
RUST_BASE = {"bits", "error", "mem", "testing"}
_PATH = re.compile(r"\b(crate|super|use (?!crate\b|super\b|self\b|std\b)\w+)((?:::\w+)*)(::\{([^}]*)\})?")


def rust_modules(src: Path) -> dict[str, Path]:
    """``a::b`` → file, for every module file under a crate's ``src`` (``lib.rs`` is ``""``)."""
    found: dict[str, Path] = {}
    for path in src.rglob("*.rs"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts.pop()
        found["::".join(parts)] = path
    return found


def rust_reexports(lib: Path, modules: dict[str, Path]) -> dict[str, str]:
    """The crate root's ``pub use a::b::{X, Y}`` names → the module that defines them."""
    out: dict[str, str] = {}
    for m in re.finditer(r"pub use ([\w:]+)::\{([^}]*)\};|pub use ([\w:]+)::(\w+);", lib.read_text()):
        module, names = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        for name in re.findall(r"\w+", names):
            out[name] = module
    return {name: module for name, module in out.items() if module in modules}


def rust_imports(name: str, path: Path, modules: dict[str, Path], reexports: dict[str, str]) -> set[str]:
    """The modules of its own crate that a Rust module names.

    Read from ``crate::``, ``super::`` and ``use child::`` paths; the file's unit tests left out.
    """
    text = path.read_text().split("#[cfg(test)]\nmod tests")[0]
    here = name.split("::") if name else []
    # `super` is the parent of this module (a `mod.rs` file is its folder's module).
    parent = here[:-1]
    found: set[str] = set()
    for m in _PATH.finditer(text):
        head = m.group(1)
        if head == "crate":
            base = []
        elif head == "super":
            base = parent
        elif "::".join([*here, head[4:]]) in modules:
            base = [*here, head[4:]]  # `use child::…` of a submodule declared here
        else:
            continue
        segments = base + [s for s in m.group(2).split("::") if s]
        items = (m.group(4) or "").split(",")
        tails = [re.findall(r"\w+", item)[:1] for item in items] if m.group(3) else [[]]
        for tail in tails:
            full = segments + tail
            while full and "::".join(full) not in modules:
                full = full[:-1]
            target = "::".join(full)
            names = (segments + tail)[len(base) :] if head == "crate" else []
            if not full and names:
                target = reexports.get(names[0], "")
            if target and target != name:
                found.add(target)
    return found


def _nested(a: str, b: str) -> bool:
    """Whether one module holds the other.

    A folder's module and its files are one unit: a child naming ``super::`` and its parent naming
    the child are not a loop between files.
    """
    return a.startswith(b + "::") or b.startswith(a + "::")


def rust_graph(crate: str) -> dict[str, set[str]]:
    """Module → the modules of its crate it imports (the crate root, which re-exports all, aside)."""
    src = RUST / crate / "src"
    modules = rust_modules(src)
    reexports = rust_reexports(src / "lib.rs", modules)
    return {
        name: {t for t in rust_imports(name, path, modules, reexports) if t and not _nested(name, t)}
        for name, path in modules.items()
        if name
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a trail of names, or None."""
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> list[str] | None:
        state[name] = 1
        for nxt in sorted(graph.get(name, ())):
            if state.get(nxt) == 1:
                return [*trail, name, nxt]
            if nxt not in state:
                found = visit(nxt, [*trail, name])
                if found:
                    return found
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name, [])
            if found:
                return found
    return None


def test_rust_modules_form_no_cycle() -> None:
    """Neither crate has modules that import each other in a loop."""
    for crate in ("cursorkit-core", "cursorkit-py"):
        graph = rust_graph(crate)
        assert "ackstate::cursor" in graph and graph["ackstate::cursor"], f"{crate}: no imports read"
        cycle = find_cycle(graph)
        assert cycle is None, f"{crate}: module cycle " + " -> ".join(cycle or [])


def test_rust_core_domains_import_downward_only() -> None:
    """The core's domains import as the Python package's do (shared modules aside)."""
    for name, imports in rust_graph("cursorkit-core").items():
        domain = name.split("::")[0]
        for target in imports:
            top = target.split("::")[0]
            assert top in RUST_ALLOWED.get(domain, {top}) | RUST_BASE, f"core {name} imports {target}"


def test_the_rust_reader_sees_a_cycle_and_a_reach() -> None:
    """The readers above would catch what they exist for: a loop and a cross-domain import."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    src = RUST / "cursorkit-core" / "src"
    modules = rust_modules(src)
    reexports = rust_reexports(src / "lib.rs", modules)
    sample = RUST / "cursorkit-core" / "src" / "keyshared" / "dispatch" / "mod.rs"
    got = rust_imports("keyshared::dispatch", sample, modules, reexports)
    assert {"mem", "ackstate::position", "keyshared::dispatch::inflight", "ackstate::cursor"} <= got
