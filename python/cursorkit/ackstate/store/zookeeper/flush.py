"""Flushing a cursor to its znode: encode (and a state object when the znode cannot hold it), send, settle.

A flush is prepared under the store's lock, sent without waiting, and settled when its result is
asked for, so many stores' flushes travel together on one session (:func:`send_together`). Flushes
of one store still land in order: preparing one settles the one before it.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cursorkit._core import Position, RangeSet, RedeliveryCounts
from cursorkit.ackstate import persist
from cursorkit.ackstate.cursor import Cursor
from cursorkit.ackstate.store.zookeeper.node import CursorZnode, now_ms
from cursorkit.ackstate.store.zookeeper.redeliveries import budget_of, encode_counts
from cursorkit.ackstate.store.zookeeper.reports import ZkFlushResult
from cursorkit.ackstate.store.zookeeper.znode import EncodedZnode, cursor_info_bytes, encode_znode, fit_record
from cursorkit.errors import InvalidArgument, InvalidInputType, PersistFailed
from cursorkit.proto import cursor_znode_pb2 as zpb
from cursorkit.proto import pulsar_ml_pb2 as ml

if TYPE_CHECKING:
    from kazoo.interfaces import IAsyncResult

__all__ = ["FlushWriter", "PendingFlush", "send_together"]


class PendingFlush:
    """A flush sent to ZooKeeper (or about to be) and not yet confirmed; :meth:`result` waits for it."""

    def __init__(
        self,
        writer: FlushWriter,
        *,
        data: bytes,
        sequence: int,
        ref: zpb.StateObject | None,
        cursor: Cursor,
        mutations: int,
        properties: dict[str, int],
        sizes: tuple[int, int, int, int, int],
        started: float,
        skipped: ZkFlushResult | None = None,
        compression: str | None = None,
        counts_left_out: int | None = None,
    ) -> None:
        self.writer = writer
        self.call: IAsyncResult | None = None
        self.data = data
        self.sequence = sequence
        self.ref = ref
        self.cursor = cursor
        self.mutations = mutations
        self.properties = properties
        self.sizes = sizes  # object bytes, ranges total, ranges inline, ranges cut, batches cut
        self.started = started
        self.compression = compression
        self.counts_left_out = counts_left_out
        """Runs of redelivery counts the write leaves out; None when it holds no counts."""
        self.outcome: ZkFlushResult | BaseException | None = skipped

    def result(self) -> ZkFlushResult:
        """The flush's result once ZooKeeper confirmed it; raises what made it fail."""
        self.writer.finish(self)
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        assert self.outcome is not None
        return self.outcome

    def not_sent(self, e: Exception) -> None:
        """Records that the flush never left (its state object, if any, is taken back)."""
        node = self.writer.node
        if node.objects is not None:
            node.objects.drop(self.ref)
        self.outcome = PersistFailed(errno.EIO, f"{node.who}: flush not sent ({type(e).__name__} {e})")

    def done(self) -> bool:
        """Whether the outcome is known (it may still have to be collected by :meth:`result`)."""
        return self.outcome is not None or (self.call is not None and self.call.ready())


