"""``cursorkit broker`` in a child process on 127.0.0.1 (a free port), for tests with the real client."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

_READY = re.compile(r"ready on (pulsar://\S+)")
_ADMIN = re.compile(r"admin (http://[^\s,]+)")


class BrokerProcess:
    """A running broker: its URL, and ways to stop it (cleanly or by SIGKILL) and start it again."""

    def __init__(self, data: Path, *args: str, name: str = "", interpreter_args: Sequence[str] = ()) -> None:
        """``name`` names its log file (``<data>.broker.log`` by default): brokers may share ``data``."""
        self.data = data
        self.args = args
        self.interpreter_args = tuple(interpreter_args)
        """Given to Python before ``-m cursorkit.cli`` (a runner script and its arguments)."""
        self.url = ""
        self.admin_url = ""
        """``http://host:port`` of its admin API when started with ``--http-port`` ("" otherwise)."""
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log_path = data.parent / f"{name or data.name}.broker.log"

    def start(self, timeout: float = 10.0) -> float:
        """Starts the broker (same port as before, if it ran); returns the seconds until it was ready."""
        started = time.monotonic()
        cmd = [
            sys.executable,
            *self.interpreter_args,
            "-m",
            "cursorkit.cli",
            "broker",
            "--data",
            str(self.data),
            "--port",
            str(self.port),
            *self._args(),
        ]
        self.data.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as log:  # a file, never a pipe nobody drains (a full one stalls it)
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = _READY.search(line)
        if m is None:
            self.proc.kill()
            raise RuntimeError(f"broker did not start: {line!r} {self.log_path.read_text()[-2000:]}")
        self.url = m.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])
        admin = _ADMIN.search(line)
        self.admin_url = admin.group(1) if admin else ""
        return time.monotonic() - started

    def _args(self) -> list[str]:
        """The extra arguments; a restart keeps the admin port the first start got (``--http-port 0``)."""
        args = list(self.args)
        if self.admin_url and "--http-port" in args:
            args[args.index("--http-port") + 1] = self.admin_url.rsplit(":", 1)[1]
        return args

    def stop(self) -> None:
        """SIGTERM: the broker flushes and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)

    def pause(self) -> None:
        """SIGSTOP: the broker stops answering (its ZooKeeper session expires), holding what it holds."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: nothing is flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)


@contextmanager
def running_broker(data: Path, *args: str) -> Iterator[BrokerProcess]:
    """A broker for the block; stopped (or killed, if stopping hangs) after it."""
    broker = BrokerProcess(data, *args)
    broker.start()
    try:
        yield broker
    finally:
        try:
            broker.stop()
        except subprocess.TimeoutExpired:
            broker.kill()
