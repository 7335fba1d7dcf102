"""``LocalBroker``: ``cursorkit broker`` in a child process on 127.0.0.1, for tests that use a real client.

It listens on free ports (the binary protocol and the admin REST API) chosen at its first start
and kept by every later one, so a client's service URL stays right across :meth:`LocalBroker.restart`
and :meth:`LocalBroker.kill` then :meth:`LocalBroker.start`. Its output goes to a log file beside the
data directory (a pipe nobody reads would stall it). Nothing here imports a Pulsar client.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

from cursorkit.admin.client import AdminClient

__all__ = ["BrokerDidNotStart", "LocalBroker", "broker"]

_READY = re.compile(r"ready on (pulsar://\S+) \((?:admin (http://[^\s,]+), )?data in ")
_POLL_S = 0.005
"""How often the log is read for the ready line while the broker starts."""


class BrokerDidNotStart(RuntimeError):
    """The broker exited, or printed no ready line in time; the message ends with its log's tail."""


class LocalBroker:
    """A ``cursorkit broker`` process over ``data``: start, stop, restart, kill (SIGKILL).

    ``args`` go to ``cursorkit broker`` as they are (``--partitioned-topic orders=4``, limits...).
    ``sync=False`` (the default) runs it with ``--sync never``: what a process crash keeps is the
    same (the kernel still writes what it was given), and tests run faster; a machine crash is
    not what a test simulates. As a context manager it is started on entry and stopped on exit.
    """

    def __init__(
        self,
        data: str | os.PathLike[str],
        *,
        args: Sequence[str] = (),
        host: str = "127.0.0.1",
        sync: bool = False,
        admin: bool = True,
        startup_timeout: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.data = Path(data)
        """The broker's data directory (``--data``)."""
        self.args = tuple(args)
        self.host = host
        self.sync = sync
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path is not None else self.data.parent / f"{self.data.name}.log"
        """Where the broker's stdout and stderr go (appended to across restarts)."""
        self.port = 0
        """The binary protocol's port (0 until the first start)."""
        self.http_port = 0 if admin else -1
        """The admin API's port (0 until the first start; -1: no admin API)."""
        self.service_url = ""
        """``pulsar://host:port``, for the client (set by the first start, kept by later ones)."""
        self.admin_url = ""
        """``http://host:port`` of the admin REST API ("" without one)."""
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalBroker({self.service_url or 'not started'}, {state}, data={str(self.data)!r})"

    # -- state -------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id of the running broker (None before the first start)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """How the last run ended: 0 after a clean stop, ``-9`` after :meth:`kill` (None while it runs)."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def admin(self) -> AdminClient:
        """A client of its admin REST API (pulsar-admin's verbs as methods)."""
        if not self.admin_url:
            raise RuntimeError("the broker has no admin API: start it first (and not with admin=False)")
        return AdminClient(self.admin_url, timeout=10.0)

    def log(self) -> str:
        """What the broker has printed so far (every start of it)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- lifecycle ---------------------------------------------------------------------------------

    def command(self) -> list[str]:
        """The command line of the next start."""
        cmd = [sys.executable, "-m", "cursorkit.cli", "broker", "--data", str(self.data)]
        cmd += ["--host", self.host, "--port", str(self.port)]
        if self.http_port >= 0:
            cmd += ["--http-port", str(self.http_port)]
        if not self.sync:
            cmd += ["--sync", "never"]
        return [*cmd, *self.args]

    def start(self) -> float:
        """Starts the broker and waits for it to listen; the seconds that took.

        The first start takes free ports; later ones take the same ports again. Raises
        :class:`BrokerDidNotStart` (with the log's tail) when it exits or is not ready in time.
        """
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        started = time.monotonic()
        self.data.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            offset = log.tell()
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        m = self._await_ready(offset, started)
        self.service_url = m.group(1)
        self.port = int(self.service_url.rsplit(":", 1)[1])
        if m.group(2):
            self.admin_url = m.group(2)
            self.http_port = int(self.admin_url.rsplit(":", 1)[1])
        return time.monotonic() - started

    def _await_ready(self, offset: int, started: float) -> re.Match[str]:
        """The ready line, read from the log as it grows; the process is killed if it never comes."""
        assert self._proc is not None
        with self.log_path.open("rb") as log:
            log.seek(offset)
            seen = b""
            while True:
                seen += log.read()
                m = _READY.search(seen.decode(errors="replace"))
                if m is not None:
                    return m
                if self._proc.poll() is not None:
                    why = f"exited with status {self._proc.returncode}"
                    break
                if time.monotonic() - started > self.startup_timeout:
                    self._proc.kill()
                    self._proc.wait()
                    why = f"was not ready after {self.startup_timeout:g} s"
                    break
                time.sleep(_POLL_S)
        tail = seen.decode(errors="replace")[-3000:]
        raise BrokerDidNotStart(f"cursorkit broker {why} (log {self.log_path}):\n{tail}")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM: the broker flushes, closes its connections and exits (SIGKILL after ``timeout``)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL: the broker ends at once, nothing flushed (a crash). :meth:`start` brings it back."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self) -> float:
        """:meth:`stop` then :meth:`start` on the same ports; the seconds the start took."""
        self.stop()
        return self.start()

    def __enter__(self) -> LocalBroker:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def broker(
    *args: str,
    data: str | os.PathLike[str] | None = None,
    sync: bool = False,
    admin: bool = True,
    startup_timeout: float = 10.0,
) -> Iterator[LocalBroker]:
    """A running broker for the block, stopped after it (outside pytest: scripts, notebooks, unittest).

    ``args`` go to ``cursorkit broker``; without ``data`` it keeps its data in a temporary directory
    removed afterwards.
    """
    with contextlib.ExitStack() as stack:
        if data is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cursorkit-broker-")))
            data = root / "data"
        running = stack.enter_context(
            LocalBroker(data, args=args, sync=sync, admin=admin, startup_timeout=startup_timeout)
        )
        yield running