class FlushWriter:
    """One store's flushes and property writes; ``check`` raises when the store may not write."""

    def __init__(
        self, node: CursorZnode, lock: threading.RLock, check: Callable[[], None], max_bytes: int
    ) -> None:
        self.node = node
        self.max_bytes = max_bytes
        self.strings: dict[str, str] = {}
        """The znode's string ``cursorProperties`` as last written."""
        self._lock = lock
        self._check = check
        self._inflight: PendingFlush | None = None
        self._bound: Cursor | None = None
        self._bound_mutations = -1
        self._bound_props: dict[str, int] | None = None
        self.counts: RedeliveryCounts | None = None
        """The store's redelivery counts once loaded: every write then carries them."""
        self._counts_unsaved = False
        self._left_out: int | None = None

    def bind(self, cursor: Cursor, mutations: int, props: dict[str, int]) -> None:
        """Records ``cursor`` as in the znode at ``mutations``: an unchanged cursor's flush is skipped."""
        self._bound = cursor
        self._bound_mutations = mutations
        self._bound_props = props

    def prepare(self, cursor: Cursor, *, full: bool, force: bool) -> PendingFlush:
        """Encodes a flush (and stores its state object, if any); :meth:`send` sends it."""
        if not isinstance(cursor, Cursor):
            raise InvalidInputType(f"cursor must be a Cursor, got {type(cursor).__name__}")
        started = time.perf_counter()
        node = self.node
        with self._lock:
            self._check()
            self.settle_inflight()
            props = persist.checked_properties(cursor.properties, node.who) if cursor.properties else {}
            if (
                not (full or force)
                and cursor is self._bound
                and cursor.mutations == self._bound_mutations
                and props == self._bound_props
                and not (self.counts is not None and (self._counts_unsaved or self.counts.has_changes))
            ):
                done = ZkFlushResult(
                    skipped=True,
                    bytes_written=0,
                    znode_bytes=0,
                    object_bytes=0,
                    version=node.version,
                    sequence=node.sequence,
                    ranges_total=cursor.non_contiguous_deleted_ranges,
                    ranges_inline=0,
                    ranges_cut=0,
                    batches_cut=0,
                    conflicts=0,
                    duration_s=time.perf_counter() - started,
                )
                nothing = (0, 0, 0, 0, 0)
                return PendingFlush(
                    self,
                    data=b"",
                    sequence=node.sequence,
                    ref=None,
                    cursor=cursor,
                    mutations=cursor.mutations,
                    properties=props,
                    sizes=nothing,
                    started=started,
                    skipped=done,
                )
            md, acked, batches, mutations, _ = _snapshot(cursor, blobs=False)
            if self.counts is not None and self.counts.has_changes:
                self.counts.take_delta()
                self._counts_unsaved = True
            sequence = node.next_sequence()
            encoded = self._encode(md, acked, batches, props, cursor, sequence, None)
            ref: zpb.StateObject | None = None
            object_bytes = 0
            if not encoded.complete and node.objects is not None:
                md, acked, batches, mutations, blobs = _snapshot(cursor, blobs=True)
                ref, object_bytes = node.objects.put(
                    epoch=node.epoch,
                    sequence=sequence,
                    mark_delete=md,
                    blobs=blobs,
                    batches=batches,
                    properties=props,
                )
                encoded = self._encode(md, acked, batches, props, cursor, sequence, ref)
            data = encoded.data
            ranges_cut = 0 if ref is not None else encoded.ranges_total - encoded.ranges_inline
            batches_cut = 0 if ref is not None else encoded.batches_total - encoded.batches_inline
            if ranges_cut or batches_cut:
                cursor.truncations.record(
                    persist.PersistResult(
                        "managed_cursor_info",
                        data,
                        encoded.ranges_total,
                        encoded.ranges_inline,
                        encoded.batches_total,
                        encoded.batches_inline,
                    )
                )
            pending = PendingFlush(
                self,
                data=data,
                sequence=sequence,
                ref=ref,
                cursor=cursor,
                mutations=mutations,
                properties=props,
                sizes=(object_bytes, encoded.ranges_total, encoded.ranges_inline, ranges_cut, batches_cut),
                started=started,
                compression=encoded.compression,
                counts_left_out=self._left_out,
            )
            self._inflight = pending
            return pending

    def send(self, pending: PendingFlush) -> None:
        """Sends a prepared flush with the version the store holds (nothing to send when skipped)."""
        if pending.outcome is not None:
            return
        try:
            pending.call = self.node.session.client.set_async(self.node.path, pending.data, self.node.version)
        except Exception as e:  # noqa: BLE001 - the flush's result() reports it
            pending.not_sent(e)

    def finish(self, pending: PendingFlush) -> None:
        """Sends ``pending`` if it is not yet, and waits for its outcome (kept in ``pending.outcome``)."""
        with self._lock:
            if pending.outcome is None and pending.call is None:
                self.send(pending)
            if pending.outcome is None:
                try:
                    pending.outcome = self._settle(pending)
                except Exception as e:  # noqa: BLE001 - result() raises it
                    pending.outcome = e
            if self._inflight is pending:
                self._inflight = None

    def settle_inflight(self) -> None:
        """Waits for the flush in flight, if any (its own caller gets its error)."""
        pending = self._inflight
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result()

    def write_strings(self, new: dict[str, str]) -> None:
        """Rewrites the znode's cursorProperties, the ack state untouched; durable on return."""
        node = self.node
        with self._lock:
            self._check()
            self.settle_inflight()
            info = ml.ManagedCursorInfo.FromString(cursor_info_bytes(node.last_data, node.who))
            info.ClearField("cursorProperties")
            for key, value in new.items():
                info.cursorProperties.add(name=key, value=value)
            sequence = node.next_sequence()
            ck = info.cursorkit
            ck.sequence = sequence
            ck.owner_epoch = node.epoch
            ck.owner = node.label
            ck.written_at_ms = now_ms()
            raw = info.SerializeToString()
            data, _codec = fit_record(raw, self.max_bytes)
            if len(data) > self.max_bytes:
                raise InvalidArgument(
                    f"{node.who}: cursor properties would make the znode {len(raw):,} bytes "
                    f"({len(data):,} compressed; budget max_znode_bytes {self.max_bytes:,})"
                )
            what = f"{node.who}: cursor properties"
            version = node.version
            stat, _ = node.landed(lambda: node.set(data, version, what), data, sequence, None, what)
            node.confirm(stat.version, sequence, data, node.ref, replace_ref=False)
            self.strings = dict(new)

    def _encode(
        self,
        md: Position,
        acked: RangeSet,
        batches: list[persist.BatchRow],
        props: Mapping[str, int],
        cursor: Cursor,
        sequence: int,
        ref: zpb.StateObject | None,
    ) -> EncodedZnode:
        record = self.node.record(sequence, ref)
        self._left_out = None
        if self.counts is not None and len(self.counts):
            blob, self._left_out = encode_counts(self.counts, budget_of(self.max_bytes))
            record.redelivery_counts = blob
            if self._left_out:
                record.redelivery_runs_left_out = self._left_out
        elif self.counts is not None:
            self._left_out = 0
        return encode_znode(
            mark_delete=md,
            acked=acked,
            batches=batches,
            properties=props,
            string_properties=self.strings,
            cursorkit=record,
            limits=cursor.limits,
            max_bytes=self.max_bytes,
            last_active_ms=now_ms(),
            who=self.node.who,
        )

    def _settle(self, pending: PendingFlush) -> ZkFlushResult:
        """Waits for a sent flush and resolves a version conflict; called with the lock held."""
        call = pending.call
        assert call is not None
        node = self.node
        what = f"{node.who}: flush"
        stat, conflicts = node.landed(
            lambda: node.session.wait(call, what, write=True),
            pending.data,
            pending.sequence,
            pending.ref,
            what,
        )
        node.confirm(stat.version, pending.sequence, pending.data, pending.ref, replace_ref=True)
        self.bind(pending.cursor, pending.mutations, pending.properties)
        if pending.counts_left_out is not None and not (self.counts is not None and self.counts.has_changes):
            self._counts_unsaved = False
        object_bytes, total, inline, ranges_cut, batches_cut = pending.sizes
        return ZkFlushResult(
            skipped=False,
            bytes_written=len(pending.data) + object_bytes,
            znode_bytes=len(pending.data),
            object_bytes=object_bytes,
            version=stat.version,
            sequence=pending.sequence,
            ranges_total=total,
            ranges_inline=inline,
            ranges_cut=ranges_cut,
            batches_cut=batches_cut,
            conflicts=conflicts,
            duration_s=time.perf_counter() - pending.started,
            compression=pending.compression,
            redelivery_runs_left_out=pending.counts_left_out or 0,
        )


