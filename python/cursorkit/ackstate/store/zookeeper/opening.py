"""Opening a cursor znode: creating it, or recovering its state and taking ownership with a fenced write.

Recovery reads the znode (and the state object it names, if any), falls back to less state when
that object is missing or damaged (reported, never raised), and writes the new owner epoch in with
a versioned write that keeps what it read, within the byte budget.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass

from cursorkit._core import Position, RangeSet
from cursorkit.ackstate import persist
from cursorkit.ackstate.limits import PersistLimits
from cursorkit.ackstate.store.zookeeper.claims import CONFLICT_RETRIES, Claims
from cursorkit.ackstate.store.zookeeper.node import CursorZnode, now_ms
from cursorkit.ackstate.store.zookeeper.reports import ZkRecoveryReport
from cursorkit.ackstate.store.zookeeper.state_objects import StateObjects
from cursorkit.ackstate.store.zookeeper.znode import (
    CursorState,
    EncodedZnode,
    ZnodeContent,
    encode_znode,
    fit_record,
)
from cursorkit.errors import (
    BudgetExceeded,
    CorruptSnapshot,
    Fenced,
    InvalidArgument,
    PersistFailed,
    StoreUnavailable,
)
from cursorkit.proto import pulsar_ml_pb2 as ml
from cursorkit.stores.zookeeper import InDoubt, kazoo_errors

__all__ = ["INITIAL", "Opened", "create_node", "open_node"]

INITIAL = Position(0, -1)
"""The mark-delete of a cursor nothing was acknowledged on."""
_LOST_RETRIES = 3
"""Ownership writes ZooKeeper may leave unconfirmed (connection lost) before opening gives up."""
_BYTES_ONLY = PersistLimits(
    max_unacked_ranges_to_persist=2**62,
    max_unacked_ranges_to_persist_in_metadata_store=2**62,
    max_batch_deleted_index_to_persist=2**62,
    max_entry_bytes=2**62,
)
"""Limits that leave only the byte budget to cut a record (an ownership write keeps what it read)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """What opening found: the state to recover, the string properties, and the report."""

    state: CursorState
    strings: dict[str, str]
    report: ZkRecoveryReport


def create_node(node: CursorZnode, claims: Claims, *, max_bytes: int) -> Opened | int:
    """Creates the znode with this store as its first owner.

    Returns the epoch another opener claimed meanwhile instead, for :func:`open_node` to write over.
    """
    kex = kazoo_errors()
    node.epoch = claims.read()[0] + 1
    encoded = encode_znode(
        mark_delete=INITIAL,
        acked=RangeSet(),
        batches=[],
        properties={},
        string_properties={},
        cursorkit=node.record(1),
        limits=PersistLimits(),
        max_bytes=max_bytes,
        last_active_ms=now_ms(),
        who=node.who,
    )
    what = f"{node.who}: create"
    try:
        node.session.call(
            node.session.client.create_async,
            node.path,
            encoded.data,
            None,
            False,
            False,
            True,
            what=what,
            write=True,
        )
    except kex.NodeExistsError as e:
        raise FileExistsError(errno.EEXIST, "a cursor znode already exists", str(node.location)) from e
    except InDoubt as e:
        # Ours if the znode now holds our owner label; anything else is someone else's cursor.
        content, _stat = node.read()
        if content.cursorkit is None or content.cursorkit.owner != node.label:
            raise FileExistsError(errno.EEXIST, "a cursor znode already exists", str(node.location)) from e
    except kex.KazooException as e:
        raise PersistFailed(errno.EIO, f"{what} failed ({type(e).__name__} {e})") from e
    node.version = 0
    node.sequence = 1
    node.last_data = encoded.data
    if node.objects is not None:
        node.objects.collect_due = False
    claimed = claims.claim(node.epoch - 1)
    if claimed != node.epoch:  # another opener claimed it meanwhile: write our epoch in
        return claimed
    claims.watch()
    report = ZkRecoveryReport(
        location=str(node.location),
        version=0,
        owner_epoch=node.epoch,
        previous_epoch=0,
        previous_owner=None,
        sequence=1,
        written_by="cursorkit",
        state_source="znode",
        state_object=None,
        mark_delete=INITIAL,
        ranges=0,
        ranges_recorded=0,
        batches=0,
        batches_recorded=0,
        properties=0,
        cursor_properties=0,
    )
    return Opened(CursorState(INITIAL, RangeSet(), [], {}), {}, report)


