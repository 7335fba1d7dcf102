"""Wrong inputs through the CLI fail in one line, before Spark starts (``pipeline/preflight/``).

Every case runs ``cursorkit rebuild`` (or ``generate``/``demo``) in this process with Spark's session
factory replaced by one that fails the test: the error must come from the checks made before any
session, within 2 s, as one line naming what to fix, with exit status 2. The checks that let good
input through (timestamp columns, Pulsar's capitalised ack types, many-topic logs) are tested here
too, without Spark; what the jobs then make of such input is in the Spark tests at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.pipeline import schema, session
from cursorkit.pipeline.cli import main, parser_with_commands
from cursorkit.pipeline.preflight.commands import check_rebuild
from cursorkit.pipeline.preflight.logs import read_facts
from cursorkit.pipeline.preflight.outputs import check_output_dir
from cursorkit.pipeline.preflight.services import check_master, check_zookeeper

T0 = 1_767_225_600_000
"""2026-01-01 in ms: the logs' first publish time."""


def messages(n: int = 20, **replace: Any) -> pa.Table:
    """A valid one-ledger message log of ``n`` entries; ``replace`` swaps or adds columns."""
    cols: dict[str, Any] = {
        "ledger_id": pa.array([7] * n, pa.int64()),
        "entry_id": pa.array(range(n), pa.int64()),
        "publish_time": pa.array([T0 + i for i in range(n)], pa.int64()),
        "deliver_at": pa.array([None] * n, pa.int64()),
    }
    cols.update(replace)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def acks(n: int = 10, **replace: Any) -> pa.Table:
    """A valid ack log: sub-a acks the first ``n`` entries one by one."""
    cols: dict[str, Any] = {
        "subscription": pa.array(["sub-a"] * n),
        "ledger_id": pa.array([7] * n, pa.int64()),
        "entry_id": pa.array(range(n), pa.int64()),
        "ack_type": pa.array(["individual"] * n),
        "ack_time": pa.array([T0 + 5] * n, pa.int64()),
    }
    cols.update(replace)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def write(path: Path, table: pa.Table) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting Spark fails the test: every error here must come before it."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    """Exit status, stderr and seconds of one CLI run."""
    t0 = time.perf_counter()
    status = main(argv)
    elapsed = time.perf_counter() - t0
    return status, capsys.readouterr().err, elapsed


Case = Callable[[Path], tuple[list[str], str]]
"""Builds a case's files under a directory; returns its argv and a fragment of the one line."""


def _missing_messages(d: Path) -> tuple[list[str], str]:
    return [
        "rebuild",
        "--messages",
        str(d / "nope"),
        "--out",
        str(d / "out"),
    ], "nope: no such file or directory"


