"""Cursor properties: durable round trips, atomic multi-key changes, damage, bad input, a dict model."""

from __future__ import annotations

import errno
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cursorkit import Cursor, CursorStore, Position
from cursorkit.ackstate.store.properties import CursorProperties, FileCursorProperties, MemoryCursorProperties
from cursorkit.errors import CorruptSnapshot, InvalidArgument, InvalidInputType, PersistFailed
from faulty_files import Faults, faulty_opener

BUCKET = "#pulsar.internal.delayed.bucket"


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)


@pytest.fixture(params=["file", "memory", "file store"])
def props(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CursorProperties]:
    if request.param == "file":
        yield FileCursorProperties(tmp_path / "props")
    elif request.param == "memory":
        yield MemoryCursorProperties()
    else:
        with CursorStore.create(tmp_path / "store", name="sub") as store:
            yield store.cursor_properties


# -- semantics shared by both implementations --------------------------------------------------------


def test_mapping_semantics(props: CursorProperties) -> None:
    assert len(props) == 0 and dict(props) == {}
    props[f"{BUCKET}_1_3"] = "17"
    props[f"{BUCKET}_4_9"] = "18"
    props["ünï☃"] = "välue"
    assert props[f"{BUCKET}_1_3"] == "17"
    assert f"{BUCKET}_4_9" in props and 5 not in props
    assert sorted(props) == sorted([f"{BUCKET}_1_3", f"{BUCKET}_4_9", "ünï☃"])
    assert props.get("missing") is None
    del props["ünï☃"]
    with pytest.raises(KeyError):
        del props["ünï☃"]
    with pytest.raises(KeyError):
        props["nope"]
    props.apply({f"{BUCKET}_1_9": "19"}, [f"{BUCKET}_1_3", f"{BUCKET}_4_9", "never-there"])
    assert dict(props) == {f"{BUCKET}_1_9": "19"}
    assert props.pop(f"{BUCKET}_1_9") == "19"
    props.update({"a": "1", "b": "2"})
    props.clear()
    assert dict(props) == {}


def test_bad_input_leaves_the_map_unchanged(props: CursorProperties) -> None:
    props["a"] = "1"
    bad_types: list[Any] = [
        lambda: props.__setitem__(1, "x"),
        lambda: props.__setitem__("x", 1),
        lambda: props.__setitem__("x", b"1"),
        lambda: props.apply({"x": 1}),
        lambda: props.apply({2: "x"}),
        lambda: props.apply([("x", "1")]),
        lambda: props.apply({}, "a"),  # a str is not a key list
        lambda: props.apply({}, [1]),
        lambda: props.apply({}, 5),
    ]
    for call in bad_types:
        with pytest.raises(InvalidInputType):
            call()
    for call in [lambda: props.apply({"a": "2"}, ["a"]), lambda: props.__setitem__("\ud800", "x")]:
        with pytest.raises(InvalidArgument):
            call()
    assert dict(props) == {"a": "1"}


def test_iteration_sees_the_state_it_started_with(props: CursorProperties) -> None:
    props.apply({str(i): "v" for i in range(5)})
    seen = []
    for key in props:
        seen.append(key)
        props[key + "x"] = "w"  # never "changed size during iteration"
    assert sorted(seen) == [str(i) for i in range(5)]
    assert len(props) == 10