def _load_state(
    node: CursorZnode,
    content: ZnodeContent,
    fallbacks: list[str],
    reads: dict[tuple[str, bytes], CursorState | str],
) -> tuple[CursorState, str]:
    """The state a znode's content leads to (its state object when it names one).

    ``reads`` keeps each state object's outcome by key and digest (objects are immutable), so
    re-reading the znode while opening does not fetch and decode the same object again.
    """
    info = content.info
    ck = content.cursorkit
    if content.state is None:
        md = (
            Position(info.markDeleteLedgerId, info.markDeleteEntryId)
            if info.HasField("markDeleteLedgerId")
            else INITIAL
        )
        try:
            md = persist.mark_delete_of(md.ledger_id, md.entry_id)
        except ValueError as e:
            raise CorruptSnapshot(f"{node.who}: {e}") from e
        fallbacks.append(
            f"the ack state lives in BookKeeper cursor ledger {info.cursorsLedgerId}, which cursorkit "
            f"does not read: recovered the znode's mark-delete {md} and properties; acks after "
            "it will be redelivered"
        )
        props = {p.name: p.value for p in info.properties}
        return CursorState(md, RangeSet(), [], props), "mark-delete only"
    if ck is None or not ck.HasField("state"):
        return content.state, "znode"
    objects: StateObjects | None = node.objects
    if objects is None:
        raise InvalidArgument(
            f"{node.who}: its whole state is in state object {ck.state.key}; "
            "open it with objects= (the object store that holds it)"
        )
    where = f"{objects.store.uri}/{ck.state.key}"
    full = reads.get((ck.state.key, ck.state.sha256))
    if full is None:
        full = reads[(ck.state.key, ck.state.sha256)] = objects.read(ck.state, where)
    if isinstance(full, str):
        reason = full
    else:
        if full.mark_delete != content.state.mark_delete:
            reason = f"holds mark-delete {full.mark_delete}, the znode {content.state.mark_delete}"
        else:
            return CursorState(full.mark_delete, full.acked, full.batches, content.state.properties), "object"
    fallbacks.append(
        f"state object {where} {reason}: recovered the znode's own state "
        f"({len(content.state.acked)} of {ck.ranges_total} ranges, "
        f"{len(content.state.batches)} of {ck.batches_total} partial batches); "
        "the acks left out will be redelivered"
    )
    return content.state, "znode"


def _ownership_record(
    node: CursorZnode, content: ZnodeContent, state: CursorState, sequence: int, max_bytes: int
) -> EncodedZnode:
    """The znode bytes that take ownership: the record as read, with ours, within the budget.

    Plain when it fits ``max_bytes``, else Pulsar's ZLIB form. When neither does (a znode Pulsar
    wrote under a larger ``jute.maxbuffer``), the recovered state is written with the ranges and
    batches that fit; the store still holds all of them (:attr:`ZkRecoveryReport.ranges_left_out`).
    Raises ``BudgetExceeded`` when not even that fits.
    """
    ck = content.cursorkit
    record = node.record(sequence, ck.state if ck is not None and ck.HasField("state") else None)
    if ck is not None:
        record.ranges_total = ck.ranges_total
        record.batches_total = ck.batches_total
        record.batch_sizes.extend(ck.batch_sizes)
        if ck.HasField("redelivery_counts"):  # carried over to the new owner as they are
            record.redelivery_counts = ck.redelivery_counts
            record.redelivery_runs_left_out = ck.redelivery_runs_left_out
    info = ml.ManagedCursorInfo()
    info.CopyFrom(content.info)
    info.cursorkit.CopyFrom(record)
    raw = info.SerializeToString()
    data, codec = fit_record(raw, max_bytes)
    held = content.state
    if len(data) <= max_bytes:
        ranges = len(held.acked) if held is not None else 0
        batches = len(held.batches) if held is not None else 0
        return EncodedZnode(data, ranges, ranges, batches, batches, codec)
    refused = BudgetExceeded(
        f"{node.who}: taking ownership needs a {len(raw):,}-byte record ({len(data):,} bytes "
        f"compressed), more than max_znode_bytes {max_bytes:,}; not sent (ZooKeeper drops "
        "the connection of a request past its jute.maxbuffer)"
    )
    if held is None:  # the state lives in a cursor ledger: the record is not cursorkit's to cut
        raise refused
    record.ClearField("batch_sizes")  # encode_znode writes those of the batches it keeps
    try:
        return encode_znode(
            mark_delete=state.mark_delete,
            acked=state.acked,
            batches=state.batches,
            properties=state.properties,
            string_properties=content.string_properties,
            cursorkit=record,
            limits=_BYTES_ONLY,
            max_bytes=max_bytes,
            last_active_ms=info.lastActive if info.HasField("lastActive") else now_ms(),
            who=node.who,
        )
    except InvalidArgument as e:  # its properties alone pass the budget
        raise refused from e


