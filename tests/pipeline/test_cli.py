"""The ``cursorkit`` command line without Spark: argument handling, generate, inspect, script mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cursorkit.errors import InvalidArgument
from cursorkit.pipeline import cli
from cursorkit.pipeline.cli import main
from cursorkit.pipeline.session import parse_conf


def test_cli_runs_as_a_script_as_spark_submit_does() -> None:
    """spark-submit runs cli.py as a file: its directory lands first on sys.path (no stdlib shadowing)."""
    script = Path(cli.__file__)
    result = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "generate" in result.stdout and "rebuild" in result.stdout and "inspect" in result.stdout


def test_generate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "logs"
    args = ["generate", "--out", str(out), "--messages", "2000", "--ledgers", "3", "--keys", "20"]
    assert main([*args, "--subscriptions", "2", "--seed", "3"]) == 0
    assert "wrote 2,000 messages" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["acks", "messages"]
    # A second run into the same place is refused, not mixed in.
    assert main([*args, "--subscriptions", "2"]) == 2
    assert "InvalidArgument" in capsys.readouterr().err


def test_inspect_of_something_else_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["inspect", str(tmp_path)]) == 2
    assert "InvalidArgument" in capsys.readouterr().err


def test_parse_conf() -> None:
    assert parse_conf(["a=b", "spark.x = 1=2"]) == [("a", "b"), ("spark.x", " 1=2")]
    with pytest.raises(InvalidArgument):
        parse_conf(["novalue"])
    with pytest.raises(InvalidArgument):
        parse_conf(["=x"])


def test_unknown_command_is_an_argparse_error() -> None:
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2


def test_a_failed_publish_puts_the_previous_output_back(tmp_path: Path) -> None:
    from cursorkit.pipeline.rebuild_output import replace_output

    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text("previous")
    with pytest.raises(FileNotFoundError):
        replace_output(tmp_path / ".out.rebuild-missing", out)
    assert (out / "manifest.json").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    new = tmp_path / ".out.rebuild-new"
    new.mkdir()
    (new / "manifest.json").write_text("new")
    replace_output(new, out)
    assert (out / "manifest.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
