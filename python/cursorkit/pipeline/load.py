"""Opening a rebuild's output with the library: its cursors and its shared delayed index.

Loaders never hand back damaged state as if it were healthy. Before a store is opened, the files the
manifest vouches for are checked (size and SHA-256); after it is opened, what its recovery stepped
over is read from its report. Any damage raises :class:`~cursorkit.errors.DamagedStore`, naming each
damaged part and what was lost, unless the caller passes ``allow_damaged=True``: then what survives
comes back together with the damage (:class:`LoadedCursors`, the tracker's ``recovery_report``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cursorkit._core import RedeliveryCounts
from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store import CursorStore, FileCursorStore
from cursorkit.ackstate.store.api import StoreReport
from cursorkit.ackstate.store.file.side_files import REDELIVERIES_FILE
from cursorkit.ackstate.store.properties import FileCursorProperties
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage
from cursorkit.errors import CorruptSnapshot, CursorkitError, DamagedStore, InvalidArgument
from cursorkit.fsio import read_regular
from cursorkit.pipeline.manifest import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    MAX_MANIFEST_BYTES,
    TOPICS_FORMAT,
    FileEntry,
    TopicsManifest,
    check_files,
    inside,
    local_digest,
    parse_files,
    parse_manifest,
    parse_topics_manifest,
    read_topics_manifest,
    safe_relative,
)

if TYPE_CHECKING:
    from cursorkit.pipeline.output import Output

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "TOPICS_FORMAT",
    "LoadedCursors",
    "Manifest",
    "fetch_topic",
    "inside",
    "list_topics",
    "open_delayed_index",
    "open_topics",
    "parse_manifest",
    "read_cursors",
    "read_manifest",
    "safe_relative",
    "topic_root",
]


@dataclass(frozen=True, slots=True)
class Manifest:
    """``manifest.json`` of a rebuild's output (or of one topic of a many-topic output)."""

    root: Path
    topic: str
    now_ms: int
    subscriptions: dict[str, str]
    """Subscription name -> cursor store directory (relative to ``root``)."""
    delayed: dict[str, str] | None
    """``storage``, ``properties``, ``topic``, ``cursor`` of the shared delayed index, or None."""
    raw: dict[str, Any]
    files: tuple[FileEntry, ...] | None = None
    """The files the output vouches for, relative to ``root`` (None: written before files were listed)."""

    def ledger_sizes(self) -> dict[int, int]:
        """Entries per ledger of the message log (from ``summary.json``)."""
        return {int(k): int(v) for k, v in self._summary()["ledger_sizes"].items()}

    def cursor_rows(self) -> dict[str, dict[str, Any]]:
        """The rebuild's figures of each cursor it wrote (``summary.json``), by subscription."""
        try:
            rows = self._summary().get("cursors", [])
            return {str(r["subscription"]): r for r in rows if isinstance(r, dict) and "subscription" in r}
        except (CursorkitError, AttributeError, TypeError, KeyError):
            return {}

    def _summary(self) -> dict[str, Any]:
        where = self.root / "summary.json"
        try:
            doc = json.loads(read_regular(where, MAX_MANIFEST_BYTES))
        except OSError as e:
            raise CorruptSnapshot(f"{where}: cannot read the summary ({e.strerror or e})") from e
        except (ValueError, RecursionError) as e:
            raise CorruptSnapshot(f"{where} is not JSON ({e})") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("ledger_sizes"), dict):
            raise CorruptSnapshot(f"{where}: no ledger_sizes object")
        return doc

    def verify(self, parts: Iterable[str]) -> dict[str, str]:
        """Files under ``parts`` that are missing or differ from the manifest: ``{path: what}``.

        Empty when all match, or when the output lists no files (written before they were listed).
        """
        if self.files is None:
            return {}
        return check_files(self.files, local_digest(self.root), under=parts)


def list_topics(path: str | os.PathLike[str]) -> dict[str, str]:
    """Topic -> its directory (relative to ``path``) of a many-topic output; ``{}`` for a one-topic one."""
    doc = read_topics_manifest(Path(path))
    return {} if doc is None else {t: e.dir for t, e in doc.topics.items()}


