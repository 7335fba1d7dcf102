"""A state machine over ZkCursorStore on a real ZooKeeper: random acks, flushes, hand-overs, stale owners.

The model is what the last confirmed flush holds (acked entries, properties, cursor properties).
Every hand-over recovers exactly that; a stale owner's writes are fenced and change nothing; a
foreign writer's change never leaves the owner unable to write. A small znode budget sends most
states to state objects, so both paths run.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from cursorkit import Position, errors
from cursorkit.ackstate import Cursor, CursorStore, ZkCursorStore
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.stores import ObjectStore
from fuzz_budget import runs

pytestmark = [pytest.mark.spark, pytest.mark.fuzz]

ENTRIES = st.integers(min_value=0, max_value=400)


class ZkStoreMachine(RuleBasedStateMachine):
    """One cursor znode, its current owner, the owners it fenced, and the model of what is durable."""

    server: Any = None
    objects_root: Path = Path()

    def __init__(self) -> None:
        super().__init__()
        path = f"/managed-ledgers/t/ns/persistent/m-{uuid.uuid4().hex[:10]}/sub"
        self.location = f"zk://{self.server.hosts}{path}"
        self.path = path
        self.objects = ObjectStore(str(self.objects_root / uuid.uuid4().hex[:8]))
        self.store = CursorStore.create(self.location, objects=self.objects, max_znode_bytes=1024)
        self.cursor: Cursor = self.store.recover()
        self.stale: list[tuple[ZkCursorStore, Cursor]] = []
        self.durable: set[int] = set()
        self.durable_props: dict[str, int] = {}
        self.durable_strings: dict[str, str] = {}

    def _acked(self, cursor: Cursor) -> set[int]:
        out = set()
        for _lk, lv, _uk, uv in cursor.individually_deleted.ranges():
            out.update(range(lv + 1, uv + 1))
        md = cursor.mark_delete_position
        if md.ledger_id == 1:
            out.update(range(0, md.entry_id + 1))
        return out

    @rule(entries=st.lists(ENTRIES, max_size=40))
    def ack(self, entries: list[int]) -> None:
        for e in entries:
            self.cursor.ack(Position(1, e))

    @rule(name=st.sampled_from(["a", "b"]), value=st.integers(-5, 5))
    def set_property(self, name: str, value: int) -> None:
        self.cursor.properties[name] = value

    @rule()
    def flush(self) -> None:
        self.store.flush(self.cursor)
        self.durable = self._acked(self.cursor)
        self.durable_props = dict(self.cursor.properties)

    @rule(
        key=st.sampled_from(["#pulsar.internal.delayed.bucket_1_2", "x"]), value=st.sampled_from(["1", "2"])
    )
    def set_cursor_property(self, key: str, value: str) -> None:
        self.store.cursor_properties[key] = value
        self.durable_strings[key] = value

    @rule()
    def hand_over(self) -> None:
        new = CursorStore.open(self.location, objects=self.objects)
        assert isinstance(new, ZkCursorStore) and not new.report.damaged
        recovered = new.recover()
        assert self._acked(recovered) == self.durable
        assert recovered.properties == self.durable_props
        assert dict(new.cursor_properties) == self.durable_strings
        assert isinstance(self.store, ZkCursorStore)
        self.stale.append((self.store, self.cursor))
        self.store, self.cursor = new, recovered

    @precondition(lambda self: bool(self.stale))
    @rule(entry=ENTRIES, data=st.data())
    def stale_owner_writes(self, entry: int, data: st.DataObject) -> None:
        store, cursor = data.draw(st.sampled_from(self.stale))
        cursor.ack(Position(1, entry))
        with pytest.raises(errors.Fenced):
            store.flush(cursor, force=True)
        with pytest.raises(errors.Fenced):
            store.cursor_properties["stale"] = "1"

    @rule()
    def foreign_writer(self) -> None:
        client = self.store._session.client
        raw, _ = client.get(self.path)
        info = ml.ManagedCursorInfo.FromString(raw)
        info.ClearField("cursorkit")
        info.lastActive = 1
        client.set(self.path, info.SerializeToString())
        self.store.flush(self.cursor, force=True)  # the owner writes on over it
        self.durable = self._acked(self.cursor)
        self.durable_props = dict(self.cursor.properties)

    @invariant()
    def objects_are_collected(self) -> None:
        assert len(self.objects.list()) <= 2  # the current state object, and at most one not yet swept

    def teardown(self) -> None:
        for store, _ in self.stale:
            store.close()
        self.store.close()


@pytest.fixture
def machine(zk_server: Any, tmp_path: Path) -> type[ZkStoreMachine]:
    ZkStoreMachine.server = zk_server
    ZkStoreMachine.objects_root = tmp_path
    return ZkStoreMachine


def test_zk_store_state_machine(machine: type[ZkStoreMachine]) -> None:
    run_state_machine_as_test(
        machine, settings=settings(max_examples=runs(15, 200), stateful_step_count=15, deadline=None)
    )
