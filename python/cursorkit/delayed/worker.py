"""``JobRunner``: the snapshot I/O of a tracker (create, merge, delete) in FIFO order, off the add path.

With ``background=True`` a daemon thread runs the jobs as they come; otherwise they wait for
``run_pending()`` (the tracker's ``maintenance()``), which makes tests and simulations deterministic.
Either way jobs run one at a time, so snapshot writes, property changes and deletions never race.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger("cursorkit.delayed")

Job = Callable[[], None]


class JobRunner:
    """A FIFO of jobs run on one worker thread or inline; a failing job is logged and counted."""

    def __init__(self, *, background: bool, name: str) -> None:
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition()
        self._running = 0
        self._closed = False
        self.failures = 0
        """Jobs that raised (each is also logged); the tracker's jobs handle their own errors."""
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
            self._thread.start()

    @property
    def background(self) -> bool:
        """Whether a worker thread runs the jobs."""
        return self._thread is not None

    def submit(self, job: Job) -> None:
        """Queues a job (after every job queued before it)."""
        with self._cond:
            if self._closed:
                raise RuntimeError("job runner is closed")
            self._jobs.append(job)
            self._cond.notify_all()

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._jobs) + self._running

    def wait_below(self, limit: int) -> None:
        """Backpressure: with a worker thread, waits until at most ``limit`` jobs are queued or running.

        Inline runners (and the worker itself) never wait: their jobs run in ``run_pending``.
        """
        if self._thread is None or threading.current_thread() is self._thread:
            return
        with self._cond:
            self._cond.wait_for(lambda: len(self._jobs) + self._running <= limit or self._closed)

    def run_pending(self) -> None:
        """Inline: runs every queued job, including ones queued meanwhile. Background: waits for idle."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            with self._cond:
                self._cond.wait_for(lambda: not self._jobs and not self._running)
            return
        while True:
            with self._cond:
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                self._running += 1
            self._run(job)

    def close(self) -> None:
        """Runs what is queued, then stops the worker; later submissions are refused."""
        self.run_pending()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _run(self, job: Job) -> None:
        try:
            job()
        except Exception:
            self.failures += 1
            log.exception("delayed-index job failed")
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._jobs or self._closed)
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                self._running += 1
            self._run(job)