def _snapshot(
    cursor: Cursor, *, blobs: bool
) -> tuple[Position, RangeSet, list[persist.BatchRow], int, list[tuple[int, bytes]]]:
    """Mark-delete, acked set, partial batches and mutation count from one moment of the cursor.

    ``blobs``: also each ledger's compact bitmap (for a state object), from one call into Rust.
    """
    if not blobs:
        for _ in range(8):
            before = cursor.mutations
            md = cursor.mark_delete_position
            acked = cursor.individually_deleted
            batches = cursor.batches()
            if cursor.mutations == before:
                return md, acked, batches, before, []
    md, ledgers, _live, batches, mutations = cursor.flush_state(dirty_only=False, clear_dirty=False)
    kept = [(lid, blob) for lid, blob in ledgers if blob is not None]
    acked = RangeSet(cursor.pulsar_quirks)
    for lid, blob in kept:
        acked.set_ledger_bytes(lid, blob)
    return md, acked, batches, mutations, kept


def send_together(prepared: list[PendingFlush]) -> None:
    """Sends prepared flushes, those of each ZooKeeper session queued together.

    Then waits for the last of each session (ZooKeeper answers a session's requests in order), so
    the caller collects ready results instead of waking once per answer.
    """
    by_session: dict[int, list[PendingFlush]] = {}
    for p in prepared:
        if p.outcome is None and p.call is None:
            by_session.setdefault(id(p.writer.node.session), []).append(p)
    for group in by_session.values():
        session = group[0].writer.node.session
        writes = [(p.writer.node.path, p.data, p.writer.node.version) for p in group]
        try:
            calls = session.set_many(writes)
        except Exception as e:  # noqa: BLE001 - each flush reports it
            for p in group:
                p.not_sent(e)
            continue
        for p, call in zip(group, calls, strict=True):
            p.call = call
    for group in by_session.values():
        last = group[-1]
        if last.call is not None:
            last.call.wait(last.writer.node.session.operation_timeout)
