"""A WaitForExclusive producer queued on its connection for its topic."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cursorkit.broker.server.topic import Topic

__all__ = ["Waiting"]


class Waiting(NamedTuple):
    """A WaitForExclusive producer queued for its topic, and what its grant will answer."""

    topic: Topic
    request_id: int
    name: str
