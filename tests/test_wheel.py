"""The built artefact: an abi3 wheel that installs into a fresh venv and works there.

The wheel is built with the dev profile into a temporary directory, in the cargo target directory
that `make` gives maturin (target/ext; same profile and PYO3_PYTHON as `maturin develop`), so cargo
finds everything built and only maturin's packaging runs.
The venv has none of the dev venv's packages; pip resolves the wheel's own dependencies (numpy).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel (cargo relink) and installs numpy into a new venv

REPO = Path(__file__).resolve().parent.parent

# Run with `python -I` in the fresh venv: no PYTHONPATH, no current directory on sys.path, so only
# the installed wheel can provide `cursorkit`.
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


def _run(args: list[str], *, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # What the Makefile gives maturin, also when pytest runs by hand, so nothing is rebuilt.
    env.setdefault("PYO3_PYTHON", sys.executable)
    env.setdefault("CARGO_TARGET_DIR", str(REPO / "target" / "ext"))
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    command = " ".join(args[:5])  # not the whole smoke script
    assert result.returncode == 0, (
        f"{command} ... exited {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    maturin = [sys.executable, "-m", "maturin", "build", "--profile", "dev"]
    _run([*maturin, "--interpreter", sys.executable, "--out", str(out)], cwd=REPO, timeout=1200)
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_is_abi3_for_python_311_and_up(wheel: Path) -> None:
    name = wheel.name
    assert name.startswith("cursorkit-"), name
    assert "-cp311-abi3-" in name, name


def test_wheel_installs_and_works_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # The dev venv's pip installs into the fresh one (faster than bootstrapping pip there).
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    _run([*pip, "install", "--quiet", str(wheel)], cwd=tmp_path, timeout=600)
    result = _run([str(python), "-I", "-c", SMOKE], cwd=tmp_path, timeout=120)
    assert result.stdout.startswith("wheel ok"), result.stdout
    # The `cursorkit` command ([project.scripts]) is installed with the wheel.
    assert (env_dir / "bin" / "cursorkit").is_file()
