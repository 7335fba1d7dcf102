"""The code blocks of the README and the docs, and a driver that runs one document's blocks in order.

A document's ``python`` blocks run top to bottom in one namespace, its ``sh`` blocks with bash in
the same working directory between them, so a shell block can write what a later Python block
reads. ``rust`` blocks are compiled and run as doc tests elsewhere (``test_docs_examples.py``).
``text`` blocks are output or layouts and are not run. Two kinds of shell block are not run here,
each covered by its own test: the two set-up commands (every line ``make …``: CI runs ``make test``
itself) and cluster recipes (``spark-submit``: ``make demo-cluster`` and
``tests/pipeline/test_standalone_cluster.py`` run them against a standalone cluster).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
KNOWN = {"python", "sh", "rust", "text", "toml"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    path: str
    line: int
    lang: str
    code: str

    @property
    def runs_here(self) -> bool:
        """Whether the document driver runs it (Python and shell blocks, less the two exceptions)."""
        if self.lang == "python":
            return True
        if self.lang != "sh":
            return False
        lines = [ln for ln in self.code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if lines and all(ln.lstrip().startswith("make ") for ln in lines):
            return False
        return "spark-submit" not in self.code


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(str(path), line, m.group(1), m.group(2)))
    return out


DRIVER = r"""
import json, os, subprocess, sys
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__doc_example__"}
for b in blocks:
    where = f"{b['path']}:{b['line']}"
    print(f"--- {where} ({b['lang']})", flush=True)
    if b["lang"] == "python":
        exec(compile(b["code"], where, "exec"), namespace)
    else:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", b["code"]])
        if done.returncode != 0:
            sys.exit(f"{where}: shell block exited {done.returncode}")
print("--- all blocks ran", flush=True)
"""


def write_driver(tmp: Path, doc: list[Block]) -> list[str]:
    """The command that runs a document's runnable blocks in ``tmp``."""
    (tmp / "blocks.json").write_text(json.dumps([b.__dict__ for b in doc if b.runs_here]))
    (tmp / "driver.py").write_text(DRIVER)
    return [sys.executable, "-I", str(tmp / "driver.py"), str(tmp / "blocks.json")]