def _missing_acks(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--acks", str(d / "gone"), "--out", str(d / "out")]
    return argv, "ack log " + str(d / "gone") + ": no such file or directory"


def _renamed_columns(d: Path) -> tuple[list[str], str]:
    t = messages().rename_columns(["ledger", "entry", "publish_time", "deliver_at"])
    m = write(d / "m.parquet", t)
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "missing column 'ledger_id'"


def _string_ids(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(entry_id=pa.array([str(i) for i in range(20)])))
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "column 'entry_id' is string"


def _micros(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(publish_time=pa.array([(T0 + i) * 1000 for i in range(20)])))
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "'publish_time' holds 1,767,225,600,019,000"


def _nanos_ack_time(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    a = write(d / "a.parquet", acks(ack_time=pa.array([(T0 + 5) * 1_000_000] * 10, pa.int64())))
    argv = ["rebuild", "--messages", m, "--acks", a, "--out", str(d / "out")]
    return argv, "'ack_time' holds 1,767,225,600,005,000,000, after the year 3000 in ms: it looks like ns"


def _negative_entry(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(entry_id=pa.array([-1, *range(1, 20)], pa.int64())))
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "'entry_id' holds negative values (min -1)"


def _null_ack_type(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    a = write(d / "a.parquet", acks(ack_type=pa.array(["individual"] * 9 + [None])))
    argv = ["rebuild", "--messages", m, "--acks", a, "--out", str(d / "out")]
    return argv, "1 row(s) where ack_type is null"


def _bad_ack_type(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    a = write(d / "a.parquet", acks(ack_type=pa.array(["Individual"] * 9 + ["ACK"])))
    argv = ["rebuild", "--messages", m, "--acks", a, "--out", str(d / "out")]
    return argv, "column 'ack_type' holds 'ACK'; allowed: 'individual' or 'cumulative' or 'nack' in any case"


def _one_topic_to_s3(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", "s3://bucket/state"]
    return argv, "--out s3://bucket/state: a one-topic log (no topic column) is read and written on local"


def _dead_master(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    port = free_port()
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--master", f"spark://127.0.0.1:{port}"]
    return argv, f"no Spark master answers at 127.0.0.1:{port} (connection refused)"


def _malformed_local_master(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--master", "local[two]"]
    return argv, "--master local[two]: expected local, local[N]"


def _dead_zookeeper(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    port = free_port()
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--cursor-store", f"zk://127.0.0.1:{port}"]
    return argv, f"no ZooKeeper answers at 127.0.0.1:{port} (connection refused)"


def _malformed_zookeeper(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--cursor-store", "zk://"]
    return argv, "--cursor-store must be zk://host:port[/chroot]"


def _empty_log(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(0))
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "no rows, so there is nothing to rebuild"


def _empty_log_without_now(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(0))
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--allow-empty"]
    return argv, "no last publish_time to rebuild at; give --now MS"


def _out_is_a_file(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    (d / "out").write_text("x")
    return ["rebuild", "--messages", m, "--out", str(d / "out")], "exists and is not a directory"


def _out_is_foreign(d: Path) -> tuple[list[str], str]:
    m = write(d / "logs" / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", str(d / "logs")]
    return argv, "is a non-empty directory that is not a rebuild's output"


def _acks_without_topic(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages(topic=pa.array(["persistent://t/n/a"] * 20)))
    a = write(d / "a.parquet", acks())
    argv = ["rebuild", "--messages", m, "--acks", a, "--out", str(d / "out")]
    return argv, "no topic column, but the message log has one"


def _acks_with_topic(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    a = write(d / "a.parquet", acks(topic=pa.array(["persistent://t/n/a"] * 10)))
    argv = ["rebuild", "--messages", m, "--acks", a, "--out", str(d / "out")]
    return argv, "a topic column, but the message log"


def _csv_missing_column(d: Path) -> tuple[list[str], str]:
    (d / "m.csv").write_text("ledger_id,entry,publish_time\n1,0,1767225600000\n")
    return ["rebuild", "--messages", str(d / "m.csv"), "--out", str(d / "out")], "missing column 'entry_id'"


def _csv_micros(d: Path) -> tuple[list[str], str]:
    (d / "m.csv").write_text("ledger_id,entry_id,publish_time\n1,0,1767225600000000\n")
    argv = ["rebuild", "--messages", str(d / "m.csv"), "--out", str(d / "out")]
    return argv, "holds 1,767,225,600,000,000 in its first rows, after the year 3000 in ms: it looks like µs"


def _json_bad_ack_type(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    row = '{"subscription": "s", "ledger_id": 7, "entry_id": 0, "ack_type": "single", "ack_time": 1}'
    (d / "a.json").write_text(row + "\n")
    argv = ["rebuild", "--messages", m, "--acks", str(d / "a.json"), "--out", str(d / "out")]
    return argv, "column 'ack_type' holds 'single'"


def _objects_without_store(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", str(d / "out"), "--cursor-objects", "s3://b/c"]
    return argv, "--cursor-objects applies with --cursor-store only"


def _bad_conf(d: Path) -> tuple[list[str], str]:
    m = write(d / "m.parquet", messages())
    return [
        "rebuild",
        "--messages",
        m,
        "--out",
        str(d / "out"),
        "--conf",
        "novalue",
    ], "--conf takes key=value"


def _generate_into_a_file(d: Path) -> tuple[list[str], str]:
    (d / "logs").write_text("x")
    return ["generate", "--out", str(d / "logs"), "--messages", "10"], "exists and is not a directory"


def _demo_dead_master(d: Path) -> tuple[list[str], str]:
    port = free_port()
    argv = ["demo", "--dir", str(d / "demo"), "--master", f"spark://127.0.0.1:{port}"]
    return argv, f"no Spark master answers at 127.0.0.1:{port}"


CASES: list[Case] = [
    _missing_messages,
    _missing_acks,
    _renamed_columns,
    _string_ids,
    _micros,
    _nanos_ack_time,
    _negative_entry,
    _null_ack_type,
    _bad_ack_type,
    _one_topic_to_s3,
    _dead_master,
    _malformed_local_master,
    _dead_zookeeper,
    _malformed_zookeeper,
    _empty_log,
    _empty_log_without_now,
    _out_is_a_file,
    _out_is_foreign,
    _acks_without_topic,
    _acks_with_topic,
    _csv_missing_column,
    _csv_micros,
    _json_bad_ack_type,
    _objects_without_store,
    _bad_conf,
    _generate_into_a_file,
    _demo_dead_master,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.strip("_") for c in CASES])
@pytest.mark.usefixtures("no_spark")
def test_wrong_input_is_one_line_before_spark(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, fragment = case(tmp_path)
    status, err, elapsed = run_cli(argv, capsys)
    lines = err.splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith(f"cursorkit {argv[0]}: "), err
    assert fragment in lines[0], lines[0]
    assert elapsed < 2.0, f"{elapsed:.2f} s"
    assert not (tmp_path / "out").is_dir() and not (tmp_path / "demo").exists()  # nothing written


@pytest.mark.usefixtures("no_spark")
def test_no_java_is_one_line_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    m = write(tmp_path / "m.parquet", messages())
    status, err, elapsed = run_cli(["rebuild", "--messages", m, "--out", str(tmp_path / "out")], capsys)
    assert status == 2 and elapsed < 2.0
    assert err.splitlines() == [
        f"cursorkit rebuild: InvalidArgument: Spark needs Java 17+, and JAVA_HOME={tmp_path / 'no-jdk'} "
        "has no bin/java: set JAVA_HOME to a Java install"
    ]


def test_spark_that_does_not_start_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the checks cannot see (a JVM that dies, a refused setting): Spark's reason, one line."""
    from pyspark.errors import PySparkRuntimeError

    def gateway_exits(*_: Any, **__: Any) -> Any:
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr(session, "spark_session", gateway_exits)
    m = write(tmp_path / "m.parquet", messages())
    argv = ["rebuild", "--messages", m, "--out", str(tmp_path / "out"), "--master", "local[2]"]
    status, err, _ = run_cli(argv, capsys)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(
        "cursorkit rebuild: InvalidArgument: Spark did not start on local[2]: [JAVA_GATEWAY_EXITED] "
        "Java gateway process exited before sending its port number"
    )


def test_the_summary_names_a_report_only_when_there_is_one(tmp_path: Path) -> None:
    from rich.console import Console

    from cursorkit.pipeline.display import print_summary
    from cursorkit.pipeline.results import RebuildSummary

    summary = RebuildSummary(topic="t", now_ms=T0, out_dir=str(tmp_path), master="local[2]")
    console = Console(width=200, record=True)
    print_summary(console, summary)
    assert f"output: {tmp_path}" in console.export_text() and "report:" not in console.export_text()
    (tmp_path / "report.html").write_text("<html>")
    print_summary(console, summary)
    assert f"report: {tmp_path / 'report.html'}" in console.export_text()


@pytest.mark.usefixtures("no_spark")
def test_kazoo_and_py4j_loggers_are_quieted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    logging.getLogger("kazoo").setLevel(logging.NOTSET)
    argv, _ = _missing_messages(tmp_path)
    assert run_cli(argv, capsys)[0] == 2
    assert logging.getLogger("kazoo").getEffectiveLevel() == logging.ERROR
    assert logging.getLogger("py4j").getEffectiveLevel() == logging.CRITICAL


# --------------------------------------------------------------------------- what the checks let through


def test_good_logs_pass_and_say_which_job(tmp_path: Path) -> None:
    m = write(tmp_path / "m.parquet", messages())
    a = write(tmp_path / "a.parquet", acks(ack_type=pa.array(["Individual"] * 5 + ["CUMULATIVE"] * 5)))
    plan = check_rebuild(m, a, str(tmp_path / "out"), master="local[2]")
    assert not plan.many and plan.messages.rows == 20 and plan.acks is not None and plan.acks.rows == 10
    topics = pa.array(["persistent://t/n/a"] * 20)
    mm = write(tmp_path / "many" / "m.parquet", messages(topic=topics))
    aa = write(tmp_path / "many" / "a.parquet", acks(topic=topics.slice(0, 10)))
    assert check_rebuild(mm, aa, str(tmp_path / "out2")).many
    empty = write(tmp_path / "e.parquet", messages(0))
    plan = check_rebuild(empty, None, str(tmp_path / "out3"), allow_empty=True, now_ms=T0)
    assert plan.messages.empty and plan.messages.rows == 0


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamp_time_columns_pass(unit: str, tmp_path: Path) -> None:
    """A Parquet timestamp of any unit is read as epoch ms: its statistics are not taken for ms."""
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    stamps = pa.array([int((T0 + 1000 * i) * per_ms) for i in range(20)], pa.int64()).cast(pa.timestamp(unit))
    m = write(tmp_path / "m.parquet", messages(publish_time=stamps))
    a = write(tmp_path / "a.parquet", acks(ack_time=stamps.slice(0, 10).cast(pa.timestamp(unit, "UTC"))))
    assert not check_rebuild(m, a, str(tmp_path / "out")).many


def test_statistics_missing_fall_back_to_the_job(tmp_path: Path) -> None:
    """Without footer statistics a µs column is left to the job's own check (no false alarm here)."""
    path = tmp_path / "m.parquet"
    t = messages(publish_time=pa.array([(T0 + i) * 1000 for i in range(20)]))
    pq.write_table(t, path, write_statistics=False)
    facts = read_facts(str(path), schema.MESSAGE_COLUMNS, "message")
    assert facts.rows == 20
    pq.write_table(t, path)
    with pytest.raises(InvalidInput, match="looks like µs"):
        read_facts(str(path), schema.MESSAGE_COLUMNS, "message")


def test_master_and_zookeeper_checks(tmp_path: Path) -> None:
    for master in (None, "local", "local[4]", "local[*]", "local[2,3]", "yarn", "k8s://https://k:443"):
        check_master(master)
    with socket.socket() as listener:  # something that accepts: the check passes
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        check_master(f"spark://127.0.0.1:{free_port()},127.0.0.1:{port}")  # HA: one answers
        check_zookeeper(f"zk://127.0.0.1:{port}/chroot")
    dead = free_port()
    with pytest.raises(InvalidArgument, match=f"127.0.0.1:{dead}"):
        check_zookeeper(f"zk://127.0.0.1:{dead}")
    with pytest.raises(InvalidArgument, match="unknown host"):
        check_master("spark://no-such-host.invalid:7077")
    with pytest.raises(InvalidArgument, match="is not host:port"):
        check_master("spark://h:port")


def test_output_checks(tmp_path: Path) -> None:
    out = tmp_path / "state"
    check_output_dir(out)  # absent: fine
    (out / "runs").mkdir(parents=True)
    check_output_dir(out, ignore=("runs",))  # a killed many-topic run's staging only
    with pytest.raises(InvalidArgument, match="not a rebuild's output"):
        check_output_dir(out)
    (out / "manifest.json").write_text("{}")
    check_output_dir(out)  # an earlier output: replaced
    (tmp_path / "plain").write_text("x")
    with pytest.raises(InvalidArgument, match="plain is not a directory"):
        check_output_dir(tmp_path / "plain" / "state")


# --------------------------------------------------------------------------------------------- help


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from cursorkit.cli import parser

    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no commands")


def test_help_shows_each_default_once_and_never_none() -> None:
    for name, sub in _subparsers().items():
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.help or action.help == argparse.SUPPRESS:
                continue
            text = formatter._expand_help(action)
            assert "default: None" not in text and "default: []" not in text, (name, action.dest, text)
            assert text.count("default:") <= 1, (name, action.dest, text)
            if action.required:
                assert "default:" not in text, (name, action.dest, text)
    rebuild = " ".join(_subparsers()["rebuild"].format_help().split())
    assert "(default: 300000)" in rebuild and "(s3://...) for logs with a topic column" in rebuild


def test_parser_builds_without_spark() -> None:
    assert parser_with_commands()[0].prog == "cursorkit"


# ------------------------------------------------------------------------------------- the jobs, Spark


def _timestamped(t: pa.Table, column: str, unit: str, tz: str | None = None) -> pa.Table:
    per_ms = {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    i = t.column_names.index(column)
    values = pa.array([v * per_ms for v in t.column(column).to_pylist()], pa.int64())
    return t.set_column(i, column, values.cast(pa.timestamp(unit, tz)))


@pytest.mark.spark
def test_timestamps_and_pulsar_ack_types_rebuild_the_same_state(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Timestamp time columns (ms, µs, ns) and ``Individual``/``CUMULATIVE`` give the ms-log's state.

    Through the CLI in this process (the session is the tests' own): the one-topic job reads with
    Spark's reader, the many-topic job with the workers' scan; both equal the single-process
    reference computed from the plain ms log.
    """
    from cursorkit.pipeline.generate import generate
    from cursorkit.pipeline.load import topic_root
    from cursorkit.pipeline.reference import rebuild_reference
    from cursorkit.pipeline.verify import verify_rebuild

    g = generate(
        tmp_path / "logs", messages=1500, ledgers=3, keys=50, delayed_fraction=0.3, subscriptions=2, seed=5
    )
    m, a = pq.read_table(g.messages_path), pq.read_table(g.acks_path)
    kinds = a.column("ack_type").to_pylist()
    assert set(kinds) == {"individual", "cumulative"}
    pulsar = pa.array([v.upper() if v == "cumulative" else v.title() for v in kinds])
    a_pulsar = a.set_column(a.column_names.index("ack_type"), "ack_type", pulsar)
    one_m = write(tmp_path / "one" / "m.parquet", _timestamped(m, "publish_time", "ms"))
    one_a = write(tmp_path / "one" / "a.parquet", _timestamped(a_pulsar, "ack_time", "ns"))
    topic = "persistent://public/default/topic"
    many_m = _timestamped(m, "publish_time", "us", "UTC")
    many_m = many_m.append_column("topic", pa.array([topic] * m.num_rows))
    mm = write(tmp_path / "many" / "m.parquet", many_m)
    ma = write(
        tmp_path / "many" / "a.parquet", a_pulsar.append_column("topic", pa.array([topic] * a.num_rows))
    )
    local = [
        "--master",
        "local[2]",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--min-index-count-per-bucket",
        "200",
    ]
    one, many = tmp_path / "out-one", tmp_path / "out-many"
    assert (
        main(["rebuild", "--messages", one_m, "--acks", one_a, "--out", str(one), "--no-report", *local]) == 0
    )
    printed = capsys.readouterr().out
    assert "write summary" in printed and "write report" not in printed and "report:" not in printed
    assert main(["rebuild", "--messages", mm, "--acks", ma, "--out", str(many), *local]) == 0
    printed = capsys.readouterr().out
    report = next(line for line in printed.splitlines() if "report:" in line).split("report: ")[1].strip()
    assert Path(report).is_file() and "/runs/" in report
    html = Path(report).read_text()
    assert 'id="verdict"' in html and "cursorkit rebuild --messages" in html
    ref = rebuild_reference(g.messages_path, g.acks_path, min_index_count_per_bucket=200)
    for out in (one, topic_root(many, topic)):
        check = verify_rebuild(out, ref)
        assert check.ok and check.cursors == 2 and check.buckets > 1, (out, check.problems)


@pytest.mark.spark
def test_an_empty_log_has_no_moment_to_rebuild_at(spark: Any, tmp_path: Path) -> None:
    """The job itself (a library call, no preflight): an empty log without now_ms is refused, not 1970."""
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild

    m = write(tmp_path / "m.parquet", messages(0))
    with pytest.raises(InvalidInput, match="no last publish_time"):
        rebuild(spark, m, None, tmp_path / "out", RebuildConfig(report=False))
    summary = rebuild(
        spark, m, None, tmp_path / "out", dataclasses.replace(RebuildConfig(report=False), now_ms=T0)
    )
    assert summary.now_ms == T0 and summary.inputs["messages"] == 0


@pytest.mark.spark
def test_a_spark_failure_is_one_line_and_its_trace_goes_to_the_log(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cursorkit.pipeline.cli import run_command

    log = tmp_path / "spark.log"
    monkeypatch.setenv("CURSORKIT_SPARK_LOG", str(log))

    def query(_: argparse.Namespace, __: Any) -> int:
        spark.read.parquet(str(tmp_path / "absent")).count()
        return 0

    status = run_command(argparse.Namespace(command="rebuild"), {"rebuild": query})
    err = capsys.readouterr().err.splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("cursorkit rebuild: Spark failed: ") and "PATH_NOT_FOUND" in err[0]
    assert err[0].endswith(f"details in {log}") and "Traceback" in log.read_text()
