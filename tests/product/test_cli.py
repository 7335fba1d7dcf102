"""The command line as a product: every option explained, --version, examples, errors naming the option.

Also shell completion, and ``cursorkit bench``: quick runs, JSON, comparison.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import cursorkit
from cursorkit.cli import main, parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no commands")


def test_every_command_and_option_explains_itself() -> None:
    commands = _commands()
    assert set(commands) == {
        "generate",
        "rebuild",
        "demo",
        "inspect",
        "bench",
        "broker",
        "admin",
        "completion",
    }
    for name, sub in commands.items():
        assert sub.description, name
        assert sub.epilog and "example" in sub.epilog, f"{name} has no examples"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.dest} has no help"
        text = sub.format_help()
        for action in sub._actions:  # defaults are shown, so units and defaults are read together
            if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
                assert "(default:" in text, name


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"cursorkit {cursorkit.__version__}"
    with pytest.raises(SystemExit):
        main(["rebuild", "--help"])
    out = capsys.readouterr().out
    assert "--min-index-count-per-bucket" in out and "(ms" in out and "default: 300000" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["generate", "--out", "x", "--messages", "-5"], "argument --messages: must be at least 1, got -5"),
        (
            ["generate", "--out", "x", "--delayed-fraction", "1.5"],
            "argument --delayed-fraction: must be from 0 to 1",
        ),
        (["generate", "--out", "x", "--keys", "many"], "argument --keys: expected an integer, got 'many'"),
        (["inspect", "x", "--limit", "0"], "argument --limit: must be at least 1"),
        (["completion", "fish"], "argument shell: invalid choice: 'fish'"),
    ],
)
def test_errors_name_the_option(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2 and fragment in capsys.readouterr().err


def test_completion_scripts_know_every_command_and_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    for name, sub in _commands().items():
        assert f"{name})" in script
        for action in sub._actions:
            for opt in action.option_strings:
                assert opt in script, (name, opt)
    result = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert result.returncode == 0, result.stderr  # the script parses
    assert main(["completion", "zsh"]) == 0
    assert "bashcompinit" in capsys.readouterr().out


def test_bench_quick_run_writes_json_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    groups = ["rangeset", "cursor", "delayed", "hashing", "selectors", "dispatcher"]
    first = tmp_path / "a.json"
    argv = ["bench", "--quick", *[x for g in groups for x in ("--only", g)], "--json", str(first)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "call floor" in out and "pyroaring" in out and "heapq of tuples" in out
    doc: dict[str, Any] = json.loads(first.read_text())
    assert doc["format"] == "cursorkit-bench" and doc["quick"] and doc["call_floor_mcalls"] > 0
    assert doc["machine"]["cpus"] and doc["packages"]["cursorkit"]
    assert {r["group"] for r in doc["rows"]} == set(groups)
    for row in doc["rows"]:
        assert row["values"]["cursorkit"] > 0 and len(row["values"]) >= 2, row  # every row has a peer
    worse = json.loads(first.read_text())
    for row in worse["rows"]:
        row["values"]["cursorkit"] *= 0.5 if row["higher_is_better"] else 2.0
    second = tmp_path / "b.json"
    second.write_text(json.dumps(worse))
    assert main(["bench", "--compare", str(first), str(second)]) == 0
    table = capsys.readouterr().out
    assert "-50% worse" in table and "+0%" in table
    (tmp_path / "junk.json").write_text("{}")
    assert main(["bench", "--compare", str(first), str(tmp_path / "junk.json")]) == 2
    assert main(["bench", "--only", "nope"]) == 2
    assert main(["bench", "--list"]) == 0
    assert "pipeline" in capsys.readouterr().out


@pytest.mark.spark
def test_bench_pipeline_group(spark: Any) -> None:
    from cursorkit.bench import Plan
    from cursorkit.bench.workloads import pipeline

    (row,) = pipeline(Plan(quick=True))
    assert row.values["cursorkit"] > 0 and row.values["single process (pyarrow + Cursor)"] > 0


def _inspect(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``cursorkit inspect`` in a child whose stdout is a pipe, as in a script or a log."""
    import os
    import sys

    run_env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | env
    return subprocess.run(
        [sys.executable, "-m", "cursorkit.cli", "inspect", *args],
        capture_output=True,
        text=True,
        env=run_env,
        check=False,
        timeout=120,
    )


def test_inspect_fits_columns_and_speaks_json(tmp_path: Path) -> None:
    from cursorkit import Cursor, Position
    from cursorkit.ackstate import CursorStore

    store = tmp_path / ("a-long-directory-name-" * 6) / "sub"
    cursor = Cursor(Position(3, -1), name="sub")
    for e in (0, 2, 4, 6):
        cursor.ack(Position(3, e))
    with CursorStore.create(store, name="sub") as s:
        s.flush(cursor)
    wide = _inspect([str(store)], {"COLUMNS": "300"})
    narrow = _inspect([str(store)], {})
    assert wide.returncode == narrow.returncode == 0
    assert max(map(len, wide.stdout.splitlines())) > 120  # the path on one line
    assert max(map(len, narrow.stdout.splitlines())) <= 120
    assert str(store) in wide.stdout and str(store) in narrow.stdout.replace("\n", "").replace(" ", "")
    doc = json.loads(_inspect([str(store), "--json"], {}).stdout)
    assert doc["damaged"] is False and doc["stats"]["mark_delete_position"] == "3:0"


@pytest.mark.parametrize(
    ("location", "fragment"),
    [
        ("zookeeper://127.0.0.1:2181/a", "zk://host:port/path"),
        ("ftp://host/x", "unknown scheme ftp://"),
    ],
)
def test_inspect_refuses_unknown_schemes_in_one_line(location: str, fragment: str) -> None:
    result = _inspect([location], {})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr
