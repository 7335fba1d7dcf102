"""A real ZooKeeper server on 127.0.0.1 for the shared-store tests: pyspark's own jars, Java 17.

pyspark ships ``zookeeper`` and ``zookeeper-jute`` with the slf4j, log4j, metrics-core, commons-io
and snappy-java jars they need, so ``org.apache.zookeeper.server.ZooKeeperServerMain`` runs without
anything else installed. :class:`ZkServer` starts one on a free port with a data directory that
survives :meth:`kill` and :meth:`start` (a restart keeps every acknowledged write), and can pause it
(SIGSTOP) to let sessions expire.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from object_store import free_port, wait_for_port

_JARS = (
    "zookeeper-[0-9]*.jar",
    "zookeeper-jute-*.jar",
    "slf4j-api-*.jar",
    "log4j-slf4j2-impl-*.jar",
    "log4j-api-*.jar",
    "log4j-core-*.jar",
    "metrics-core-*.jar",
    "commons-io-*.jar",
    "snappy-java-*.jar",
)


def classpath() -> str:
    """Pyspark's jars that ZooKeeperServerMain needs, joined for ``java -cp``."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found: list[str] = []
    for pattern in _JARS:
        matches = sorted(jars.glob(pattern))
        if not matches:
            raise RuntimeError(f"pyspark ships no {pattern} in {jars}")
        found.append(str(matches[0]))
    return os.pathsep.join(found)


class ZkServer:
    """One ZooKeeper server process; ``hosts`` is what a client connects to."""

    def __init__(self, data_dir: Path, *, tick_ms: int = 200, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port if port is not None else free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen[bytes] | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        self.config = data_dir / "zoo.cfg"
        self.config.write_text(
            "\n".join(
                [
                    f"tickTime={tick_ms}",
                    f"dataDir={data_dir / 'data'}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok",
                    f"minSessionTimeout={2 * tick_ms}",
                    f"maxSessionTimeout={100 * tick_ms}",
                ]
            )
            + "\n"
        )

    @property
    def hosts(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Starts the server and waits until it answers ``ruok``."""
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                classpath(),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(self.config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_for_port(self.port, self.proc, "ZooKeeperServerMain")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"ZooKeeper on {self.hosts} never answered ruok")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever; its data directory stays for a restart."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the server stops answering, connections stay open."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stops the server (resuming it first if paused)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


@contextmanager
def running(data_dir: Path, **options: Any) -> Iterator[ZkServer]:
    """A started server, stopped on exit."""
    server = ZkServer(data_dir, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
