"""Hostile input on every path: decoders, stores on disk, and random API calls with boundary values.

Each decoder gets its valid encodings truncated at every byte, every byte flipped, a crafted huge
length (a 10-byte varint) spliced in at every byte, random overwrites and random bytes. Every case
must end in a value or a ``cursorkit.errors`` exception: a ``PanicException`` (a BaseException) or
any other exception type fails the test, and so does a case over 1 s or 256 MiB of Rust heap. The
per-decoder tallies (cases, outcomes, worst time, worst heap) are printed with ``-s`` and written to
``$CURSORKIT_FUZZ_REPORT`` when set. CI runs the bounded counts; ``make fuzz`` the long ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cursorkit import Cursor, Position, RangeSet, _core
from cursorkit.ackstate.store import CursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage, FileCursorProperties
from cursorkit.errors import CursorkitError
from cursorkit.pipeline.load import parse_manifest
from fuzz_budget import LONG, runs

pytestmark = pytest.mark.fuzz

MAX_SECONDS = 1.0
MAX_HEAP = 256 * 1024 * 1024
HUGE_VARINT = bytes([0xFF] * 9 + [0x01])
RANDOM_CASES = runs(1_000, 40_000)
"""Random overwrites and random byte strings per decoder, on top of the exhaustive mutations."""
STORE_RANDOM_CASES = runs(250, 40_000)
"""The same for the stores on disk, where each case copies a directory and opens a store: in CI the
exhaustive mutations (every cut, flip and crafted length) stay whole and the random ones shrink."""
FLIPS = (0xFF, 0x80, 0x01) if LONG else (0xFF, 0x01)
TALLIES: dict[str, Tally] = {}


@dataclass
class Tally:
    """What one decoder did with its cases."""

    cases: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    worst_s: float = 0.0
    worst_heap: int = 0

    def row(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "ok": self.ok,
            "errors": dict(self.errors),
            "worst_ms": round(self.worst_s * 1000, 2),
            "worst_heap_mib": round(self.worst_heap / 2**20, 2),
        }


def probe(name: str, fn: Callable[[bytes], object], data: bytes) -> None:
    """One case: a value or a typed error, within the time and memory bounds."""
    tally = TALLIES.setdefault(name, Tally())
    _core.reset_heap_peak()
    base = _core.heap_allocated()
    t0 = time.perf_counter()
    try:
        fn(data)
        tally.ok += 1
    except CursorkitError as e:
        tally.errors[type(e).__name__] += 1
    except Exception as e:  # untyped: a defect
        raise AssertionError(f"{name}: untyped {type(e).__name__}: {e} on {data[:64]!r}…") from e
    except BaseException as e:  # a Rust panic reaching Python, or worse
        raise AssertionError(f"{name}: {type(e).__name__} escaped: {e} on {data[:64]!r}…") from e
    elapsed = time.perf_counter() - t0
    heap = _core.heap_peak() - base
    tally.cases += 1
    tally.worst_s = max(tally.worst_s, elapsed)
    tally.worst_heap = max(tally.worst_heap, heap)
    assert elapsed < MAX_SECONDS, f"{name}: {elapsed:.2f} s on {len(data)} bytes"
    assert heap < MAX_HEAP, f"{name}: {heap} bytes of Rust heap on {len(data)} bytes"


def mutations(seed: bytes, rng: random.Random, random_cases: int = RANDOM_CASES) -> Iterator[bytes]:
    """Every truncation, flip and crafted length of ``seed``, then random overwrites and bytes."""
    yield seed
    for cut in range(len(seed)):
        yield seed[:cut]
    for at in range(len(seed)):
        for flip in FLIPS:
            yield seed[:at] + bytes([seed[at] ^ flip]) + seed[at + 1 :]
        yield seed[:at] + HUGE_VARINT + seed[at:]
    for _ in range(random_cases):
        m = bytearray(seed)
        for _ in range(rng.randint(1, 4)):
            if m:
                m[rng.randrange(len(m))] = rng.randrange(256)
        yield bytes(m)
        yield rng.randbytes(rng.randint(0, 96))


def hammer(
    name: str, seeds: list[bytes], fn: Callable[[bytes], object], random_cases: int = RANDOM_CASES
) -> None:
    rng = random.Random(name)
    for seed in seeds:
        for data in mutations(seed, rng, random_cases):
            probe(name, fn, data)
    assert TALLIES[name].cases > 0


def sample_cursor() -> Cursor:
    c = Cursor(Position(1, -1), name="fuzz", properties={"k": 7, "n": -3})
    for e in (2, 3, 9, 70_000):
        c.ack(Position(1, e))
    c.ack(Position(3, 2**32 - 1))
    c.ack_batch_index(Position(1, 5), 1, 8)
    c.ack_batch_index(Position(2, 0), 3, 70)
    return c


# -- byte decoders ------------------------------------------------------------------------------------


def test_rangeset_compact_bytes() -> None:
    rs = RangeSet()
    rs.add_open_closed(1, -1, 1, 5)
    rs.add_open_closed(2, 9, 2, 70_000)
    hammer(
        "RangeSet.from_bytes", [rs.to_bytes(), RangeSet(pulsar_quirks=True).to_bytes()], RangeSet.from_bytes
    )


@pytest.mark.parametrize("encoding", ["compact", "message_range", "long_list_map", "managed_cursor_info"])
def test_cursor_encodings(encoding: str) -> None:
    seeds = [sample_cursor().encode(encoding), Cursor().encode(encoding)]
    sizes = {1: 80_000, 2: 100, 3: 2**32}
    hammer(f"Cursor.decode({encoding})", seeds, lambda d: Cursor.decode(d, encoding, ledger_sizes=sizes))


def _znode_seeds() -> list[bytes]:
    from cursorkit.ackstate.store.zookeeper.znode import encode_znode
    from cursorkit.proto import cursor_znode_pb2 as zpb
    from cursorkit.proto import pulsar_ml_pb2 as ml

    c = sample_cursor()
    ck = zpb.CursorkitState(format_version=1, owner_epoch=3, sequence=9, owner="fuzz", cursor_name="fuzz")
    ck.state.key, ck.state.size, ck.state.sha256 = "cursors/x/1-2.state", 99, bytes(32)
    ours = encode_znode(
        mark_delete=c.mark_delete_position,
        acked=c.individually_deleted,
        batches=c.batches(),
        properties=c.properties,
        string_properties={"#pulsar.internal.delayed.bucket_1_2": "7"},
        cursorkit=ck,
        limits=c.limits,
        max_bytes=4096,
        last_active_ms=5,
        who="fuzz",
    ).data
    raw = c.encode("managed_cursor_info")
    meta = ml.ManagedCursorInfoMetadata(
        compressionType=ml.ZLIB, uncompressedSize=len(raw)
    ).SerializeToString()
    zlibbed = (0x4778).to_bytes(2, "big") + len(meta).to_bytes(4, "big") + meta + zlib.compress(raw)
    return [ours, raw, zlibbed]


def test_cursor_znodes() -> None:
    from cursorkit.ackstate.store.zookeeper.znode import read_znode

    hammer("read_znode", _znode_seeds(), lambda d: read_znode(d, "fuzz", {1: 80_000, 2: 100, 3: 2**32}))


def test_cursor_state_objects() -> None:
    from cursorkit.ackstate.store.zookeeper.znode import read_state_object, state_object
    from cursorkit.proto import cursor_znode_pb2 as zpb

    c = sample_cursor()
    md, ledgers, _live, batches, _ = c.flush_state(dirty_only=False, clear_dirty=False)
    blobs = [(lid, b) for lid, b in ledgers if b is not None]
    seed = state_object(
        path="/a/b", epoch=2, sequence=7, mark_delete=md, blobs=blobs, batches=batches, properties={}
    )

    def decode(d: bytes) -> object:
        ref = zpb.StateObject(key="k", size=len(d), sha256=hashlib.sha256(d).digest())  # past the checksum
        return read_state_object(d, ref, path="/a/b", epoch=2, sequence=7, where="fuzz")

    hammer("read_state_object", [seed], decode)


def test_snapshot_segments() -> None:
    ts = np.array([5, 6, 6, 90], dtype=np.int64)
    seeds = [
        _core.encode_segment(ts, np.array([1, 1, 2, 3]), np.array([0, 4, 1, 2**32 - 1])),
        _core.encode_segment(ts[:0], ts[:0], ts[:0]),
    ]
    hammer("decode_segment", seeds, _core.decode_segment)


def test_roaring_portable_bitmaps() -> None:
    rs = RangeSet()
    rs.add_open_closed(1, -1, 1, 70_000)
    rs.add_many(np.full(50, 2), np.arange(0, 5000, 100))
    seeds = [b for b in (rs.ledger_to_bytes(1), rs.ledger_to_bytes(2)) if b is not None]

    def decode(d: bytes) -> object:
        _core.bitmap_cardinality(d)
        return RangeSet().set_ledger_bytes(1, d)

    hammer("roaring portable bitmap", seeds, decode)


def test_rebuild_manifest(tmp_path: Path) -> None:
    doc = {
        "format": "cursorkit-rebuild",
        "version": 1,
        "topic": "t",
        "now_ms": 5,
        "subscriptions": {"s": "cursors/s"},
        "delayed": {"storage": "d", "properties": "p", "topic": "t", "cursor": "c"},
    }
    path = tmp_path / "manifest.json"

    def decode(d: bytes) -> object:
        path.write_bytes(d)
        return parse_manifest(path)

    hammer("manifest.json", [json.dumps(doc).encode()], decode)
    probe("manifest.json", decode, b"[" * 100_000 + b"]" * 100_000)  # nested past the parser's limit


# -- stores on disk --------------------------------------------------------------------------------------


def test_cursor_store_log(tmp_path: Path) -> None:
    base = tmp_path / "base"
    store = CursorStore.create(base, name="fuzz")
    c = sample_cursor()
    store.flush(c)
    c.ack(Position(4, 4))
    store.flush(c)
    store.close()
    (log,) = base.glob("cursor-*.log")
    work = tmp_path / "work"

    def decode(d: bytes) -> object:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        (work / log.name).write_bytes(d)
        with CursorStore.open(work) as s:
            return s.recover()

    hammer("CursorStore log", [log.read_bytes()], decode, STORE_RANDOM_CASES)

    def decode_meta(d: bytes) -> object:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        (work / "store.meta").write_bytes(d)
        with CursorStore.open(work) as s:
            return s.recover()

    hammer("CursorStore store.meta", [(base / "store.meta").read_bytes()], decode_meta, STORE_RANDOM_CASES)


def test_bucket_snapshot_files_and_recovery(tmp_path: Path) -> None:
    """A damaged bucket file is reported by storage reads and by recovery, which never raises."""
    base = tmp_path / "base"
    t = BucketDelayedDeliveryTracker(
        FileBucketSnapshotStorage(base / "snaps"),
        FileCursorProperties(base / "props"),
        clock=lambda: 0,
        background=False,
        tick_time_ms=0,
        min_index_count_per_bucket=4,
        max_indexes_per_segment=2,
        max_time_step_per_segment_ms=10,
    )
    for e in range(6):
        t.add_message(1, e, 100 + 7 * e)
    t.add_message(2, 0, 500)
    t.close()
    (bucket,) = list((base / "snaps").glob("bucket-*.snap"))
    work = tmp_path / "work"
    now = [0]

    def decode(d: bytes) -> object:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        (work / "snaps" / bucket.name).write_bytes(d)
        r = BucketDelayedDeliveryTracker(
            FileBucketSnapshotStorage(work / "snaps"),
            FileCursorProperties(work / "props"),
            clock=lambda: now[0],
            background=False,
        )
        now[0] = 10_000
        while r.has_message_available():  # lazy loads meet the damage too: never a stall
            assert len(r.get_scheduled_messages(3)), "available, yet nothing delivered"
        now[0] = 0
        r.close()
        return r

    hammer("bucket snapshot file + recovery", [bucket.read_bytes()], decode, STORE_RANDOM_CASES)


def test_cursor_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "props"
    props = FileCursorProperties(path)
    props.apply({"#pulsar.internal.delayed.bucket_1_1": "3", "k": "v"})
    seed = path.read_bytes()

    def decode(d: bytes) -> object:
        path.write_bytes(d)
        return dict(FileCursorProperties(path))

    hammer("FileCursorProperties", [seed], decode)


# -- random API calls with boundary values ------------------------------------------------------------

EDGES = [-(2**64), -(2**63), -(2**32), -2, -1, 0, 1, 5, 2**31 - 1, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63]


def test_random_cursor_and_rangeset_calls() -> None:
    """Random calls with edge values: every outcome is a result or a typed error, never a panic."""
    rng = random.Random(2026)

    def num() -> int:
        return rng.choice(EDGES) if rng.random() < 0.6 else rng.randint(-3, 100)

    def pos() -> Position:
        while True:
            try:
                return Position(num(), num())
            except CursorkitError:
                continue

    def sizes() -> dict[int, int]:
        return {rng.randint(0, 5): rng.choice([0, 1, 10, 2**32, 2**32 + 1, 2**63, -1]) for _ in range(2)}

    cursor, rs = Cursor(), RangeSet()
    calls: list[Callable[[], object]] = [
        lambda: cursor.ack(pos()),
        lambda: cursor.ack_cumulative(pos()),
        lambda: cursor.ack_batch_index(pos(), num(), num()),
        lambda: cursor.is_acked(pos()),
        lambda: cursor.backlog(sizes()),
        lambda: cursor.next_unacked(pos(), num(), sizes()),
        lambda: cursor.skip(num(), sizes()),
        lambda: cursor.reset(pos()),
        lambda: cursor.stats(),
        lambda: cursor.encode(rng.choice(["compact", "message_range", "long_list_map"])),
        lambda: cursor.restore(pos(), rs, [(num(), num(), num(), rng.randbytes(rng.choice([0, 8, 9, 16])))]),
        lambda: rs.add(num(), num()),
        lambda: rs.add_open_closed(num(), num(), num(), num()),
        lambda: rs.remove_at_most(num(), num()),
        lambda: rs.contains(num(), num()),
        lambda: rs.cardinality(num(), num(), num(), num()),
        lambda: rs.range_containing(num(), num()),
        lambda: RangeSet.from_long_list_map(
            {num(): np.array([num() % 2**63 for _ in range(3)], dtype=np.int64)}
        ),
        lambda: rs.to_long_list_map(),
        lambda: rs.message_range_wire_size(),
        lambda: rs.long_list_map_wire_size(),
    ]
    for i in range(runs(20_000, 1_000_000)):
        call = rng.choice(calls)
        probe("random API calls", lambda _d, call=call: call(), b"")
        if i % 500 == 499:  # fresh state now and then, so calls keep meeting small states too
            cursor, rs = Cursor(), RangeSet()
    assert TALLIES["random API calls"].ok > 0


def test_random_dispatch_core_calls() -> None:
    """Random calls on the Rust dispatch core and the dispatcher around it.

    Edge values and wrong types: every outcome is a result or a typed error, never a panic or a hang.
    """
    from cursorkit.keyshared import ConsistentHashingSelector, KeySharedDispatcher

    rng = random.Random(14)

    def num() -> Any:
        return rng.choice([*EDGES, 0, 1, 2, 3, 65535, 65536, "x", 1.5, None, True])

    def col(n: int | None = None) -> Any:
        k = rng.randint(0, 6) if n is None else n
        kind = rng.random()
        if kind < 0.6:
            return np.array([rng.choice([0, 1, 2, 5, 65535, -1, 2**40]) for _ in range(k)], dtype=np.int64)
        if kind < 0.8:
            return [num() for _ in range(k)]
        return rng.choice([np.zeros((2, 2)), np.array([1.5, float("nan")]), "abc", None, b"xy"])

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    modes = ["draining", "last-sent", "out-of-order"]
    cursor = Cursor()
    core = _core.DispatchCore(rng.choice(modes))
    d = KeySharedDispatcher(selector=ConsistentHashingSelector(), cursor=cursor, mode=rng.choice(modes))
    pool = [Named(f"c{i}") for i in range(4)]
    calls: list[Callable[[], object]] = [
        lambda: core.add_consumer(num(), num(), cursor),
        lambda: core.remove_consumer(num(), cursor),
        lambda: core.set_owners(col(rng.choice([0, 3, 65536, 70000]))),
        lambda: core.assign([(num(), [(num(), num())])]),
        lambda: core.register_moved([(num(), [(num(), num())])], num()),
        lambda: core.add_permits(num(), num()),
        lambda: core.add_read(*(col(3) for _ in range(3)), cursor),
        lambda: core.add_replay(*(col() for _ in range(3)), cursor),
        lambda: core.dispatch(cursor),
        lambda: core.dispatch(rng.choice([None, RangeSet(), 5])),
        lambda: core.ack(num(), col(3), col(3), cursor),
        lambda: core.ack_one(num(), num(), num(), cursor),
        lambda: core.nack(num(), col(2), col(2), cursor),
        lambda: core.redeliver(num(), cursor),
        lambda: core.unacked(num()),
        lambda: core.consumer_figures(num()),
        lambda: core.redelivery_counts(col(2), col(2)),
        lambda: core.blocked(),
        lambda: core.take_rewind(),
        lambda: d.add_consumer(rng.choice(pool), rng.choice([0, 1, 10, -1, 2**70])),
        lambda: d.remove_consumer(rng.choice(pool)),
        lambda: d.add_permits(rng.choice(pool), rng.choice([0, 3, -1])),
        lambda: d.add_read_columns(col(3), col(3), col(3)),
        lambda: d.dispatch_columns(),
        lambda: d.ack_columns(rng.choice(pool), col(2), col(2)),
        lambda: d.ack(rng.choice(pool), rng.choice([Position(0, 1), Position(1, 2), "p"])),
        lambda: d.nack(rng.choice(pool), [Position(0, rng.randint(0, 5))]),
        lambda: d.redeliver(rng.choice(pool)),
        lambda: d.stats(),
        lambda: cursor.ack(num(), num()),
    ]
    for i in range(runs(6_000, 500_000)):  # the seed is fixed: CI runs the first 6,000 of the long run
        call = rng.choice(calls)
        probe("random dispatch calls", lambda _d, call=call: call(), b"")
        if i % 400 == 399:
            cursor = Cursor()
            core = _core.DispatchCore(rng.choice(modes))
            d = KeySharedDispatcher(
                selector=ConsistentHashingSelector(), cursor=cursor, mode=rng.choice(modes)
            )
    assert TALLIES["random dispatch calls"].ok > 0


def teardown_module() -> None:
    """The tallies: printed (visible with ``-s``) and written to ``$CURSORKIT_FUZZ_REPORT``."""
    rows = {name: t.row() for name, t in sorted(TALLIES.items())}
    total = sum(t.cases for t in TALLIES.values())
    print(f"\nfuzz cases: {total}")
    for name, row in rows.items():
        print(f"  {name:36} {row}")
    target = os.environ.get("CURSORKIT_FUZZ_REPORT")
    if target:
        Path(target).write_text(json.dumps({"total": total, "decoders": rows}, indent=2))
