"""What ``cursorkit broker`` tells an operator: one line and exit status 2 when it cannot start; quiet stops.

A second broker on a data directory another broker holds is refused at start, naming the directory
and the holder (it used to start, then fail its clients with a traceback). SIGTERM stops a broker
with clients connected at exit status 0, nothing on stderr. A missing extra is one line naming the
extra to install.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker
from cursorkit.broker.server.data_lock import DataLock
from raw_client import Raw

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client, nothing_more, receive_all  # noqa: E402 - needs pulsar

_BLOCKED = "import sys; sys.modules[sys.argv.pop(1)] = None; from cursorkit.cli import main; sys.exit(main())"
"""``python -c`` that runs the CLI as if the module named first were not installed."""


def _cli(data: Path, *args: str, blocked: str = "") -> subprocess.CompletedProcess[str]:
    """``cursorkit broker --data DATA --port 0 ARGS``, run to its end (``blocked``: a module made absent)."""
    runner = ["-c", _BLOCKED, blocked] if blocked else ["-m", "cursorkit.cli"]
    cmd = [sys.executable, *runner, "broker", "--data", str(data), "--port", "0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert "Traceback" not in stderr and "internal error" not in stderr
    return lines[0]


def _serves(url: str) -> None:
    c = client(url)
    try:
        c.create_producer("still-serving").send(b"ok")
    finally:
        c.close()


def test_a_second_broker_on_the_same_data_is_refused_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data) as first:
        assert first.proc is not None
        started = time.monotonic()
        second = _cli(data, "--partitioned-topic", "parts=3")
        assert time.monotonic() - started < 10
        assert second.returncode == 2
        assert "ready" not in second.stdout  # it never listened
        line = _one_line(second.stderr)
        assert str(data) in line and f"pid {first.proc.pid}" in line and first.url in line, line
        assert not (data / "partitioned.json").exists(), "the refused broker wrote to the directory"
        _serves(first.url)


def test_the_lock_goes_with_the_broker(tmp_path: Path) -> None:
    """After a stop or a SIGKILL the next broker starts on the directory."""
    first = BrokerProcess(tmp_path / "data")
    first.start()
    first.stop()
    first.start()
    first.kill()
    with running_broker(tmp_path / "data") as again:
        _serves(again.url)


def test_a_broker_with_metadata_is_refused_beside_a_lone_one(tmp_path: Path) -> None:
    pytest.importorskip("kazoo")
    data = tmp_path / "data"
    with running_broker(data) as lone:
        assert lone.proc is not None
        refused = _cli(data, "--metadata", "zk://127.0.0.1:1/nowhere")  # refused before it dials
        assert refused.returncode == 2
        line = _one_line(refused.stderr)
        assert str(data) in line and "without --metadata" in line and f"pid {lone.proc.pid}" in line, line


def test_a_lone_broker_is_refused_beside_brokers_sharing_the_directory(tmp_path: Path) -> None:
    """Brokers with --metadata hold the directory shared (as here): each other, never a lone one."""
    data = tmp_path / "data"
    data.mkdir()
    one, two = DataLock(data, shared=True), DataLock(data, shared=True)
    try:
        refused = _cli(data)
        assert refused.returncode == 2
        line = _one_line(refused.stderr)
        assert str(data) in line and "--metadata" in line and "ZooKeeper" in line, line
    finally:
        one.release()
        two.release()


def test_sigterm_stops_quietly_with_clients_connected(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    idle = Raw(broker.url)
    idle.connect()
    c = client(broker.url)
    try:
        consumer = c.subscribe("t", "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer("t", batching_enabled=False)
        for i in range(10):
            producer.send(str(i).encode())
        receive_all(consumer, 5)
        time.sleep(0.5)  # the client sends its grouped acks
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        assert broker.proc.wait(timeout=20) == 0
    finally:
        c.close()
        idle.close()
    stderr = broker.log_path.read_text()
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    broker.start()  # the acks were flushed: only the other five come back
    c = client(broker.url)
    try:
        consumer = c.subscribe("t", "s", consumer_type=pulsar.ConsumerType.Shared)
        assert sorted(int(m.data()) for m in receive_all(consumer, 5)) == [5, 6, 7, 8, 9]
        assert nothing_more(consumer)
    finally:
        c.close()
        broker.stop()


@pytest.mark.parametrize(
    ("module", "args", "says"),
    [
        ("re2", (), 'google-re2, which is not installed: pip install "cursorkit[broker]"'),
        (
            "kazoo",
            ("--metadata", "zk://127.0.0.1:1/nowhere"),
            'kazoo, which is not installed: pip install "cursorkit[zookeeper]"',
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    tmp_path: Path, module: str, args: tuple[str, ...], says: str
) -> None:
    run = _cli(tmp_path / "data", *args, blocked=module)
    assert run.returncode == 2
    assert says in _one_line(run.stderr)
    assert "ready" not in run.stdout