def test_memory_initial_content_is_checked() -> None:
    assert dict(MemoryCursorProperties({"a": "b"})) == {"a": "b"}
    with pytest.raises(InvalidInputType):
        MemoryCursorProperties({"a": 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputType):
        MemoryCursorProperties([("a", "b")])  # type: ignore[arg-type]


# -- the file ----------------------------------------------------------------------------------------


def test_round_trip_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "props"
    p = FileCursorProperties(path)
    assert path.exists()  # created empty at construction
    assert dict(FileCursorProperties(path)) == {}
    content = {f"{BUCKET}_{i}_{i + 2}": str(1000 + i) for i in range(50)} | {"": "", "ü": "☃" * 100}
    p.apply(content)
    assert dict(FileCursorProperties(path)) == content
    p.apply({"new": "x"}, [f"{BUCKET}_0_2", f"{BUCKET}_1_3"])
    again = FileCursorProperties(str(path))
    assert dict(again) == dict(p)
    assert "new" in again and f"{BUCKET}_0_2" not in again
    assert again.path == path


def test_one_write_per_change_and_none_without_change(tmp_path: Path) -> None:
    faults = Faults()
    p = FileCursorProperties(tmp_path / "props", opener=faulty_opener(faults))
    assert faults.opens == 1
    p.apply({"a": "1", "b": "2", "c": "3"})
    assert faults.opens == 2
    p.apply({"a": "1"}, ["zzz"])  # nothing changes: nothing written
    assert faults.opens == 2
    p.clear()
    assert faults.opens == 3 and dict(FileCursorProperties(tmp_path / "props")) == {}
    p.clear()
    assert faults.opens == 3


def test_failed_writes_keep_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / "props"
    faults = Faults()
    p = FileCursorProperties(path, opener=faulty_opener(faults))
    p.apply({f"{BUCKET}_1_3": "7", f"{BUCKET}_4_6": "8"})
    before = dict(p)
    size = path.stat().st_size
    for budget in range(0, size, 3):  # the new content is larger than the old
        faults.budget = budget
        with pytest.raises(PersistFailed, match=str(path)) as info:
            p.apply({f"{BUCKET}_1_6": "9", "pad": "x" * 40}, [f"{BUCKET}_1_3", f"{BUCKET}_4_6"])
        assert info.value.errno == errno.ENOSPC
        faults.budget = None
        assert dict(p) == before
        assert dict(FileCursorProperties(path)) == before
        assert temp_files(tmp_path) == []
    faults.fail_fsync = True
    for change in (lambda: p.__setitem__("x", "y"), lambda: p.__delitem__(f"{BUCKET}_1_3"), p.clear):
        with pytest.raises(PersistFailed):
            change()
        assert dict(p) == before
    faults.fail_fsync = False
    assert dict(FileCursorProperties(path)) == before
    assert temp_files(tmp_path) == []
    p.apply({f"{BUCKET}_1_6": "9"}, [f"{BUCKET}_1_3", f"{BUCKET}_4_6"])
    assert dict(FileCursorProperties(path)) == {f"{BUCKET}_1_6": "9"}


def test_a_failed_first_write_raises_from_the_constructor(tmp_path: Path) -> None:
    faults = Faults()
    faults.budget = 3
    with pytest.raises(PersistFailed):
        FileCursorProperties(tmp_path / "props", opener=faulty_opener(faults))
    assert list(tmp_path.iterdir()) == []


def test_every_flipped_byte_and_truncation_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "props"
    FileCursorProperties(path).apply({f"{BUCKET}_1_3": "7", "k": "v"})
    good = path.read_bytes()
    for off in range(len(good)):
        damaged = bytearray(good)
        damaged[off] ^= 1 << (off % 8)
        path.write_bytes(damaged)
        with pytest.raises(CorruptSnapshot, match=str(path)):
            FileCursorProperties(path)
    for cut in range(len(good)):
        path.write_bytes(good[:cut])
        with pytest.raises(CorruptSnapshot, match=str(path)):
            FileCursorProperties(path)
    path.write_bytes(good + b"\0")
    with pytest.raises(CorruptSnapshot):
        FileCursorProperties(path)
    path.write_bytes(good)
    assert dict(FileCursorProperties(path)) == {f"{BUCKET}_1_3": "7", "k": "v"}


def test_stale_temp_files_of_this_file_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "props"
    FileCursorProperties(path)["a"] = "1"
    (tmp_path / ".props.tmp-0123456789abcdef").write_bytes(b"half")
    (tmp_path / ".other.tmp-0123456789abcdef").write_bytes(b"keep")
    assert dict(FileCursorProperties(path)) == {"a": "1"}
    assert temp_files(tmp_path) == [".other.tmp-0123456789abcdef"]


def test_constructor_argument_types(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputType):
        FileCursorProperties(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputType):
        FileCursorProperties(tmp_path / "p", opener="x")  # type: ignore[arg-type]


def test_threads_changing_distinct_keys(tmp_path: Path) -> None:
    path = tmp_path / "props"
    p = FileCursorProperties(path)
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(10):
                p.apply({f"w{w}_{i}": str(i)}, [f"w{w}_{i - 1}"] if i % 2 else [])
                assert p[f"w{w}_{i}"] == str(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = {f"w{w}_{i}": str(i) for w in range(4) for i in range(1, 10, 2)}  # each odd i dropped i-1
    assert dict(p) == expected
    assert dict(FileCursorProperties(path)) == expected


# -- a dict model ------------------------------------------------------------------------------------

keys = st.sampled_from([f"{BUCKET}_{i}_{i + 1}" for i in range(6)] + ["", "ü", "x" * 30])
values = st.text(max_size=8)


class PropertiesMachine(RuleBasedStateMachine):
    """FileCursorProperties against a dict, with reopen and failed writes."""

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[str, str] = {}
        self.faults = Faults()
        self.dir = Path(tempfile.mkdtemp(prefix="ckprops-"))
        self.path = self.dir / "props"
        self.props = FileCursorProperties(self.path, opener=faulty_opener(self.faults))

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=keys, value=values)
    def set_one(self, key: str, value: str) -> None:
        self.props[key] = value
        self.model[key] = value

    @rule(key=keys)
    def delete_one(self, key: str) -> None:
        if key in self.model:
            del self.props[key]
            del self.model[key]
        else:
            with pytest.raises(KeyError):
                del self.props[key]

    @rule(sets=st.dictionaries(keys, values, max_size=4), deletes=st.lists(keys, max_size=4))
    def apply(self, sets: dict[str, str], deletes: list[str]) -> None:
        if set(sets) & set(deletes):
            with pytest.raises(InvalidArgument):
                self.props.apply(sets, deletes)
            return
        self.props.apply(sets, deletes)
        for k in deletes:
            self.model.pop(k, None)
        self.model.update(sets)

    @precondition(lambda self: len(self.model) > 0)
    @rule(sets=st.dictionaries(keys, values, min_size=1, max_size=3), budget=st.integers(0, 200))
    def failed_apply(self, sets: dict[str, str], budget: int) -> None:
        deletes = [k for k in self.model if k not in sets][:1]
        self.faults.budget = budget
        try:
            self.props.apply(sets, deletes)
        except PersistFailed:
            return  # nothing changed, in memory or on disk (checked by the invariants)
        finally:
            self.faults.budget = None
        for k in deletes:  # the write fit in the budget: the change is durable
            del self.model[k]
        self.model.update(sets)

    @rule()
    def clear(self) -> None:
        self.props.clear()
        self.model.clear()

    @rule()
    def reopen(self) -> None:
        self.props = FileCursorProperties(self.path, opener=faulty_opener(self.faults))

    @invariant()
    def matches_model(self) -> None:
        assert dict(self.props) == self.model
        assert len(self.props) == len(self.model)
        assert temp_files(self.dir) == []

    @invariant()
    def durable(self) -> None:
        assert dict(FileCursorProperties(self.path)) == self.model


PropertiesMachine.TestCase.settings = settings(stateful_step_count=20, deadline=None)
test_properties_machine = PropertiesMachine.TestCase


# -- a cursor store's own properties -----------------------------------------------------------------


def test_a_file_store_keeps_its_properties_beside_its_log(tmp_path: Path) -> None:
    """They survive a reopen, leave what a flush writes and recovers alone, and refuse changes once closed."""
    cursor = Cursor(Position(3, -1), name="sub")
    cursor.ack_many([3, 3], [0, 2])
    with CursorStore.create(tmp_path / "store", name="sub") as store:
        store.cursor_properties.apply({f"{BUCKET}_1_3": "7", f"{BUCKET}_4_9": "8"})
        store.flush(cursor)
        props = store.cursor_properties
        assert props is store.cursor_properties  # one object per store, as one writer per file needs
    with pytest.raises(InvalidArgument, match="closed"):
        props[f"{BUCKET}_10_12"] = "9"
    with pytest.raises(InvalidArgument, match="closed"):
        _ = store.cursor_properties
    with CursorStore.open(tmp_path / "store") as again:
        assert not again.report.damaged
        assert dict(again.cursor_properties) == {f"{BUCKET}_1_3": "7", f"{BUCKET}_4_9": "8"}
        recovered = again.recover()
        assert recovered.mark_delete_position == Position(3, 0)
        assert recovered.individually_deleted == cursor.individually_deleted


def test_the_bucket_tracker_keeps_its_keys_in_a_file_stores_properties(tmp_path: Path) -> None:
    from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage

    now = [1_700_000_000_000]

    def tracker(store: CursorStore) -> BucketDelayedDeliveryTracker:
        return BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(tmp_path / "delayed"),
            store.cursor_properties,
            clock=lambda: now[0],
            background=False,
            min_index_count_per_bucket=10,
        )

    with CursorStore.create(tmp_path / "store", name="sub") as store:
        t = tracker(store)
        for ledger in (1, 2, 3):
            t.add_many([ledger] * 20, list(range(20)), [now[0] + 60_000] * 20)
        t.maintenance()
        sealed = len(t.immutable_buckets)
        t.close()
        assert sealed >= 2 and sum(k.startswith(BUCKET) for k in store.cursor_properties) == sealed
    with CursorStore.open(tmp_path / "store") as store:
        t = tracker(store)
        assert len(t.immutable_buckets) == sealed and not t.recovery_report.damaged
        t.close()
