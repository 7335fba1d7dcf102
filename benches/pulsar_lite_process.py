"""pulsar-lite (AscentStream's embedded Pulsar-compatible broker) in a child process, for the benches.

The ``pulsar_lite`` package ships a Rust binary, ``pulsar_lite/bin/pulsar-lite`` (``--config FILE``,
``--addr``, ``--db-path``, ``--log-level``), and starts it with only ``--addr`` and ``--db-path``, which
leaves its Prometheus listener on its default ``0.0.0.0:8080``. Here it gets a config file instead
that binds both listeners to 127.0.0.1 on free ports and keeps its RocksDB in the given directory.
Same shape as ``broker_process.BrokerProcess`` (``url``, ``port``, ``proc``, ``start``, ``stop``,
``kill``), so ``broker_workloads`` drives either as a ``Target``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path


def binary() -> str:
    """The binary the installed ``pulsar_lite`` package runs (ImportError if it is not installed)."""
    from pulsar_lite.binary_finder import find_pulsar_lite_binary  # type: ignore[import-untyped]

    return str(find_pulsar_lite_binary())


def version() -> str:
    """The installed ``pulsar_lite`` package's version."""
    import pulsar_lite  # type: ignore[import-untyped]

    return str(pulsar_lite.__version__)


def free_port() -> int:
    """A port nobody listens on at 127.0.0.1 now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_accepting(port: int, proc: subprocess.Popen[str], timeout: float) -> None:
    """Returns once 127.0.0.1:``port`` accepts a TCP connection (polled every ms); raises if ``proc`` died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"exited {proc.returncode} before accepting on {port}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


class PulsarLiteProcess:
    """A running pulsar-lite: its URL, and ways to stop it (cleanly or by SIGKILL) and start it again."""

    def __init__(self, data: Path, *, name: str = "") -> None:
        """``data``: its storage (RocksDB in ``<data>.rocksdb``); config and log beside it."""
        self.data = data
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.metrics_port = 0
        self.config_path = data.parent / f"{name or data.name}.pulsar-lite.toml"
        self.log_path = data.parent / f"{name or data.name}.pulsar-lite.log"

    def _write_config(self) -> None:
        # TOML strings written as JSON strings: the same escapes for these paths and addresses.
        self.config_path.write_text(
            f"addr = {json.dumps(f'127.0.0.1:{self.port}')}\n"
            f"db_path = {json.dumps(str(self.data))}\n"
            'log_level = "warn"\n'
            "\n[metrics]\n"
            "enabled = true\n"
            f"addr = {json.dumps(f'127.0.0.1:{self.metrics_port}')}\n"
        )

    def start(self, timeout: float = 10.0) -> float:
        """Starts it (same ports as before, if it ran); returns the seconds until it accepted a connection."""
        if not self.port:
            self.port, self.metrics_port = free_port(), free_port()
        self.data.parent.mkdir(parents=True, exist_ok=True)
        self._write_config()
        started = time.monotonic()
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen(
                [binary(), "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                text=True,
                cwd=self.data.parent,
            )
        try:
            wait_accepting(self.port, self.proc, timeout)
        except (OSError, RuntimeError) as e:
            self.kill()
            raise RuntimeError(f"pulsar-lite did not start: {e} {self.log_path.read_text()[-2000:]}") from e
        self.url = f"pulsar://127.0.0.1:{self.port}"
        return time.monotonic() - started

    def stop(self) -> None:
        """SIGTERM, then wait for it to exit."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def kill(self) -> None:
        """SIGKILL."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)
