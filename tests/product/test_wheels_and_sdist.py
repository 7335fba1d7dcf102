"""The release artefacts: abi3 wheels for three platform policies and an sdist, each checked.

``scripts/build_wheels.py`` (what ``make wheel`` runs) builds them here with the quick-to-compile
``wheel-test`` cargo profile into ``target/wheel-test``: manylinux2014 x86_64 and aarch64 and
musllinux_1_2 x86_64, cross-compiled with zig. ``auditwheel show`` confirms each policy (the musl
check resolves libc against a stub named as on musl systems, made with zig: this is a glibc host).
The manylinux x86_64 wheel installs into a fresh venv, imports, runs the tour and ``cursorkit
--help``; the sdist builds and installs in another fresh venv with nothing but pip and the Rust
toolchain, and passes the same smoke test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cross-compiles three wheels, installs two fresh venvs

REPO = Path(__file__).resolve().parents[2]
TARGET_DIR = REPO / "target" / "wheel-test"
sys.path.insert(0, str(REPO / "scripts"))

import build_wheels  # noqa: E402

# Run with `python -I` in the fresh venv: no PYTHONPATH, no current directory on sys.path, so only
# the installed package can provide `cursorkit`.
SMOKE = """
import sys
from importlib import resources
from pathlib import Path

import numpy as np

import cursorkit
from cursorkit import Position, RangeSet, _core

prefix = Path(sys.prefix).resolve()
assert Path(cursorkit.__file__).resolve().is_relative_to(prefix), cursorkit.__file__
assert Path(_core.__file__).name.endswith(".abi3.so"), _core.__file__
package = resources.files("cursorkit")
assert package.joinpath("py.typed").is_file(), "py.typed missing from the wheel"
assert package.joinpath("_core.pyi").is_file(), "_core.pyi missing from the wheel"
assert package.joinpath("pipeline", "log4j2.properties").is_file(), "the pipeline's log config is missing"