def topic_root(path: str | os.PathLike[str], topic: str | None) -> Path:
    """The directory holding ``topic``'s output: ``path`` itself for a one-topic output."""
    return _topic(Path(path), topic)[0]


def _topic(root: Path, topic: str | None) -> tuple[Path, tuple[FileEntry, ...] | None]:
    """``topic``'s directory and the files the root manifest lists for it (None for a one-topic output)."""
    doc = read_topics_manifest(root)
    if doc is None:
        if topic is not None:
            raise InvalidArgument(f"{root} is not a many-topic rebuild output; topic= does not apply")
        return root, None
    if topic is None:
        names = sorted(doc.topics)
        shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
        raise InvalidArgument(f"{root} holds {len(names)} topics ({shown}); name one with topic=")
    entry = doc.topics.get(topic)
    if entry is None:
        raise InvalidArgument(f"{root} has no topic {topic!r}")
    return inside(root, entry.dir, f"topics[{topic!r}]"), entry.files


def read_manifest(path: str | os.PathLike[str], topic: str | None = None) -> Manifest:
    """The manifest of the rebuild output at ``path`` (``InvalidArgument`` if it is not one).

    For a many-topic output, ``topic`` names the topic (its directory has the one-topic layout);
    its files are the ones the root manifest lists for it, and its own manifest must name it.
    """
    root, files = _topic(Path(path), topic)
    if not (root / MANIFEST_FILE).is_file():
        raise InvalidArgument(f"{root} is not a rebuild's output (no {MANIFEST_FILE})")
    raw = parse_manifest(root / MANIFEST_FILE)
    if files is None and "files" in raw:
        files = parse_files(raw["files"], f"{root / MANIFEST_FILE}: files")
    if topic is not None and raw["topic"] != topic:
        raise DamagedStore(
            f"{root}: the root manifest names this directory for topic {topic!r}, "
            f"but it holds topic {raw['topic']!r}",
            damage={MANIFEST_FILE: f"holds topic {raw['topic']!r}, not {topic!r}"},
        )
    return Manifest(
        root, raw["topic"], int(raw["now_ms"]), dict(raw["subscriptions"]), raw.get("delayed"), raw, files
    )


def open_topics(location: str | os.PathLike[str]) -> tuple[Output, TopicsManifest]:
    """A many-topic output (a directory or ``s3://…``) and its root manifest, checked whole."""
    from cursorkit.pipeline.output import open_output

    output = open_output(location)
    raw = output.read(MANIFEST_FILE)
    if raw is None:
        raise InvalidArgument(f"{output.uri} is not a rebuild's output (no {MANIFEST_FILE})")
    return output, parse_topics_manifest(raw, f"{output.uri}/{MANIFEST_FILE}")


def fetch_topic(out: str, topic: str, into: str | os.PathLike[str]) -> Path:
    """Downloads one topic of a many-topic output on an object store into the local ``into``.

    Only the files the root manifest lists are fetched, each checked against its size and SHA-256
    (``DamagedStore`` naming every mismatch); the result is a one-topic output directory that
    :func:`read_manifest`, :func:`read_cursors` and :func:`open_delayed_index` open.
    """
    import hashlib

    output, doc = open_topics(out)
    entry = doc.topics.get(topic)
    if entry is None:
        raise InvalidArgument(f"{out} has no topic {topic!r}")
    root = Path(into)
    bad: dict[str, str] = {}
    for f in entry.files:
        try:  # the local copy's path must be one this machine holds (no ENAMETOOLONG half-way)
            target = inside(root, f.path, f"{entry.dir}/{f.path}")
        except CorruptSnapshot as e:
            bad[f.path] = str(e)
            continue
        data = output.read(f"{entry.dir}/{f.path}")
        if data is None:
            bad[f.path] = "missing"
            continue
        if len(data) != f.bytes:
            bad[f.path] = f"{len(data):,} bytes where the manifest says {f.bytes:,}"
            continue
        if hashlib.sha256(data).hexdigest() != f.sha256:
            bad[f.path] = "its SHA-256 is not the manifest's"
            continue
        try:  # a manifest listing both "x" and "x/y" cannot be laid out on disk
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as e:
            bad[f.path] = f"cannot be copied to {target} ({e.strerror or e})"
    if bad:
        raise DamagedStore(_damage_message(f"{out}/{entry.dir}", "file(s)", bad), damage=bad)
    return root


