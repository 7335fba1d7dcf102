"""``cursorkit inspect zk://...``: the cursor znodes under a path, cursorkit's and Pulsar's own.

A znode is a cursor when it sits at cursor depth under ``/managed-ledgers``
(``<tenant>/<namespace>/persistent/<topic>/<cursor>``) or, anywhere else, when it is the path given.
Each is decoded read-only (no ownership is taken, nothing is written): who wrote it, its owner epoch,
mark-delete, how many ranges and partial batches it holds against how many its writer recorded, its
properties, and its state object, which is fetched and checked when ``objects`` is given. A znode
that does not decode is reported, and the walk goes on; the walk stops at ``limit`` znodes.

A cursor is *cut* when its writer recorded more ranges or partial batches than the znode holds and no
state object holds the rest: a broker recovering it redelivers the acks left out, so it is shown
with its numbers ("cut: 1,000 of 13,486 ranges") and counts as at risk (``inspect`` exits 1).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from rich.console import Console
from rich.table import Table

from cursorkit.ackstate.store.zookeeper.redeliveries import read_counts
from cursorkit.ackstate.store.zookeeper.znode import object_id, read_state_object, read_znode
from cursorkit.errors import CorruptSnapshot, CursorkitError, InvalidArgument, StoreUnavailable
from cursorkit.stores.location import MANAGED_LEDGERS, parse_zk_location
from cursorkit.stores.objects import ObjectStore
from cursorkit.stores.zookeeper import ZkSession, kazoo_errors

__all__ = ["ZnodeCursor", "ZnodeInspection", "inspect_zk", "render_zk"]

_CURSOR_DEPTH = 5  # tenant / namespace / persistent / topic / cursor, under /managed-ledgers
_BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZnodeCursor:
    """One cursor znode, as a reader (Pulsar's parser, and cursorkit's) sees it."""

    path: str
    subscription: str
    version: int
    size: int
    written_by: str = ""
    owner_epoch: int = 0
    owner: str | None = None
    sequence: int = 0
    state_in: str = ""
    """``znode``, or ``cursor ledger N`` when the state lives in a BookKeeper ledger."""
    mark_delete: str = ""
    ranges: int = 0
    ranges_recorded: int = 0
    batches: int = 0
    batches_recorded: int = 0
    properties: int = 0
    cursor_properties: int = 0
    bucket_keys: int = 0
    last_active_ms: int | None = None
    compression: str | None = None
    state_object: str | None = None
    state_object_status: str | None = None
    """``ok``, ``missing``, ``damaged: ...`` or ``not checked`` (no object store given)."""
    redelivered: int = 0
    """Messages with a durable redelivery count (beyond Pulsar; 0 when none are kept)."""
    max_redelivery_count: int = 0
    redelivery_runs_left_out: int = 0
    """Runs of counts the writer left out of the znode (past their share of it)."""
    redelivery_problem: str | None = None
    """Why the counts could not be read (they do not touch the ack state)."""
    problem: str | None = None

    @property
    def damaged(self) -> bool:
        """Whether the znode or its state object could not be read as written."""
        return self.problem is not None or (
            self.state_object_status is not None
            and self.state_object_status.startswith(("missing", "damaged"))
        )

    @property
    def cut(self) -> bool:
        """Whether acks the writer recorded are in no durable copy (no state object holds them)."""
        return (
            self.problem is None
            and self.state_object is None
            and (self.ranges < self.ranges_recorded or self.batches < self.batches_recorded)
        )

    @property
    def status(self) -> str:
        """``ok``, ``cut: <kept> of <recorded> ranges[, ... partial batches]`` or ``damaged: <why>``."""
        if self.damaged:
            return "damaged: " + (self.problem or str(self.state_object_status))
        if not self.cut:
            return "ok"
        parts = []
        if self.ranges < self.ranges_recorded:
            parts.append(f"{self.ranges:,} of {self.ranges_recorded:,} ranges")
        if self.batches < self.batches_recorded:
            parts.append(f"{self.batches:,} of {self.batches_recorded:,} partial batches")
        return "cut: " + ", ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class ZnodeInspection:
    """Every cursor znode found under a location."""

    location: str
    cursors: list[ZnodeCursor] = field(default_factory=list)
    znodes_visited: int = 0
    truncated: bool = False

    @property
    def damaged(self) -> bool:
        """Whether any cursor znode is damaged."""
        return any(c.damaged for c in self.cursors)

    @property
    def cut(self) -> bool:
        """Whether any cursor znode is cut (acks its writer recorded will be redelivered)."""
        return any(c.cut for c in self.cursors)

    @property
    def at_risk(self) -> bool:
        """Whether any cursor is damaged or cut: what ``inspect`` exits 1 for."""
        return self.damaged or self.cut


def _depth_under_managed_ledgers(path: str) -> int | None:
    if not path.startswith(MANAGED_LEDGERS + "/"):
        return None
    return len(path[len(MANAGED_LEDGERS) + 1 :].split("/"))


def _summarise(path: str, data: bytes, version: int, objects: ObjectStore | None) -> ZnodeCursor:
    base: dict[str, Any] = {
        "path": path,
        "subscription": unquote_plus(path.rsplit("/", 1)[1]),
        "version": version,
    }
    try:
        content = read_znode(data, path)
    except CursorkitError as e:
        return ZnodeCursor(**base, size=len(data), problem=str(e))
    info, ck = content.info, content.cursorkit
    state = content.state
    strings = content.string_properties
    summary: dict[str, Any] = {
        "size": len(data),
        "written_by": "cursorkit" if ck is not None else "pulsar",
        "owner_epoch": ck.owner_epoch if ck is not None else 0,
        "owner": ck.owner if ck is not None and ck.HasField("owner") else None,
        "sequence": ck.sequence if ck is not None else 0,
        "state_in": "znode" if state is not None else f"cursor ledger {info.cursorsLedgerId}",
        "mark_delete": f"{info.markDeleteLedgerId}:{info.markDeleteEntryId}",
        "ranges": len(state.acked) if state is not None else 0,
        "batches": len(state.batches) if state is not None else 0,
        "properties": len(info.properties),
        "cursor_properties": len(strings),
        "bucket_keys": sum(1 for k in strings if k.startswith(_BUCKET_PREFIX)),
        "last_active_ms": info.lastActive if info.HasField("lastActive") else None,
        "compression": content.compression,
    }
    summary["ranges_recorded"] = max(ck.ranges_total if ck is not None else 0, summary["ranges"])
    summary["batches_recorded"] = max(ck.batches_total if ck is not None else 0, summary["batches"])
    if ck is not None and ck.HasField("state"):
        summary["state_object"] = ck.state.key
        summary["state_object_status"] = _check_object(path, ck, objects)
    if ck is not None and ck.HasField("redelivery_counts"):
        counts, report = read_counts(ck, path)
        summary["redelivered"] = len(counts)
        summary["max_redelivery_count"] = max((n for _, _, n in counts.runs()), default=0)
        summary["redelivery_runs_left_out"] = ck.redelivery_runs_left_out
        if report.records == 0:
            summary["redelivery_problem"] = "; ".join(report.problems)
    return ZnodeCursor(**base, **summary)


def _check_object(path: str, ck: Any, objects: ObjectStore | None) -> str:
    if objects is None:
        return "not checked (pass --objects)"
    epoch, sequence = object_id(ck.state.key) or (-1, -1)
    try:
        data = objects.get(ck.state.key)
        read_state_object(
            data, ck.state, path=path, epoch=epoch, sequence=sequence, where=f"{objects.uri}/{ck.state.key}"
        )
    except FileNotFoundError:
        return "missing"
    except CorruptSnapshot as e:
        return f"damaged: {e}"
    return "ok"


def inspect_zk(
    location: str, *, objects: ObjectStore | None = None, limit: int = 10_000, **zk: Any
) -> ZnodeInspection:
    """Every cursor znode at or under ``location`` (``zk://hosts/path``), decoded read-only."""
    loc = parse_zk_location(location)
    given: object = limit
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise InvalidArgument(f"limit must be a positive int, got {given!r}")
    kex = kazoo_errors()
    session = ZkSession.acquire(loc.hosts, **zk)
    client = session.client
    found: list[ZnodeCursor] = []
    visited = 0
    try:
        queue: deque[str] = deque([loc.path])
        while queue and visited < limit:
            path = queue.popleft()
            visited += 1
            depth = _depth_under_managed_ledgers(path)
            # A cursor znode is read, not listed; a parent is listed, not read; the start is read.
            where = f"zk://{loc.hosts}{path}"
            data, stat, children = b"", None, []
            try:
                if depth == _CURSOR_DEPTH or path == loc.path:
                    data, stat = session.call(client.get_async, path, what=f"{where}: read")
                if depth is None or depth < _CURSOR_DEPTH:
                    children = session.call(client.get_children_async, path, what=f"{where}: list")
            except kex.NoNodeError:
                if path == loc.path:
                    raise FileNotFoundError(2, "no such znode", str(loc)) from None
                continue
            except kex.KazooException as e:
                raise StoreUnavailable(f"{where}: {type(e).__name__} {e}") from e
            if stat is not None and (depth == _CURSOR_DEPTH or (depth is None and data)):
                found.append(_summarise(path, data, stat.version, objects))
                continue
            queue.extend(f"{path.rstrip('/')}/{c}" for c in sorted(children))
    finally:
        session.release()
    return ZnodeInspection(location=str(loc), cursors=found, znodes_visited=visited, truncated=bool(queue))


def _utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:  # the znode's value, whatever a writer put there
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms since the epoch (out of range)"


def render_zk(inspection: ZnodeInspection, console: Console) -> None:
    """Prints the cursors found: one detailed table for a single cursor, one row each for many."""
    if len(inspection.cursors) == 1:
        c = inspection.cursors[0]
        table = Table(title=f"cursor znode {c.path}", show_header=False)
        rows = [
            ("subscription", c.subscription),
            ("written by", c.written_by),
            ("owner epoch / owner", f"{c.owner_epoch} / {c.owner or '-'}"),
            ("write sequence, znode version", f"{c.sequence}, {c.version}"),
            ("state in", c.state_in),
            ("mark-delete", c.mark_delete),
            ("last active", _utc(c.last_active_ms)),
            ("ranges (in znode / recorded)", f"{c.ranges:,} / {c.ranges_recorded:,}"),
            ("partial batches (in znode / recorded)", f"{c.batches:,} / {c.batches_recorded:,}"),
            (
                "properties / cursor properties (bucket keys)",
                f"{c.properties} / {c.cursor_properties} ({c.bucket_keys})",
            ),
            ("znode bytes", f"{c.size:,}" + (f" ({c.compression})" if c.compression else "")),
            ("state object", c.state_object or "-"),
            ("state object check", c.state_object_status or "-"),
            (
                "redelivered messages (highest count, runs left out)",
                f"{c.redelivered:,} ({c.max_redelivery_count}, {c.redelivery_runs_left_out:,})"
                if c.redelivered or c.redelivery_runs_left_out
                else "-",
            ),
            ("redelivery counts problem", c.redelivery_problem or "-"),
            ("problem", c.problem or "-"),
            ("status", c.status),
        ]
        for name, value in rows:
            table.add_row(name, str(value))
        console.print(table)
        return
    table = Table(title=f"{len(inspection.cursors)} cursor znodes under {inspection.location}")
    for col in (
        "cursor",
        "by",
        "epoch",
        "mark-delete",
        "ranges",
        "recorded",
        "batches",
        "bucket keys",
        "state object",
        "status",
    ):
        table.add_column(col)
    for c in inspection.cursors:
        table.add_row(
            c.path.removeprefix(MANAGED_LEDGERS + "/"),
            c.written_by,
            str(c.owner_epoch),
            c.mark_delete,
            f"{c.ranges:,}",
            f"{c.ranges_recorded:,}",
            f"{c.batches:,}",
            str(c.bucket_keys),
            c.state_object_status or "-",
            c.status,
        )
    console.print(table)
    if inspection.truncated:
        console.print(f"(stopped after {inspection.znodes_visited:,} znodes; raise --limit to see more)")