rs = RangeSet()
rs.add_open_closed(0, 5, 0, 75)
rs.add_open_closed(0, 97, 0, 105)
assert str(rs) == "[(0:5..0:75],(0:97..0:105]]", str(rs)
assert len(rs) == 2
assert rs.contains(0, 6) and not rs.contains(0, 5)
rs.add_many(np.array([3, 3, 3], dtype=np.int64), np.array([0, 1, 2], dtype=np.int64))
assert len(rs) == 3
assert rs.last_range() == (Position(3, -1), Position(3, 2)), rs.last_range()
print("wheel ok", cursorkit.__version__)
"""


def _run(args: list[str], *, cwd: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args,
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    command = " ".join(args[:5])  # not the whole smoke script
    assert result.returncode == 0, (
        f"{command} ... exited {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """Every artefact, or why a cross target could not even start (its Rust std not downloadable)."""
    out = tmp_path_factory.mktemp("dist")
    built: dict[str, Path | str] = {}
    for name, (triple, _policy) in build_wheels.TARGETS.items():
        if triple not in build_wheels._installed_targets():
            added = subprocess.run(
                ["rustup", "target", "add", triple], capture_output=True, text=True, check=False
            )
            if added.returncode != 0:
                built[name] = f"rustup target add {triple} failed: {added.stderr.strip()[-300:]}"
                continue
        built[name] = build_wheels.build_wheel(name, out, "wheel-test", TARGET_DIR)
    built["sdist"] = build_wheels.build_sdist(out)
    return built


def _artefact(dist: dict[str, Path | str], name: str) -> Path:
    got = dist[name]
    if isinstance(got, str):  # only a Rust standard library that cannot be downloaded here
        pytest.skip(got)
    return got


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("x86_64-manylinux", "manylinux_2_17_x86_64"),
        ("aarch64-manylinux", "manylinux_2_17_aarch64"),
        ("x86_64-musllinux", "musllinux_1_2_x86_64"),
    ],
)
def test_auditwheel_confirms_each_policy(
    dist: dict[str, Path | str], name: str, tag: str, tmp_path: Path
) -> None:
    wheel = _artefact(dist, name)
    assert "-cp311-abi3-" in wheel.name, wheel.name
    args = [sys.executable, "-m", "auditwheel", "show", str(wheel)]
    if "musl" in name:  # a glibc host has no musl libc to resolve against: a stub named as on Alpine
        stub = tmp_path / build_wheels.MUSL_LIBC
        (tmp_path / "e.c").write_text("int cursorkit_stub;\n")
        _run(
            [
                sys.executable,
                "-m",
                "ziglang",
                "cc",
                "-target",
                "x86_64-linux-musl",
                "-shared",
                "-nostdlib",
                f"-Wl,-soname,{stub.name}",
                "-o",
                str(stub),
                str(tmp_path / "e.c"),
            ],
            cwd=tmp_path,
            timeout=300,
        )
        args += ["--ldpaths", str(tmp_path)]
    shown = " ".join(_run(args, cwd=tmp_path, timeout=300).stdout.split())
    assert f'is consistent with the following platform tag: "{tag}"' in shown, shown


def _fresh_venv(tmp_path: Path) -> Path:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    return env_dir


def _smoke(env_dir: Path, cwd: Path) -> None:
    python = env_dir / "bin" / "python"
    result = _run([str(python), "-I", "-c", SMOKE], cwd=cwd, timeout=120)
    assert result.stdout.startswith("wheel ok"), result.stdout
    tour = _run([str(python), "-I", "-m", "cursorkit.tour"], cwd=cwd, timeout=300)
    assert tour.stdout.startswith("cursorkit tour"), tour.stdout
    helped = _run([str(env_dir / "bin" / "cursorkit"), "--help"], cwd=cwd, timeout=60)
    assert "rebuild" in helped.stdout and "bench" in helped.stdout
    version = _run([str(env_dir / "bin" / "cursorkit"), "--version"], cwd=cwd, timeout=60)
    assert version.stdout.strip() == f"cursorkit {build_wheels_version()}"
    # the benchmark suite ships in the wheel and runs with no peer installed (they are skipped)
    bench = _run(
        [str(env_dir / "bin" / "cursorkit"), "bench", "--quick", "--only", "rangeset"], cwd=cwd, timeout=300
    )
    assert "W1 add_many" in bench.stdout and "call floor" in bench.stdout, bench.stdout


def build_wheels_version() -> str:
    for line in (REPO / "Cargo.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version in Cargo.toml")


def _install(artefact: Path, tmp_path: Path, **env: str) -> Path:
    """A fresh venv with ``artefact`` pip-installed into it (by the dev venv's pip: no bootstrap)."""
    env_dir = _fresh_venv(tmp_path)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(env_dir / "bin" / "python"),
        "--disable-pip-version-check",
    ]
    # --no-cache-dir: a wheel pip built from an earlier sdist of the same name is never reused
    _run([*pip, "install", "--quiet", "--no-cache-dir", str(artefact)], cwd=tmp_path, timeout=1200, **env)
    return env_dir


def test_manylinux_wheel_installs_and_works_in_a_fresh_venv(
    dist: dict[str, Path | str], tmp_path: Path
) -> None:
    _smoke(_install(_artefact(dist, "x86_64-manylinux"), tmp_path), tmp_path)


def test_sdist_builds_and_installs_in_a_fresh_venv(dist: dict[str, Path | str], tmp_path: Path) -> None:
    env_dir = _install(
        _artefact(dist, "sdist"),
        tmp_path,
        MATURIN_PEP517_ARGS="--profile wheel-test",  # quick to compile; the build itself is what is tested
        # A target directory of its own: an sdist's files carry one fixed old mtime, so a shared
        # directory's earlier build of the same relative paths would look fresh to cargo and be
        # packed instead of the sources.
        CARGO_TARGET_DIR=str(tmp_path / "target"),
    )
    _smoke(env_dir, tmp_path)
