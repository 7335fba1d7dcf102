"""A subscription made again while its old files are still being deleted is made after, not among them."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.cursor_stores import FileCursorStores
from cursorkit.broker.server.names import topic_name
from cursorkit.proto import pulsar_api_pb2 as api
from in_process_broker import InProcess


def test_a_subscription_made_during_its_old_files_deletion_keeps_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow_delete(self: FileCursorStores, directory: Path, name: str) -> None:
        time.sleep(0.5)  # a slow disk: the new subscription is asked for meanwhile
        shutil.rmtree(directory, ignore_errors=True)

    monkeypatch.setattr(FileCursorStores, "delete", slow_delete)
    broker = InProcess(BrokerConfig(data=tmp_path / "data", port=0))
    try:

        async def remake() -> bool:
            topic = await broker.broker.load_topic(topic_name("remade"))
            await topic.add_subscription("s", api.CommandSubscribe.Shared, earliest=True)
            removing = asyncio.ensure_future(topic.remove_subscription("s"))
            await asyncio.sleep(0.05)  # the deletion is under way on its thread
            again = await topic.add_subscription("s", api.CommandSubscribe.Shared, earliest=True)
            await removing
            assert topic.subscriptions["s"] is again
            assert again.store is not None
            again.flush()  # its store is whole: written and read back
            return again.directory.exists() and any(again.directory.iterdir())

        assert broker.call(remake())
    finally:
        broker.stop()