def open_node(
    node: CursorZnode,
    claims: Claims,
    *,
    max_bytes: int,
    read_only: bool,
    name_given: bool,
    claimed: int | None = None,
) -> Opened:
    """Recovers the znode's state and (unless ``read_only``) takes ownership with a fenced write."""
    kex = kazoo_errors()
    conflicts = 0
    lost: list[str] = []
    written: EncodedZnode | None = None
    epoch = claimed
    reads: dict[tuple[str, bytes], CursorState | str] = {}
    for attempt in range(CONFLICT_RETRIES):
        content, stat = node.read()
        fallbacks: list[str] = []
        state, source = _load_state(node, content, fallbacks, reads)
        ck = content.cursorkit
        previous_epoch = ck.owner_epoch if ck is not None else 0
        sequence = ck.sequence if ck is not None else 0
        if ck is not None and ck.cursor_name and not name_given:
            node.name = ck.cursor_name
        if read_only:
            node.version = stat.version
            break
        if epoch is None:  # claim first: the old owner stops writing once its watch sees it
            epoch = claims.claim(previous_epoch)
            continue
        if previous_epoch > epoch:
            raise Fenced(
                f"{node.who}: owner epoch {previous_epoch} took the cursor over while this store "
                f"was opening it with epoch {epoch}",
                owner_epoch=epoch,
                current_epoch=previous_epoch,
            )
        if attempt > 1:
            time.sleep(0.002 * attempt)  # the old owner's last write is still landing
        node.epoch = epoch
        written = _ownership_record(node, content, state, sequence + 1, max_bytes)
        data = written.data
        what = f"{node.who}: take ownership"
        try:
            new = node.set(data, stat.version, what)
        except kex.BadVersionError:
            conflicts += 1
            continue
        except kex.NoNodeError as e:
            raise FileNotFoundError(errno.ENOENT, "no cursor znode", str(node.location)) from e
        except InDoubt as e:
            check, check_stat = node.read()
            if check.cursorkit is None or check.cursorkit.owner != node.label:
                if check_stat.version != stat.version:
                    conflicts += 1  # another writer's change landed: read it again
                    continue
                lost.append(str(e))  # nothing landed: the connection, not another writer
                if len(lost) >= _LOST_RETRIES:
                    raise StoreUnavailable(
                        f"{what}: ZooKeeper confirmed none of {len(lost)} tries of the "
                        f"{len(data):,}-byte write (last: {lost[-1]})"
                    ) from e
                continue
            new = check_stat
        except kex.KazooException as e:
            raise StoreUnavailable(f"{what} failed ({type(e).__name__} {e})") from e
        node.version = new.version
        sequence += 1
        node.last_data = data
        break
    else:
        raise StoreUnavailable(
            f"{node.who}: other writers changed the znode {conflicts} times while opening it"
            + (f" (and {len(lost)} writes went unconfirmed: {lost[-1]})" if lost else "")
        )
    if not read_only:
        claims.watch()
    left_out = (0, 0)
    if written is not None and not (ck is not None and ck.HasField("state")):
        left_out = (
            max(0, len(state.acked) - written.ranges_inline),
            max(0, len(state.batches) - written.batches_inline),
        )
    node.sequence = sequence
    node.ref = ck.state if ck is not None and ck.HasField("state") else None
    node.conflicts = conflicts
    strings = dict(content.string_properties)
    report = ZkRecoveryReport(
        location=str(node.location),
        version=node.version,
        owner_epoch=node.epoch if not read_only else 0,
        previous_epoch=previous_epoch,
        previous_owner=ck.owner if ck is not None and ck.HasField("owner") else None,
        sequence=sequence,
        written_by="cursorkit" if ck is not None else "pulsar",
        state_source=source,
        state_object=node.ref.key if node.ref is not None else None,
        mark_delete=state.mark_delete,
        ranges=len(state.acked),
        ranges_recorded=max(ck.ranges_total if ck is not None else 0, len(state.acked)),
        batches=len(state.batches),
        batches_recorded=max(ck.batches_total if ck is not None else 0, len(state.batches)),
        properties=len(state.properties),
        cursor_properties=len(strings),
        compression=content.compression,
        conflicts=conflicts,
        znode_bytes=len(written.data) if written is not None else 0,
        written_compression=written.compression if written is not None else None,
        ranges_left_out=left_out[0],
        batches_left_out=left_out[1],
        fallbacks=tuple(fallbacks),
    )
    return Opened(state, strings, report)
