"""Every code block of the README and the docs runs as written (see ``doc_blocks.py`` for how).

Python and shell blocks run top to bottom per document in an empty directory, against the real
ZooKeeper and S3 servers of the session (``ZK`` and the ``AWS_*`` settings are in the environment,
as a reader's shell would have them); Rust blocks compile and run as doc tests of a crate that
depends on ``cursorkit-core``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from doc_blocks import KNOWN, blocks, write_driver
from object_store import s3_prefix

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
RUNNABLE = [d for d in DOCUMENTS if any(b.runs_here for b in blocks(d))]


def test_every_block_says_what_it_is() -> None:
    """A fence without a language would be neither run nor shown as what it is."""
    for doc in DOCUMENTS:
        for b in blocks(doc):
            assert b.lang in KNOWN, f"{b.path}:{b.line}: a ```{b.lang} block (use one of {sorted(KNOWN)})"


@pytest.mark.parametrize("doc", RUNNABLE, ids=[str(d.relative_to(REPO)) for d in RUNNABLE])
def test_python_and_shell_blocks_run(
    doc: Path, tmp_path: Path, zk_server: Any, s3_endpoint: dict[str, str]
) -> None:
    s3_prefix(s3_endpoint, "x", bucket="broker-state")  # the README's bucket exists, as a reader's would
    env = {
        **os.environ,
        **s3_endpoint,
        "ZK": zk_server.hosts,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONWARNINGS": "ignore",
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        write_driver(tmp_path, blocks(doc)),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
    assert done.stdout.rstrip().endswith("--- all blocks ran")


def test_rust_blocks_run_as_doc_tests(tmp_path: Path) -> None:
    docs = [d for d in DOCUMENTS if any(b.lang == "rust" for b in blocks(d))]
    assert docs, "no Rust examples found"
    crate = tmp_path / "doc-examples"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "cursorkit-doc-examples"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
        f'[dependencies]\ncursorkit-core = {{ path = "{REPO / "rust" / "cursorkit-core"}" }}\n\n[workspace]\n'
    )
    shutil.copy(REPO / "Cargo.lock", crate / "Cargo.lock")  # the project's versions of everything
    lib = ["//! The Rust code blocks of cursorkit's README and docs, as doc tests."]
    for i, doc in enumerate(docs):
        lib += [f'#[doc = include_str!("{doc}")]', f"pub mod doc{i} {{}}"]
    (crate / "src" / "lib.rs").write_text("\n".join(lib) + "\n")
    done = subprocess.run(
        ["cargo", "test", "--doc", "--offline"],
        cwd=crate,
        env={**os.environ, "CARGO_TARGET_DIR": str(REPO / "target")},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    ran = sum(1 for d in docs for b in blocks(d) if b.lang == "rust")
    assert f"{ran} passed" in done.stdout, done.stdout[-3000:]
