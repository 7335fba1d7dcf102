"""The first rows of a CSV/JSON log, typed as the job would read them, for checks without Spark."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from cursorkit.errors import InvalidInput

__all__ = ["SAMPLE_ROWS", "sample_text", "text_files"]

SAMPLE_ROWS = 10_000
"""Rows of a CSV/JSON log read to check its values (the first block of each file, at most)."""


def text_files(path: str, fmt: str) -> list[Path]:
    """A CSV/JSON log's files: the path itself, or a directory's files of that format."""
    p = Path(path)
    if p.is_file():
        return [p]
    suffixes = {"csv": (".csv",), "json": (".json", ".jsonl")}.get(fmt, ())
    return sorted(
        q
        for q in p.rglob("*")
        if q.is_file()
        and q.suffix.lower() in suffixes
        and not any(part.startswith((".", "_")) for part in q.relative_to(p).parts)
    )


def sample_text(files: list[Path], fmt: str, what: str, path: str) -> tuple[pa.Table, bool]:
    """The first rows of a CSV/JSON log, file after file until one has rows; and whether that is all."""
    names: list[str] = []
    complete = True
    for i, file in enumerate(files):
        try:
            table, whole = _read_head(file, fmt)
        except (OSError, pa.ArrowInvalid, ValueError, UnicodeDecodeError) as e:
            raise InvalidInput(
                f"{what} log {path}: {file} cannot be read as {fmt.upper()}: {e}", source=path
            ) from e
        complete = complete and whole
        if table.num_rows:  # files before it held no row
            return table, complete and i == len(files) - 1
        names.extend(n for n in table.column_names if n not in names)
    return _empty(names), complete


def _read_head(file: Path, fmt: str) -> tuple[pa.Table, bool]:
    """Up to ``SAMPLE_ROWS`` rows of one file (names from a CSV header, or the JSON records' keys)."""
    with file.open("rb") as f:
        head = f.read(1 << 20)
        whole = not f.read(1)
    text = head.decode("utf-8")
    lines = text.splitlines()
    if not whole and lines:
        lines = lines[:-1]  # the last line may be cut
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        if not rows:
            return _empty([]), whole
        header, body = rows[0], rows[1 : SAMPLE_ROWS + 1]
        return _typed([dict(zip(header, r, strict=False)) for r in body], header), whole and len(
            rows
        ) <= SAMPLE_ROWS + 1
    records: list[dict[str, Any]] = []
    for line in lines:
        if line.strip():
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
        if len(records) >= SAMPLE_ROWS:
            return _typed(records, []), False
    return _typed(records, []), whole


def _typed(records: list[dict[str, Any]], header: Iterable[str]) -> pa.Table:
    """Records as a table; a column whose every value is an integer (or its text) becomes int64."""
    names = list(dict.fromkeys([*header, *(k for r in records for k in r)]))
    columns: dict[str, pa.Array] = {}
    for name in names:
        values = [r.get(name) for r in records]
        values = [None if v in ("", None) else v for v in values]
        ints = [_as_int(v) for v in values]
        if all(i is not None for i, v in zip(ints, values, strict=True) if v is not None):
            columns[name] = pa.array(ints, pa.int64())
        else:
            columns[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    return pa.table(columns) if names else _empty([])


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _empty(names: list[str]) -> pa.Table:
    return pa.table({n: pa.array([], pa.string()) for n in names})