def _damage_message(where: str, what: str, damage: Mapping[str, str]) -> str:
    """One line naming the damaged parts (the first few in full)."""
    shown = "; ".join(f"{k}: {v}" for k, v in list(damage.items())[:3])
    more = f"; and {len(damage) - 3} more" if len(damage) > 3 else ""
    return f"{where}: {len(damage)} damaged {what}: {shown}{more}"


def _under(path: str, part: str) -> bool:
    return path == part or path.startswith(part.rstrip("/") + "/")


class LoadedCursors(dict[str, Cursor]):
    """The cursors :func:`read_cursors` recovered, by subscription, with what their stores reported.

    ``damage`` is empty unless ``allow_damaged=True`` let damaged stores through: then it names each
    damaged subscription and what was lost (a subscription whose store could not be opened at all is
    named there and absent from the mapping).
    """

    def __init__(self) -> None:
        super().__init__()
        self.reports: dict[str, StoreReport] = {}
        """Each subscription's store recovery report."""
        self.damage: dict[str, str] = {}
        """Damaged subscription -> what was lost."""
        self.redeliveries: dict[str, RedeliveryCounts] = {}
        """Subscriptions whose store keeps durable redelivery counts (beyond Pulsar) -> the counts."""


def read_cursors(
    path: str | os.PathLike[str],
    ledger_sizes: Mapping[int, int] | None = None,
    topic: str | None = None,
    *,
    allow_damaged: bool = False,
    verify: bool = True,
) -> LoadedCursors:
    """Every subscription's cursor, recovered from its ``CursorStore`` (``topic``: see ``read_manifest``).

    Raises:
        DamagedStore: a cursor store's files differ from the manifest (``verify``), or its recovery
            stepped over damage (a rewound or smaller cursor): ``damage`` names each subscription
            and what was lost. With ``allow_damaged=True`` the surviving cursors come back instead,
            the damage in :attr:`LoadedCursors.damage`.
    """
    m = read_manifest(path, topic)
    bad_files = m.verify(["summary.json", *m.subscriptions.values()]) if verify else {}
    damage: dict[str, str] = {}
    # The summary's ledger sizes check every cursor: a summary that differs taints them all.
    shared = [f"summary.json: {bad_files['summary.json']}"] if "summary.json" in bad_files else []
    try:
        sizes = dict(ledger_sizes) if ledger_sizes is not None else m.ledger_sizes()
    except CorruptSnapshot as e:  # no ledger sizes: no cursor can be checked against its ledgers
        raise DamagedStore(str(e), damage={"summary.json": str(e)}) from e
    expected = m.cursor_rows()
    out = LoadedCursors()
    for name, rel in sorted(m.subscriptions.items()):
        lost = [*shared, *(f"{p}: {why}" for p, why in bad_files.items() if _under(p, rel))]
        try:
            store = CursorStore.open(inside(m.root, rel, f"subscriptions[{name!r}]"))
        except (CursorkitError, OSError) as e:
            damage[name] = "; ".join([*lost, f"the store does not open ({e})"])
            continue
        try:
            cursor = store.recover(ledger_sizes=sizes)
            if isinstance(store, FileCursorStore) and (store.path / REDELIVERIES_FILE).exists():
                out.redeliveries[name] = store.redelivery_counts
                if store.redelivery_report.damaged:
                    lost.append("redelivery counts: " + "; ".join(store.redelivery_report.problems))
        except CursorkitError as e:
            damage[name] = "; ".join([*lost, f"nothing recoverable ({e})"])
            continue
        finally:
            store.close()
        out.reports[name] = store.report
        if store.report.damaged:
            lost.append(_store_loss(store.report, cursor, expected.get(name)))
        if lost:
            damage[name] = "; ".join(lost)
        out[name] = cursor
    if damage and not allow_damaged:
        raise DamagedStore(
            _damage_message(str(m.root), "cursor store(s)", damage)
            + " (allow_damaged=True loads what survives)",
            damage=damage,
        )
    out.damage = damage
    return out


