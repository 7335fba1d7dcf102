"""Reading a crash-test child's stdout line by line, with a timeout (shared by the crash tests)."""

from __future__ import annotations

import os
import select
import subprocess
import time

TIMEOUT_S = 60.0
"""How long a child may stay silent before the test gives up on it."""


class Lines:
    """Lines of a child's stdout, read with a timeout; ``seen`` keeps every line read."""

    def __init__(self, proc: subprocess.Popen[bytes], who: str = "crash child") -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buf = b""
        self._who = who
        self.seen: list[str] = []

    def next(self) -> str | None:
        """The next line, or None at end of output."""
        deadline = time.monotonic() + TIMEOUT_S
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"{self._who} printed nothing for a minute")
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        self.seen.append(line.decode())
        return self.seen[-1]

    def drain(self) -> None:
        """Reads to the end of the output."""
        while self.next() is not None:
            pass
