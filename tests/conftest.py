"""Shared pytest configuration: Hypothesis profiles sized so the whole suite stays fast."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from zookeeper_server import ZkServer

# "default" keeps each property file well under a minute; "thorough" is for local soak runs:
#   HYPOTHESIS_PROFILE=thorough pytest tests
settings.register_profile(
    "cursorkit",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "cursorkit"))

# Every Spark driver JVM the tests start (the session's, the crash children's, the CLI's, spark-submit's)
# runs short jobs on small data on 2 cores: the C1 compiler alone and the serial collector halve its
# CPU time (C2's and G1's threads cost more than they give back here). Same bytecode, same Spark.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark for the whole test session (start-up costs ~10 s): 2 cores, 2 shuffle partitions."""
    pytest.importorskip("pyspark")
    from cursorkit.pipeline.session import spark_session

    session = spark_session(
        "local[2]",
        [
            ("spark.sql.shuffle.partitions", "2"),
            ("spark.ui.enabled", "false"),
            ("spark.driver.bindAddress", "127.0.0.1"),
        ],
        app_name="cursorkit-tests",
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    """One real ZooKeeper server for the session (pyspark's jars, Java 17), on 127.0.0.1."""
    pytest.importorskip("kazoo")
    pytest.importorskip("pyspark")
    from zookeeper_server import running

    with running(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zk_client(zk_server: ZkServer) -> Iterator[Any]:
    """A started kazoo client of the session's server (the raw view beside a store's)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_server.hosts)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[dict[str, str]]:
    """Moto's S3 server for the session: the AWS settings (endpoint included) that reach it."""
    pytest.importorskip("moto")
    from object_store import s3_server

    with s3_server() as settings:
        yield settings
