"""Checks of a command's inputs made before Spark or any session starts, each failing in one line.

A mistake found after Spark has started costs its start-up (20 s to a minute) and can arrive wrapped
in a Java trace; found here it costs milliseconds. Only what is cheap is read:

- paths: the logs exist and hold files; the output is a place a run may write (local for a one-topic
  log, local or ``s3://`` for a many-topic log);
- Parquet footers (never the rows): column names and types, row counts, and each column's statistics:
  nulls in a column that may not hold them, negative ids or times, times that are µs or ns rather
  than ms (a log whose writer kept no statistics is checked by the job itself, as before);
- the first row group of the ack log's ``ack_type`` (or the first lines of a CSV/JSON log): values
  other than ``individual``/``cumulative`` in any case;
- a TCP connect to a ``spark://`` master and to the ``--cursor-store`` ZooKeeper ensemble, and the
  Java that Spark's launcher would run.

The one-topic and the many-topic jobs share these checks: :func:`check_rebuild` also says which job
the logs are for (a ``topic`` column or not). Everything only the data shows (duplicate positions,
gaps in a ledger, acks of unknown positions) is still found by the job, with a sample row.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.inputs import TOPIC, log_format, missing_column
from cursorkit.pipeline.schema import Column

__all__ = [
    "CONNECT_TIMEOUT_S",
    "LogFacts",
    "RebuildPlan",
    "check_demo",
    "check_generate",
    "check_java",
    "check_master",
    "check_output_dir",
    "check_rebuild",
    "check_zookeeper",
    "read_facts",
    "unreachable",
]

CONNECT_TIMEOUT_S = 2.0
"""How long a Spark master or a ZooKeeper server has to accept a TCP connection."""

SAMPLE_ROWS = 10_000
"""Rows of a CSV/JSON log read to check its values (the first block of each file, at most)."""

_LOCAL_MASTER = re.compile(r"^local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?$|^local-cluster\[\d+,\s*\d+,\s*\d+\]$")
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


@dataclass(frozen=True, slots=True)
class RebuildPlan:
    """The checked inputs of a rebuild and the job they are for."""

    messages: LogFacts
    acks: LogFacts | None
    many: bool
    """True: logs with a topic column, for the many-topic job (``cluster.rebuild_topics``)."""


# --------------------------------------------------------------------------------------- commands


def check_rebuild(
    messages: str,
    acks: str | None,
    out: str,
    *,
    master: str | None = None,
    cursor_store: str | None = None,
    cursor_objects: str | None = None,
    now_ms: int | None = None,
    allow_empty: bool = False,
) -> RebuildPlan:
    """Every check of ``cursorkit rebuild`` that needs no Spark, cheapest first; returns the plan.

    Raises:
        InvalidInput: a log is missing, unreadable, lacks a column, has a column of the wrong type or
            values the job would refuse (footer statistics, the first row group's ack types), or the
            message log is empty without ``allow_empty``.
        InvalidArgument: the output cannot take this run, an option contradicts the logs, or the
            Spark master or the ZooKeeper ensemble does not accept a connection.
    """
    msgs = read_facts(messages, schema.MESSAGE_COLUMNS, "message")
    ack_facts = read_facts(acks, schema.ACK_COLUMNS, "ack") if acks is not None else None
    many = msgs.has_topic
    if acks is not None and ack_facts is not None and ack_facts.has_topic != many:
        if many:
            raise InvalidInput(
                f"ack log {acks}: no topic column, but the message log has one", source=acks, column="topic"
            )
        raise InvalidInput(
            f"ack log {acks}: a topic column, but the message log {messages} has none (a one-topic log)",
            source=acks,
            column="topic",
        )
    if msgs.empty:
        if not allow_empty:
            raise InvalidInput(
                f"message log {messages}: no rows, so there is nothing to rebuild "
                "(--allow-empty accepts an empty log)",
                source=messages,
            )
        if not many and now_ms is None:
            raise InvalidArgument(
                f"--allow-empty: the message log {messages} is empty, so it has no last publish_time "
                "to rebuild at; give --now MS"
            )
    if many:
        _check_many_output(out)
    else:
        _check_one_topic_locations(messages, acks, out)
    if cursor_objects is not None and cursor_store is None:
        raise InvalidArgument("--cursor-objects applies with --cursor-store only")
    if cursor_store is not None:
        check_zookeeper(cursor_store)
    check_master(master)
    check_java()
    return RebuildPlan(msgs, ack_facts, many)


def check_generate(out: str | os.PathLike[str]) -> None:
    """``cursorkit generate``: ``out`` is a directory (or can be made one) without logs in it.

    Raises:
        InvalidArgument: ``out`` is a file, already holds ``messages/`` or ``acks/``, or cannot be made.
    """
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise InvalidArgument(f"--out {root} exists and is not a directory")
    for name in ("messages", "acks"):
        if (root / name).exists():
            raise InvalidArgument(f"--out {root}: {root / name} already exists; generate writes a new log")
    _check_creatable(root, "--out")


def check_demo(directory: str | os.PathLike[str], master: str | None) -> None:
    """``cursorkit demo``: its directory can take the demo's logs and rebuild, and the master answers.

    Raises:
        InvalidArgument: ``directory`` is a file or holds something other than an earlier demo's
            rebuild under ``rebuild/``, or the master does not accept a connection.
    """
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise InvalidArgument(f"--dir {root} exists and is not a directory")
    check_output_dir(root / "rebuild", "--dir")
    check_master(master)
    check_java()


def check_output_dir(out: Path, option: str = "--out", *, ignore: Iterable[str] = ()) -> None:
    """A local rebuild output: absent, empty or an earlier rebuild's, and creatable.

    Entries named in ``ignore`` do not make the directory non-empty (a many-topic run's staging).

    Raises:
        InvalidArgument: ``out`` is a file, a non-empty directory without a ``manifest.json``, or
            its nearest existing parent is not a writable directory.
    """
    from cursorkit.pipeline.load import MANIFEST_FILE

    if out.exists():
        if not out.is_dir():
            raise InvalidArgument(f"{option} {out} exists and is not a directory")
        skip = set(ignore)
        others = [p.name for p in out.iterdir() if p.name not in skip]
        if others and MANIFEST_FILE not in others:
            raise InvalidArgument(f"{option} {out} is a non-empty directory that is not a rebuild's output")
    _check_creatable(out, option)


# ------------------------------------------------------------------------------------------- logs


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
    files = _text_files(local, fmt)
    if not files:
        raise InvalidInput(f"{what} log {path}: no {fmt.upper()} files", source=path)
    sample, complete = _sample_text(files, fmt, what, path)
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
            "Cumulative)",
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


def _text_files(path: str, fmt: str) -> list[Path]:
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


def _sample_text(files: list[Path], fmt: str, what: str, path: str) -> tuple[pa.Table, bool]:
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


# ------------------------------------------------------------------------------------------ outputs


def _check_one_topic_locations(messages: str, acks: str | None, out: str) -> None:
    """A one-topic rebuild reads and writes local paths: the driver writes its output itself."""
    from cursorkit.pipeline.output import is_object_store

    for option, value in (("--messages", messages), ("--acks", acks), ("--out", out)):
        if value is not None and is_object_store(value):
            raise InvalidArgument(
                f"{option} {value}: a one-topic log (no topic column) is read and written on local paths; "
                "object stores take many-topic logs (with a topic column)"
            )
    check_output_dir(Path(out.removeprefix("file://")))


def _check_many_output(out: str) -> None:
    """A many-topic output: a local directory or an object-store prefix that is absent or a rebuild's."""
    from cursorkit.pipeline.load import MANIFEST_FILE
    from cursorkit.pipeline.output import LEASE_FILE, RUNS_DIR, is_object_store, open_output

    if not is_object_store(out):
        check_output_dir(Path(out.removeprefix("file://")), ignore=(RUNS_DIR, LEASE_FILE))
        return
    output = open_output(out)
    try:
        kind = output.kind()
        names = output.names() if kind == "dir" else []
    except (OSError, pa.ArrowException) as e:
        raise InvalidArgument(f"--out {out}: cannot be listed: {e}") from e
    if kind == "file":
        raise InvalidArgument(f"--out {out} exists and is not a directory")
    others = [n for n in names if n not in (RUNS_DIR, LEASE_FILE)]
    if others and MANIFEST_FILE not in others:
        raise InvalidArgument(f"--out {out} is a non-empty prefix that is not a rebuild's output")


def _check_creatable(path: Path, option: str) -> None:
    """``path`` exists, or its nearest existing parent is a directory this process may write in."""
    parent = path.absolute()
    while not parent.exists():
        parent = parent.parent
    if parent == path.absolute():
        return
    if not parent.is_dir():
        raise InvalidArgument(f"{option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{option} {path}: cannot create it, {parent} is not writable")


# ------------------------------------------------------------------------------------------ services


def check_master(master: str | None) -> None:
    """A ``spark://`` master (any of an HA list) accepts a TCP connection; ``local[...]`` is well formed.

    ``yarn``, ``k8s://…`` and other masters pass through to Spark.

    Raises:
        InvalidArgument: a malformed ``local`` master, or no master of the list answers (the message
            names each address and why).
    """
    if master is None:
        return
    if master.startswith("local"):
        if not _LOCAL_MASTER.fullmatch(master):
            raise InvalidArgument(
                f"--master {master}: expected local, local[N], local[*] or local[N,F] (max failures)"
            )
        return
    if not master.startswith("spark://"):
        return
    addresses = [a for a in master.removeprefix("spark://").rstrip("/").split(",") if a]
    if not addresses:
        raise InvalidArgument(f"--master {master}: no host:port after spark://")
    failures = []
    for address in addresses:
        host, port = _host_port(address, 7077, f"--master {master}")
        why = unreachable(host, port)
        if why is None:
            return
        failures.append(f"{host}:{port} ({why})")
    raise InvalidArgument(f"--master {master}: no Spark master answers at {', '.join(failures)}")


def check_java() -> None:
    """The Java that Spark's launcher would run exists: ``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Nothing is checked under spark-submit, whose JVM is already running.

    Raises:
        InvalidArgument: no such Java (the message says where it was looked for).
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        if not os.access(Path(home) / "bin" / "java", os.X_OK):
            raise InvalidArgument(
                f"Spark needs Java 17+, and JAVA_HOME={home} has no bin/java: set JAVA_HOME to a Java install"
            )
        return
    if shutil.which("java") is None:
        raise InvalidArgument("Spark needs Java 17+: no java on PATH and JAVA_HOME is not set")


def check_zookeeper(location: str) -> None:
    """``--cursor-store zk://hosts[/chroot]`` parses and a server of the ensemble accepts a connection.

    Raises:
        InvalidArgument: the location is malformed, or no server answers (naming each address).
    """
    from cursorkit.stores.location import parse_zk_root

    try:
        root = parse_zk_root(location)
    except InvalidArgument as e:
        raise InvalidArgument(f"--cursor-store must be zk://host:port[/chroot] ({e})") from None
    failures = []
    for address in root.hosts.split(","):
        host, port = _host_port(address, 2181, f"--cursor-store {location}")
        why = unreachable(host, port)
        if why is None:
            return
        failures.append(f"{host}:{port} ({why})")
    raise InvalidArgument(f"--cursor-store {location}: no ZooKeeper answers at {', '.join(failures)}")


def unreachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None if ``host:port`` accepts a TCP connection within ``timeout`` s, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as e:
        return f"unknown host: {e.strerror}"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return (e.strerror or str(e)).lower()


def _host_port(address: str, default: int, where: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` split, with ``default`` when no port is given."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif address.count(":") == 1:
        host, _, port_text = address.partition(":")
    else:
        host, port_text = address, ""
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        raise InvalidArgument(f"{where}: {address!r} is not host:port") from None
    if not host or not 0 < port < 65536:
        raise InvalidArgument(f"{where}: {address!r} is not host:port")
    return host, port
