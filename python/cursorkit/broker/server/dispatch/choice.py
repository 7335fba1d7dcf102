"""Which dispatch model a subscription's first consumer starts: by its type and Key_Shared options."""

from __future__ import annotations

from collections.abc import Callable

from cursorkit import Cursor
from cursorkit.broker.log import MessageLog
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.delayed_trackers import DelayedTracker
from cursorkit.broker.server.dispatch.key_shared import KeySharedModel
from cursorkit.broker.server.dispatch.model import DispatchModel
from cursorkit.broker.server.dispatch.shared import SharedModel
from cursorkit.broker.server.dispatch.single_active import SingleActive
from cursorkit.broker.server.subscribe_request import SubscribeRequest
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["model_for"]


def model_for(
    request: SubscribeRequest,
    *,
    name: str,
    cursor: Cursor,
    delayed: DelayedTracker,
    config: BrokerConfig,
    log: MessageLog,
    clock_s: Callable[[], float],
) -> DispatchModel:
    """A new model for the first consumer of ``request``'s type (and Key_Shared options)."""
    if request.sub_type == api.CommandSubscribe.Key_Shared:
        return KeySharedModel(
            request, name=name, cursor=cursor, delayed=delayed, config=config, log=log, clock_s=clock_s
        )
    if request.sub_type == api.CommandSubscribe.Shared:
        return SharedModel(name=name, cursor=cursor, delayed=delayed)
    return SingleActive(request.sub_type, name=name, cursor=cursor)
