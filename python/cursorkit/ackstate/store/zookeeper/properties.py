"""Pulsar's string ``cursorProperties`` of a ZooKeeper cursor store: each change one fenced znode write."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cursorkit.ackstate.store.properties import CursorProperties

__all__ = ["ZkCursorProperties"]


class ZkCursorProperties(CursorProperties):
    """The :class:`CursorProperties` of a cursor znode: a change is durable once its znode write landed.

    Bucket keys of the delayed-delivery tracker live here, as in Pulsar; a failed change (fenced,
    ZooKeeper unavailable, over the znode's byte budget) leaves the map as it was.
    """

    def __init__(
        self, location: str, initial: Mapping[str, str], write: Callable[[dict[str, str]], None]
    ) -> None:
        super().__init__(initial)
        self._location = location
        self._write = write

    def _commit(self, new: dict[str, str]) -> None:
        self._write(new)

    def __repr__(self) -> str:
        return f"ZkCursorProperties({self._location!r}, {len(self)} keys)"
