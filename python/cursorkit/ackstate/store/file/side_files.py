"""A file store's files beside its log: the cursor properties and the redelivery journal, and its options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cursorkit.ackstate.store.file.reports import StoreOptions
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.ackstate.store.redelivery_journal import RedeliveryJournal
from cursorkit.errors import InvalidArgument, PersistFailed
from cursorkit.fsio import Opener

__all__ = ["PROPERTIES_FILE", "REDELIVERIES_FILE", "LazyJournal", "StoreProperties", "file_options"]

PROPERTIES_FILE = "cursor.properties"
"""The file of a file store's cursor properties, in the store directory."""
REDELIVERIES_FILE = "redeliveries"
"""The journal of a file store's redelivery counts, in the store directory (made on first use)."""


class StoreProperties(FileCursorProperties):
    """A file store's cursor properties: refused once the store is closed (its directory is unlocked)."""

    def __init__(self, path: Path, opener: Opener, check_open: Callable[[], None]) -> None:
        super().__init__(path, opener=opener)
        self._check_open = check_open

    def _commit(self, new: dict[str, str]) -> None:
        self._check_open()
        super()._commit(new)


def file_options(options: dict[str, Any]) -> tuple[StoreOptions | None, Opener | None]:
    """The file store's keyword arguments (``options``, ``opener``); anything else is refused."""
    unknown = sorted(set(options) - {"options", "opener"})
    if unknown:
        raise InvalidArgument(f"a file cursor store takes options= and opener=, not {', '.join(unknown)}")
    store_options = options.get("options")
    if store_options is not None and not isinstance(store_options, StoreOptions):
        raise InvalidArgument(f"options must be StoreOptions, got {type(store_options).__name__}")
    opener = options.get("opener")
    if opener is not None and not callable(opener):
        raise InvalidArgument(f"opener must be callable, got {type(opener).__name__}")
    return store_options, opener


class LazyJournal:
    """The store's redelivery journal, opened on first use (reading never creates its file)."""

    def __init__(self, path: Path, opener: Opener, sync: bool) -> None:
        self._path, self._opener, self._sync = path, opener, sync
        self.journal: RedeliveryJournal | None = None

    def get(self) -> RedeliveryJournal:
        """The journal, read back on the first call."""
        if self.journal is None:
            self.journal = RedeliveryJournal.open(self._path, opener=self._opener, sync=self._sync)
        return self.journal

    def flush(self) -> PersistFailed | None:
        """Flushes the journal if it was opened; a failure is returned, for the caller to raise later."""
        if self.journal is not None:
            try:
                self.journal.flush()
            except PersistFailed as e:
                return e
        return None

    def close(self) -> None:
        """Releases the journal if it was opened."""
        if self.journal is not None:
            self.journal.close()
