"""The SparkSession of a pipeline job: local by default, any cluster by ``--master`` or spark-submit."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "parse_conf", "spark_session"]

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
    console progress bar is off (the CLI draws its own); logs are at WARN.
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
    if chosen.startswith("local"):
        log4j = Path(__file__).with_name("log4j2.properties")
        defaults["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
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
