"""Checks of the logs without a scan: Parquet footers (never the rows), or a CSV/JSON log's first rows.

Column names and types, row counts, and each column's statistics: nulls in a column that may not hold
them, negative ids or times, times that are µs or ns rather than ms (a log whose writer kept no
statistics is checked by the job itself); the ack types of the first row group or rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cursorkit.errors import InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.inputs import TOPIC, log_format, missing_column
from cursorkit.pipeline.preflight.text_sample import sample_text, text_files
from cursorkit.pipeline.schema import Column

__all__ = ["LogFacts", "read_facts"]

_NON_NEGATIVE = ("ledger_id", "entry_id", "publish_time", "deliver_at", "ack_time")
"""Integer columns the job refuses negative values in."""


@dataclass(frozen=True, slots=True)
class LogFacts:
    """What the checks learnt of one log without a scan."""

    path: str
    format: str
    """``parquet``, ``csv`` or ``json``."""
    columns: tuple[str, ...]
    """The log's columns that the pipeline reads (``topic`` included when present)."""
    rows: int | None
    """Rows of a Parquet log (from the footers); None for CSV/JSON."""
    empty: bool

    @property
    def has_topic(self) -> bool:
        """Whether the log has a ``topic`` column (a many-topic log)."""
        return TOPIC.name in self.columns


def read_facts(path: str, columns: tuple[Column, ...], what: str) -> LogFacts:
    """Checks a log from its footers (Parquet, local or on an object store) or first lines (CSV/JSON).

    Raises:
        InvalidInput: see :func:`check_rebuild`.
    """
    from cursorkit.pipeline.scan import plan_scan, scannable

    if scannable(path):
        scan = plan_scan(path, columns, what, topic=True)
        for col in scan.columns:
            found = scan.stats.get(col.name)
            if found is not None and found.complete:
                _check_values(what, path, col, found.nulls, found.low, found.high, "")
        if "ack_type" in scan.present and scan.tasks:
            _check_ack_types(what, path, _first_ack_types(scan.uri, scan.tasks[0].path))
        return LogFacts(path, "parquet", scan.present, scan.rows, scan.rows == 0)
    local = path.removeprefix("file://")
    if not Path(local).exists():
        raise InvalidInput(f"{what} log {path}: no such file or directory", source=path)
    fmt = log_format(local)
    files = text_files(local, fmt)
    if not files:
        raise InvalidInput(f"{what} log {path}: no {fmt.upper()} files", source=path)
    sample, complete = sample_text(files, fmt, what, path)
    names = set(sample.column_names)
    if fmt == "json" and not sample.num_rows:  # no record: no column either
        return LogFacts(path, fmt, (), None, True)
    present = []
    for col in (*columns, TOPIC):
        if col.name in names:
            present.append(col.name)
        elif col.required and (fmt == "csv" or complete):  # a CSV header names every column
            raise missing_column(what, path, col, names)
    for col in columns:
        if col.name in names:
            values = sample.column(col.name)
            low = high = None
            if pa.types.is_integer(values.type) and len(values) > values.null_count:
                bounds = pc.min_max(values)
                low, high = int(bounds["min"].as_py()), int(bounds["max"].as_py())
            _check_values(what, path, col, values.null_count, low, high, " in its first rows")
    if "ack_type" in names:
        _check_ack_types(what, path, sample.column("ack_type"))
    return LogFacts(path, fmt, tuple(present), None, sample.num_rows == 0)


def _check_values(
    what: str, path: str, col: Column, nulls: int, low: int | None, high: int | None, where: str
) -> None:
    """Refuses values the job would refuse, known from statistics (or a sample) without a scan."""
    if nulls and not col.nullable:
        raise InvalidInput(
            f"{what} log {path}: {nulls:,} row(s){where} where {col.name} is null",
            source=path,
            column=col.name,
        )
    if low is not None and low < 0 and col.name in _NON_NEGATIVE:
        raise InvalidInput(
            f"{what} log {path}: column {col.name!r} holds negative values{where} (min {low:,})",
            source=path,
            column=col.name,
        )
    if col.time and high is not None and high > schema.MAX_PLAUSIBLE_MS:
        raise InvalidInput(
            f"{what} log {path}: column {col.name!r} holds {high:,}{where}, after the year 3000 in ms: "
            f"{_likely_unit(high)}; write ms, or a Parquet timestamp (read as ms)",
            source=path,
            column=col.name,
        )


def _likely_unit(value: int) -> str:
    """What a too-large epoch time is likely counted in."""
    for unit, per_ms in (("µs", 1_000), ("ns", 1_000_000)):
        if value // per_ms <= schema.MAX_PLAUSIBLE_MS:
            return f"it looks like {unit} since the epoch"
    return "it is no epoch time in ms, µs or ns"


def _check_ack_types(what: str, path: str, values: pa.Array | pa.ChunkedArray) -> None:
    """Refuses ack types other than ``schema.ACK_TYPES`` in any case (nulls are the statistics' job)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    distinct = pc.unique(values.drop_null()).to_pylist()
    bad = sorted(str(v) for v in distinct if str(v).lower() not in schema.ACK_TYPES)
    if bad:
        shown = ", ".join(repr(v) for v in bad[:5]) + (" …" if len(bad) > 5 else "")
        raise InvalidInput(
            f"{what} log {path}: column 'ack_type' holds {shown}; allowed: "
            f"{' or '.join(repr(t) for t in schema.ACK_TYPES)} in any case (Pulsar's Individual, "
            "Cumulative; nack: a redelivery)",
            source=path,
            column="ack_type",
        )


def _first_ack_types(uri: str, file: str) -> pa.ChunkedArray:
    """The ``ack_type`` column of a Parquet file's first row group."""
    from cursorkit.pipeline.scan import filesystem

    fs, _ = filesystem(uri)
    try:
        with fs.open_input_file(file) as f:
            return pq.ParquetFile(f).read_row_group(0, columns=["ack_type"]).column("ack_type")
    except (OSError, pa.ArrowInvalid) as e:
        raise InvalidInput(f"ack log {uri}: cannot be read as Parquet: {e}", source=uri) from e
