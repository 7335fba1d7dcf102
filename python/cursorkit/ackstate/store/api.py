"""``CursorStore``: what every durable home of a cursor offers, and the choice of home by location.

``CursorStore.create(location)`` / ``CursorStore.open(location)`` take a plain path (the embedded
file store, :class:`~cursorkit.ackstate.store.FileCursorStore`) or a
``zk://host:port[,host:port...]/path`` (a cursor znode in ZooKeeper,
:class:`~cursorkit.ackstate.store.zookeeper.ZkCursorStore`, for brokers that move topics between nodes).
Both recover with :meth:`CursorStore.recover`, persist with :meth:`CursorStore.flush` and say what
recovery found in :attr:`CursorStore.report`. Each kind registers itself here when its module loads.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, Self, cast

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.store.properties import CursorProperties
from cursorkit.ackstate.store.redelivery_journal import JournalReport
from cursorkit.errors import InvalidArgument, InvalidInputType

__all__ = ["CursorStore", "StoreFlush", "StoreReport"]


class StoreReport(Protocol):
    """What opening a store found; :attr:`damaged` says whether anything was passed over."""

    @property
    def damaged(self) -> bool:
        """Whether recovery stepped over damage or fell back to older or smaller state."""
        ...


class StoreFlush(Protocol):
    """What one flush wrote."""

    @property
    def skipped(self) -> bool:
        """Nothing changed since the last flush, so nothing was written."""
        ...

    @property
    def bytes_written(self) -> int:
        """Bytes the flush wrote."""
        ...

    @property
    def sequence(self) -> int:
        """Flush number of the state now current."""
        ...

    @property
    def duration_s(self) -> float:
        """Wall time of the flush."""
        ...


class CursorStore(abc.ABC):
    """A durable home for one cursor's ack state; pick one by location with :meth:`create`/:meth:`open`.

    Keyword arguments after ``name`` belong to the kind of store: ``options`` and ``opener`` for a
    path; the kazoo connection options, ``objects`` and ``limits`` for ``zk://`` (see
    :class:`~cursorkit.ackstate.store.zookeeper.ZkCursorStore`).
    """

    _kinds: ClassVar[dict[str, type[CursorStore]]] = {}

    @classmethod
    def register(cls, scheme: str, kind: type[CursorStore]) -> None:
        """Makes ``scheme://`` locations (``""``: plain paths) open as ``kind``."""
        cls._kinds[scheme] = kind

    @classmethod
    def kind_for(cls, location: object) -> type[CursorStore]:
        """The store class a location opens as."""
        if isinstance(location, os.PathLike):
            scheme = ""
        elif isinstance(location, str):
            scheme = location.partition("://")[0] if "://" in location else ""
        else:
            raise InvalidInputType(f"a store location must be a str or path, got {type(location).__name__}")
        kind = cls._kinds.get(scheme)
        if kind is None:
            known = ", ".join(f"{s}://" for s in sorted(cls._kinds) if s) or "none"
            raise InvalidArgument(f"no cursor store for {scheme}:// locations (known: a path, {known})")
        return kind

    @classmethod
    def create(cls, location: str | os.PathLike[str], *, name: str = "cursor", **options: Any) -> Self:
        """A new, empty store at ``location``; ``FileExistsError`` if one is there."""
        kind = cls.kind_for(location) if cls is CursorStore else cls
        return cast(Self, kind._create(location, name=name, **options))

    @classmethod
    def open(cls, location: str | os.PathLike[str], **options: Any) -> Self:
        """An existing store, recovered: :attr:`report` says what was found, :meth:`recover` rebuilds it."""
        kind = cls.kind_for(location) if cls is CursorStore else cls
        return cast(Self, kind._open(location, **options))

    @classmethod
    @abc.abstractmethod
    def _create(cls, location: str | os.PathLike[str], *, name: str, **options: Any) -> CursorStore:
        """This kind's :meth:`create`."""

    @classmethod
    @abc.abstractmethod
    def _open(cls, location: str | os.PathLike[str], **options: Any) -> CursorStore:
        """This kind's :meth:`open`."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the store is, as a location :meth:`open` takes."""

    _name: str
    _closed: bool

    @property
    def name(self) -> str:
        """The cursor's name, as recorded in the store."""
        return self._name

    @property
    @abc.abstractmethod
    def report(self) -> StoreReport:
        """What :meth:`open` (or :meth:`create`) found."""

    @property
    @abc.abstractmethod
    def sequence(self) -> int:
        """Flush number of the state now current."""

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    @property
    @abc.abstractmethod
    def cursor_properties(self) -> CursorProperties:
        """Pulsar's string ``cursorProperties`` of this cursor, durable on every change.

        The bucket delayed-delivery tracker keeps its bucket keys here, as Pulsar does. A change
        after :meth:`close` is refused (``InvalidArgument``).
        """

    @property
    @abc.abstractmethod
    def redelivery_counts(self) -> RedeliveryCounts:
        """This cursor's redelivery counts, made durable by :meth:`flush` (beyond Pulsar).

        Loaded on first use from where the store keeps them (a file store: a journal beside its
        log; a ZooKeeper store: its znode). Only changes are written; prune the counts of what
        the cursor acknowledged with ``redelivery_counts.prune(cursor)``.
        """

    @property
    @abc.abstractmethod
    def redelivery_report(self) -> JournalReport:
        """What loading :attr:`redelivery_counts` found (``damaged``: some counts may be lower)."""

    @abc.abstractmethod
    def recover(
        self,
        *,
        ledger_sizes: Mapping[int, int] | None = None,
        limits: PersistLimits | None = None,
        pulsar_quirks: bool = False,
    ) -> Cursor:
        """The cursor as last flushed; later :meth:`flush` calls with it are incremental where possible."""

    @abc.abstractmethod
    def flush(self, cursor: Cursor, *, full: bool = False, force: bool = False) -> StoreFlush:
        """Makes the cursor's state durable before returning; ``PersistFailed`` when it cannot."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the store (nothing is flushed: call :meth:`flush` first)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