def _store_loss(report: StoreReport, cursor: Cursor, row: Mapping[str, Any] | None) -> str:
    """What a damaged cursor store's recovery lost, against the rebuild's own figures when known."""
    steps: list[str] = []
    for attr in ("fallbacks", "corrupt_records"):
        steps.extend(str(d) for d in getattr(report, attr, ())[:2])
    torn = getattr(report, "torn_tail_bytes", 0)
    if torn:
        steps.append(f"a torn tail of {torn} bytes")
    unfinished = getattr(report, "unfinished_flush_records", 0)
    if unfinished:
        steps.append(f"{unfinished} records of an unfinished flush")
    meta = getattr(report, "meta_error", None)
    if meta:
        steps.append(f"store.meta: {meta}")
    seq = getattr(report, "marker_sequence", None)
    got = f"mark-delete {cursor.mark_delete_position} and {len(cursor.individually_deleted):,} ranges"
    head = f"recovered flush {seq} with {got}" if seq is not None else f"recovered {got}"
    if row is not None and "mark_delete" in row and "ranges" in row:
        head += f" where the rebuild wrote {row['mark_delete']} and {int(row['ranges']):,} ranges"
    return head + (f" (stepped over: {'; '.join(steps)})" if steps else "")


def open_delayed_index(
    path: str | os.PathLike[str],
    topic: str | None = None,
    *,
    allow_damaged: bool = False,
    verify: bool = True,
    **settings: Any,
) -> BucketDelayedDeliveryTracker | None:
    """The topic's delayed index recovered from the output (``settings`` go to the tracker), or None.

    The storage and properties are opened in place: the tracker's later seals, merges and deletions
    write there, as a broker's would (its files then no longer match the manifest: reopen such an
    output with ``verify=False``; every snapshot keeps its own checksums). ``topic``: see
    ``read_manifest``.

    Raises:
        DamagedStore: the index's files differ from the manifest (``verify``; checked before
            anything is opened), or recovery found damaged or missing snapshots, whose delayed
            messages the tracker no longer holds. With ``allow_damaged=True`` the tracker comes back
            instead; its ``recovery_report`` lists what must be replayed, file mismatches included.
    """
    m = read_manifest(path, topic)
    if m.delayed is None:
        return None
    parts = [m.delayed["storage"], m.delayed["properties"]]
    bad_files = m.verify(parts) if verify else {}
    if bad_files and not allow_damaged:
        raise DamagedStore(
            _damage_message(str(m.root), "delayed-index file(s)", bad_files)
            + " (nothing was opened; allow_damaged=True opens what survives)",
            damage=bad_files,
        )
    storage = FileBucketSnapshotStorage(inside(m.root, m.delayed["storage"], "delayed.storage"))
    props = FileCursorProperties(inside(m.root, m.delayed["properties"], "delayed.properties"))
    settings.setdefault("topic", m.delayed["topic"])
    settings.setdefault("cursor", m.delayed["cursor"])
    tracker = BucketDelayedDeliveryTracker.recover(storage=storage, cursor_properties=props, **settings)
    report = tracker.recovery_report
    report.damaged.extend(f"{p}: {why}" for p, why in bad_files.items())
    lost = [*report.damaged, *(f"{k}: its snapshot is missing" for k in report.missing)]
    if lost and not allow_damaged:
        tracker.close()
        shown = "; ".join(lost[:3]) + (f"; and {len(lost) - 3} more" if len(lost) > 3 else "")
        raise DamagedStore(
            f"{m.root}: the delayed index recovered without {len(lost)} damaged or missing part(s): "
            f"{shown}; their delayed messages must be replayed (allow_damaged=True opens what survives)",
            damage={"delayed": "; ".join(lost)},
        )
    return tracker
