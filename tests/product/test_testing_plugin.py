"""``cursorkit.testing``: the pytest fixtures and the context manager, run as a user's tests run them.

Each pytest run here is a child ``pytest -p cursorkit.testing`` over a small test file written for
the case, using the official client, exactly as a project's own suite would.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from cursorkit.testing import BrokerDidNotStart, LocalBroker, broker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import TIMEOUT_MS, client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

CLIENT = """
import pulsar


def client(url):
    quiet = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    return pulsar.Client(url, operation_timeout_seconds=10, logger=quiet)
"""


def run_pytest(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest -p cursorkit.testing`` over ``files`` in ``tmp_path`` (no repository config)."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "cursorkit.testing", "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_fixture_serves_produce_consume_restart_and_kill(tmp_path: Path) -> None:
    done = run_pytest(
        tmp_path,
        {
            "helpers.py": CLIENT,
            "test_orders.py": """
            import pulsar
            from helpers import client


            def test_restart_and_kill_keep_the_messages(pulsar_broker):
                assert pulsar_broker.service_url.startswith("pulsar://127.0.0.1:")
                assert pulsar_broker.admin_url.startswith("http://127.0.0.1:")
                assert (pulsar_broker.data / "topics").is_dir() is False  # fresh
                c = client(pulsar_broker.service_url)
                consumer = c.subscribe("orders", "billing")
                producer = c.create_producer("orders")
                producer.send(b"one")
                msg = consumer.receive(10_000)
                assert msg.data() == b"one"
                consumer.acknowledge(msg)
                consumer.close()                           # acks go in groups: closing sends them

                url = pulsar_broker.service_url
                pulsar_broker.restart()                    # SIGTERM, then the same ports again
                assert pulsar_broker.service_url == url
                producer.send(b"two")                      # the producer reconnects by itself
                consumer = c.subscribe("orders", "billing")
                assert consumer.receive(10_000).data() == b"two"   # not acknowledged

                pulsar_broker.kill()                       # SIGKILL: a crash
                assert not pulsar_broker.running and pulsar_broker.returncode == -9
                pulsar_broker.start()
                assert consumer.receive(10_000).data() == b"two"   # redelivered after the crash
                c.close()
                assert (pulsar_broker.data / "topics").is_dir()


            def test_each_test_gets_a_fresh_broker(pulsar_broker):
                c = client(pulsar_broker.service_url)
                consumer = c.subscribe("orders", "billing", initial_position=pulsar.InitialPosition.Earliest)
                try:
                    consumer.receive(300)
                    raise AssertionError("a message of the other test's broker")
                except pulsar.Timeout:
                    pass
                c.close()
            """,
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout


def test_session_broker_is_shared_and_args_are_overridable(tmp_path: Path) -> None:
    done = run_pytest(
        tmp_path,
        {
            "helpers.py": CLIENT,
            "conftest.py": """
            import pytest


            @pytest.fixture(scope="session")
            def pulsar_broker_args():
                return ["--partitioned-topic", "persistent://public/default/orders=3"]
            """,
            "test_shared.py": """
            from helpers import client

            seen = []


            def test_one(pulsar_broker_session):
                seen.append(pulsar_broker_session.service_url)
                c = client(pulsar_broker_session.service_url)
                assert len(c.get_topic_partitions("orders")) == 3
                c.close()


            def test_two(pulsar_broker_session, pulsar_broker):
                assert seen == [pulsar_broker_session.service_url]          # the same broker
                assert pulsar_broker.service_url != pulsar_broker_session.service_url
                c = client(pulsar_broker.service_url)
                assert len(c.get_topic_partitions("orders")) == 3          # both take the args
                c.close()
            """,
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout


def test_a_broker_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    done = run_pytest(
        tmp_path,
        {
            "conftest.py": """
            import pytest


            @pytest.fixture(scope="session")
            def pulsar_broker_args():
                return ["--max-connections", "many"]
            """,
            "test_bad.py": """
            def test_never_runs(pulsar_broker):
                pass
            """,
        },
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 error" in done.stdout and "BrokerDidNotStart" in done.stdout
    assert "exited with status 2" in done.stdout and "--max-connections" in done.stdout  # the log's tail


def test_the_plugin_imports_no_pulsar_client() -> None:
    code = (
        "import sys, cursorkit.testing; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pulsar'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_registered_as_a_pytest_plugin_under_its_module_name(tmp_path: Path) -> None:
    """Named as the module, so ``-p cursorkit.testing`` and the entry point load it once.

    The entry point is installed here as pip installs one (a ``dist-info`` on the path).
    """
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    entry_points = project["entry-points"]["pytest11"]
    assert entry_points == {"cursorkit.testing": "cursorkit.testing"}
    site = tmp_path / "site"
    info = site / "cursorkit_fixtures-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cursorkit-fixtures\nVersion: 0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text("[pytest11]\n" + lines)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_plain.py").write_text("def test_x(pulsar_broker):\n    assert pulsar_broker.running\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "python")])}
    for extra in ([], ["-p", "cursorkit.testing"]):  # by the entry point alone, and named as well
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *extra, str(tests)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_context_manager_outside_pytest(tmp_path: Path) -> None:
    with broker() as b:
        data = b.data
        c = client(b.service_url)
        try:
            consumer = c.subscribe("plain", "s")
            c.create_producer("plain").send(b"x")
            assert consumer.receive(timeout_millis=TIMEOUT_MS).data() == b"x"
        finally:
            c.close()
        assert data.is_dir()
    assert not b.running and b.returncode == 0 and not data.exists()  # stopped cleanly, directory gone
    with broker(data=tmp_path / "kept") as b:
        pass
    assert (tmp_path / "kept" / "broker.lock").exists()


def test_start_is_quick(tmp_path: Path) -> None:
    """From the command to a broker listening on both ports, the interpreter's start included."""
    times = [_started(tmp_path / f"d{i}") for i in range(3)]
    assert statistics.median(times) < 1.0, times


def _started(data: Path) -> float:
    b = LocalBroker(data)
    try:
        return b.start()
    finally:
        b.stop()


def test_a_start_that_times_out_kills_the_broker(tmp_path: Path) -> None:
    b = LocalBroker(tmp_path / "data", startup_timeout=0.001)
    with pytest.raises(BrokerDidNotStart, match="not ready after"):
        b.start()
    assert not b.running
