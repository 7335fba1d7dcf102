"""The SparkSession of a pipeline job: local by default, any cluster by ``--master`` or spark-submit."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "describe_spark_error",
    "is_input_error",
    "is_spark_error",
    "parse_conf",
    "spark_log_path",
    "spark_session",
    "start_session",
]

DEFAULT_MASTER = "local[*]"
"""Where a job runs when neither ``--master`` nor spark-submit names a cluster."""


AWS_SETTINGS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
)
"""Environment variables a job forwards to its executors (``spark.executorEnv.*``) when set."""


def parse_conf(pairs: Sequence[str]) -> list[tuple[str, str]]:
    """``k=v`` strings of ``--conf`` as pairs (``InvalidArgument`` for one without ``=``)."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"--conf takes key=value, got {pair!r}")
        out.append((key.strip(), value))
    return out


def spark_session(
    master: str | None = None, conf: Sequence[tuple[str, str]] = (), *, app_name: str = "cursorkit"
) -> SparkSession:
    """A session for the jobs (or the one already running, e.g. under spark-submit or in tests).

    The master is ``master`` if given, else what spark-submit set, else ``local[*]``. In local mode
    Python workers run this interpreter (``PYSPARK_PYTHON``), so they import this cursorkit. Spark's
    console progress bar is off (the CLI draws its own). A JVM this call starts logs its warnings and
    errors, traces included, to :func:`spark_log_path` and nothing to the console; under
    spark-submit the JVM keeps the logging spark-submit gave it.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    submitted = None
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: its JVM holds the settings
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
        submitted = SparkConf().get("spark.master", None)
    chosen = master or submitted or DEFAULT_MASTER
    if chosen.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(chosen)
    defaults = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if submitted is None:  # this call starts the JVM: its log goes to a file, not the console
        log4j = Path(__file__).with_name("log4j2.properties")
        defaults["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{log4j} -Dcursorkit.spark.log={spark_log_path()}"
        )
    if chosen.startswith("local"):
        defaults["spark.sql.shuffle.partitions"] = str(max(2, 2 * (os.cpu_count() or 1)))
        defaults["spark.driver.bindAddress"] = "127.0.0.1"
        defaults["spark.driver.host"] = "127.0.0.1"
        defaults["spark.ui.enabled"] = "false"
    # Executors open object stores with the AWS settings of this environment (pyarrow reads them);
    # Spark redacts the secret in its UI and logs.
    for name in AWS_SETTINGS:
        if os.environ.get(name):
            defaults[f"spark.executorEnv.{name}"] = os.environ[name]
    given = dict(conf)
    for key, value in {**defaults, **given}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def spark_log_path() -> Path:
    """Where the JVM this process starts writes its log (created on its first warning).

    ``$CURSORKIT_SPARK_LOG`` if set, else ``cursorkit-spark-<pid>.log`` in the temporary directory.
    """
    given = os.environ.get("CURSORKIT_SPARK_LOG")
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / f"cursorkit-spark-{os.getpid()}.log"


def start_session(
    master: str | None, conf: Sequence[tuple[str, str]] = (), *, app_name: str = "cursorkit"
) -> SparkSession:
    """:func:`spark_session` for the command line: a Spark that does not start is one line.

    Raises:
        InvalidArgument: Spark did not start (no Java, a refused master, a bad ``--conf``); the
            message gives Spark's reason in a line and where its log is.
    """
    try:
        return spark_session(master, conf, app_name=app_name)
    except Exception as e:
        if not is_spark_error(e):
            raise
        chosen = master or "the default master"
        raise InvalidArgument(
            f"Spark did not start on {chosen}: {describe_spark_error(e)}{_log_note()}"
        ) from e


def is_spark_error(e: BaseException) -> bool:
    """Whether ``e`` comes from Spark or its Py4J bridge (never imports them)."""
    return any(c.__module__.split(".")[0] in ("py4j", "pyspark") for c in type(e).__mro__ if c is not object)


def is_input_error(e: BaseException) -> bool:
    """Whether a Spark error is about the input or the query (an ``AnalysisException``)."""
    return any(c.__name__ == "AnalysisException" for c in type(e).__mro__)


def describe_spark_error(e: BaseException) -> str:
    """A Spark or Py4J error in one line: the Java exception and its root cause, without traces."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            top = str(java.toString())
            cause = java
            while cause.getCause() is not None:
                cause = cause.getCause()
            root = str(cause.toString())
        except Exception:  # the JVM is gone: what Python holds is all there is
            top = root = str(e)
        line = _first_line(top)
        if _first_line(root) != line:
            line += f" (caused by {_first_line(root)})"
        return line
    return _first_line(str(e)) or type(e).__name__


def _first_line(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip().removeprefix(": ")
        if stripped and not stripped.startswith("An error occurred while calling"):
            return stripped
    return ""


def _log_note() -> str:
    path = spark_log_path()
    return f"; Spark's log: {path}" if path.exists() else ""
