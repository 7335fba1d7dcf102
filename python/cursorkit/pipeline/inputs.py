"""Reading the input logs with Spark and checking their columns before any job runs."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cursorkit.errors import InvalidInput
from cursorkit.pipeline.schema import Column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "TOPIC",
    "ddl",
    "log_format",
    "missing_column",
    "nanosecond_columns",
    "parquet_files",
    "read_log",
    "spark_type",
    "wrong_type",
]

_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}


def log_format(path: str) -> str:
    """``parquet``, ``csv`` or ``json`` by the path's suffix or, for a directory, its files' suffixes."""
    p = Path(path)
    if p.suffix.lower() in _SUFFIXES:
        return _SUFFIXES[p.suffix.lower()]
    if p.is_dir():
        found = {q.suffix.lower() for q in p.rglob("*") if q.is_file() and not q.name.startswith((".", "_"))}
        for suffix, fmt in _SUFFIXES.items():
            if suffix in found:
                return fmt
    return "parquet"


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


TOPIC = Column("topic", pa.string(), required=False, nullable=False, doc="Pulsar's full topic name")
"""The optional column of a many-topic log: each row's topic (a partition is a topic of its own)."""


def read_log(
    spark: SparkSession,
    path: str | os.PathLike[str],
    columns: tuple[Column, ...],
    what: str,
    *,
    topic: bool = False,
) -> DataFrame:
    """The log at ``path`` with exactly ``columns`` (cast to their types; absent optional ones null).

    With ``topic``, a ``topic`` column the log has is kept too (checked to be a string column). A
    time column of a timestamp type (any unit; a zone-less one taken as UTC) is read as its epoch ms.

    Raises:
        InvalidInput: the path is missing, a required column is absent, or a column has a type that
            cannot hold its values (a string id, a float time); the message names the column, its
            type and a sample row.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text = os.fspath(path)
    local = text.removeprefix("file://")
    if _is_local(text) and not Path(local).exists():
        raise InvalidInput(f"{what} log {text}: no such file or directory", source=text)
    fmt = log_format(local) if _is_local(text) else "parquet"
    nanos = nanosecond_columns(local, columns) if fmt == "parquet" and _is_local(text) else set()
    if nanos:  # Spark refuses TIMESTAMP(NANOS) unless read as the raw int64 of ns, divided below
        spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
    reader = spark.read
    if fmt == "csv":
        df = reader.option("header", "true").option("inferSchema", "true").csv(text)
    elif fmt == "json":
        df = reader.json(text)
    else:
        df = reader.parquet(text)
    have = {f.name: f.dataType for f in df.schema.fields}
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    out = []
    wanted = (*columns, TOPIC) if topic and TOPIC.name in have else columns
    for col in wanted:
        kind = have.get(col.name)
        if kind is None:
            if col.required:
                raise missing_column(what, text, col, have)
            out.append(F.lit(None).cast(spark_type(col)).alias(col.name))
            continue
        if col.time and isinstance(kind, T.TimestampType | T.TimestampNTZType):
            out.append(_epoch_ms(col.name, kind).cast(spark_type(col)).alias(col.name))
            continue
        if col.name in nanos and isinstance(kind, T.LongType):
            out.append(F.expr(f"`{col.name}` div 1000000").cast(spark_type(col)).alias(col.name))
            continue
        wants_int = pa.types.is_integer(col.type)
        ok = isinstance(kind, ints) if wants_int else isinstance(kind, T.StringType)
        if isinstance(kind, T.NullType):  # an all-null column read from JSON/CSV
            ok = True
        if not ok:
            sample = df.select(*have).first()
            raise wrong_type(
                what, text, col, kind.simpleString(), sample.asDict() if sample is not None else None
            )
        out.append(F.col(col.name).cast(spark_type(col)).alias(col.name))
    return df.select(*out)


def _epoch_ms(name: str, kind: Any) -> Any:
    """A Spark timestamp column as ms since the epoch (a zone-less one read as UTC)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(kind, T.TimestampNTZType):
        return F.expr(f"timestampdiff(MILLISECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', `{name}`)")
    return F.unix_millis(F.col(name))


def parquet_files(path: str) -> list[str]:
    """The data files of a local Parquet log (a file, or a directory's files without ``.``/``_`` names)."""
    p = Path(path)
    if p.is_file():
        return [str(p)]
    if not p.is_dir():
        return []
    return sorted(
        str(q)
        for q in p.rglob("*")
        if q.is_file() and not any(part.startswith((".", "_")) for part in q.relative_to(p).parts)
    )


def nanosecond_columns(path: str, columns: Iterable[Column]) -> set[str]:
    """Time columns that the first file of a local Parquet log stores as TIMESTAMP(NANOS)."""
    import pyarrow.parquet as pq

    files = parquet_files(path)
    if not files:
        return set()
    try:
        schema = pq.read_schema(files[0])
    except (OSError, pa.ArrowInvalid):
        return set()  # Spark's reader says what is wrong with the file
    have = {f.name: f.type for f in schema}
    return {
        c.name
        for c in columns
        if c.time
        and c.name in have
        and pa.types.is_timestamp(have[c.name])
        and getattr(have[c.name], "unit", "") == "ns"
    }


def spark_type(col: Column) -> str:
    """The Spark SQL type name of a log column."""
    return {"int64": "long", "int32": "int", "string": "string"}[str(col.type)]


def ddl(columns: Iterable[Column]) -> str:
    """``name type, ...`` of ``columns``, the schema string Spark takes."""
    return ", ".join(f"{c.name} {spark_type(c)}" for c in columns)


def missing_column(what: str, source: str, col: Column, have: Iterable[str]) -> InvalidInput:
    """The error for a required column the log lacks (naming the columns it has)."""
    return InvalidInput(
        f"{what} log {source}: missing column {col.name!r} ({col.doc or col.type}); it has {sorted(have)}",
        source=source,
        column=col.name,
    )


def wrong_type(
    what: str, source: str, col: Column, kind: str, row: dict[str, Any] | None = None
) -> InvalidInput:
    """The error for a column whose type (``kind``) cannot hold its values."""
    return InvalidInput(
        f"{what} log {source}: column {col.name!r} is {kind}, expected "
        f"{_expected(col)} ({col.doc or col.type})",
        source=source,
        column=col.name,
        row=row,
    )


def _expected(col: Column) -> str:
    """What a column's values may be, for error messages."""
    if col.time:
        return "an integer or a timestamp"
    return "an integer" if pa.types.is_integer(col.type) else "a string"
