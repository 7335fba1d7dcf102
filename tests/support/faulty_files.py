"""Real files that fail on demand, for the stores' ``opener`` hooks (no mocks: the I/O is real)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable


class Faults:
    """Switches shared by every FaultyFile of one test.

    ``budget``: bytes that may still be written before writes stop short, then raise ENOSPC (None:
    no limit); ``fail_fsync``: fsync fails (EINVAL, on a pipe); ``fsyncs_left``: fsyncs that
    still succeed before every later one fails (None: no limit); ``fail_truncate``: truncating
    fails (EIO); ``fail_open``: opening fails (EACCES); ``opens`` counts the opens; only files
    opened in ``fail_modes`` spend the budget.
    """

    def __init__(self) -> None:
        self.budget: int | None = None
        self.fail_fsync = False
        self.fsyncs_left: int | None = None
        self.fail_truncate = False
        self.fail_open = False
        self.opens = 0
        self.fail_modes: set[str] = {"ab", "xb", "wb"}


class FaultyFile:
    """A real unbuffered file whose writes stop (ENOSPC) once the budget is spent, or whose fsync fails."""

    def __init__(self, path: str, mode: str, faults: Faults) -> None:
        if faults.fail_open:
            raise OSError(errno.EACCES, "open refused (injected)")
        faults.opens += 1
        self._f = open(path, mode, buffering=0)  # noqa: SIM115 - closed by close()
        self._mode = mode
        self._faults = faults
        self._pipe: tuple[int, int] | None = None

    def write(self, data: memoryview, /) -> int | None:
        budget = self._faults.budget
        if budget is None or self._mode not in self._faults.fail_modes or len(data) <= budget:
            if budget is not None and self._mode in self._faults.fail_modes:
                self._faults.budget = budget - len(data)
            return self._f.write(data)
        if budget > 0:
            self._faults.budget = 0
            return self._f.write(data[:budget])  # a short write; the retry then fails
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return self._f.seek(offset, whence)

    def truncate(self, size: int | None = None, /) -> int:
        if self._faults.fail_truncate:
            raise OSError(errno.EIO, "truncate failed (injected)")
        return self._f.truncate(size)

    def fileno(self) -> int:
        """The descriptor to fsync: a pipe's (fsync fails with EINVAL) once fsyncs are to fail."""
        left = self._faults.fsyncs_left
        if left is not None:
            self._faults.fsyncs_left = max(left - 1, 0)
        if self._faults.fail_fsync or left == 0:  # fsync on a pipe fails with EINVAL: a real failing fsync
            self._pipe = self._pipe or os.pipe()
            return self._pipe[0]
        return self._f.fileno()

    def close(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe[0])
            os.close(self._pipe[1])
        self._f.close()


def faulty_opener(faults: Faults) -> Callable[[str, str], FaultyFile]:
    """An ``opener(path, mode)`` handing out FaultyFiles governed by ``faults``."""
    return lambda path, mode: FaultyFile(path, mode, faults)
