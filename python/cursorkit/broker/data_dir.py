"""What a stopped broker's data directory holds: its topics, their ledgers, and each subscription's state.

``cursorkit inspect DIR`` on a ``cursorkit broker --data DIR`` reads it with :func:`inspect_data_dir`:
topics by their real names (directories named by :mod:`cursorkit.broker.server.paths`), each log's
ledgers as recovery would find them, and each subscription's cursor recovered from its store, with
its mark-delete position and its backlog (entries after mark-delete not yet acknowledged, counted
against the log's ledger sizes).

Read-only: the logs are read as recovery reads them but nothing is tidied or cut, and each cursor
store is recovered from a copy (opening one in place may delete superseded files). A directory a
running broker holds is refused: its files change under the reader; ask that broker instead
(``cursorkit admin topics stats-internal``). Damage is reported per topic and per subscription,
never raised, so the rest is still summarised.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cursorkit.errors import CursorkitError, InvalidArgument

__all__ = [
    "DataDirSummary",
    "LedgerSummary",
    "SubscriptionSummary",
    "TopicSummary",
    "as_json",
    "inspect_data_dir",
    "is_data_dir",
]

LOCK_FILE = "broker.lock"
TOPICS_DIR = "topics"
PARTITIONED_FILE = "partitioned.json"
_MAX_PARTITIONED_FILE = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """One ledger of a topic's log: its id, entries and bytes served."""

    ledger_id: int
    entries: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SubscriptionSummary:
    """One subscription: its cursor as recovery finds it, and what it still owes."""

    name: str
    directory: str
    mark_delete: str | None = None
    """``ledger:entry`` of the last entry of the acknowledged prefix."""
    backlog: int | None = None
    """Entries after mark-delete not acknowledged (Pulsar's ``msgBacklog``)."""
    acked_ranges: int | None = None
    """Ranges acknowledged beyond mark-delete (Pulsar's ``nonContiguousDeletedMessagesRanges``)."""
    partial_batches: int | None = None
    """Batch entries some of whose messages are acknowledged."""
    cursor: str = "file"
    """``file`` (a cursor store here), or ``elsewhere`` (brokers sharing ZooKeeper keep it there)."""
    error: str | None = None
    """Why the cursor could not be recovered, or its backlog not counted (None: both were)."""
    recovered_past: str | None = None
    """What recovery stepped over to recover it (a damaged ``store.meta``, corrupt records, older
    markers used instead of newer ones): its state may be older than its last flush."""


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """One topic (or partition): its log and its subscriptions."""

    name: str
    directory: str
    ledgers: list[LedgerSummary] = field(default_factory=list)
    first: str | None = None
    """``ledger:entry`` of the oldest entry held (None: the log holds none)."""
    last: str | None = None
    """``ledger:entry`` of the newest entry."""
    log_damage: list[str] = field(default_factory=list)
    """What recovery would not serve: damaged ledgers (from where each is damaged, and why)."""
    torn_tail_bytes: int = 0
    """Bytes of a write a crash cut short at the end of the last ledger (the next start cuts them
    off; the write was never receipted, so nothing is lost: not damage)."""
    subscriptions: list[SubscriptionSummary] = field(default_factory=list)
    error: str | None = None
    """Why the log could not be read at all."""

    @property
    def entries(self) -> int:
        """Entries held."""
        return sum(ledger.entries for ledger in self.ledgers)

    @property
    def bytes(self) -> int:
        """Bytes of the ledgers' files that are served."""
        return sum(ledger.bytes for ledger in self.ledgers)

    @property
    def damaged(self) -> bool:
        """Whether the log or a cursor has damage."""
        return bool(
            self.error or self.log_damage or any(s.error or s.recovered_past for s in self.subscriptions)
        )


@dataclass(frozen=True, slots=True)
class DataDirSummary:
    """A broker's data directory: its topics, the partitioned topics it was told of, what names nothing."""

    path: str
    topics: list[TopicSummary]
    partitioned: dict[str, int]
    problems: list[str]
    """Directories that name no topic or subscription, an unreadable ``partitioned.json``."""

    @property
    def damaged(self) -> bool:
        """Whether anything was found that a broker could not serve as it was written."""
        return bool(self.problems) or any(t.damaged for t in self.topics)


def is_data_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a broker's data directory (its lock file or its ``topics/``)."""
    root = Path(path)
    return (root / LOCK_FILE).is_file() or (root / TOPICS_DIR).is_dir()


def _held(lock: Path) -> bool:
    """Whether a broker holds the directory's lock (exclusively, or several of them shared).

    Probed without waiting and let go at once; nothing is written.
    """
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def inspect_data_dir(path: str | os.PathLike[str], *, topic: str | None = None) -> DataDirSummary:
    """Summarises a stopped broker's data directory, reading it only.

    Args:
        path: The directory a broker was given as ``--data``.
        topic: Only this topic (a full name, or a short one as clients write them) and its partitions.

    Raises:
        InvalidArgument: ``path`` is no data directory, or a running broker holds it.
    """
    root = Path(path)
    if not is_data_dir(root):
        raise InvalidArgument(f"{root} is not a broker's data directory (no {LOCK_FILE}, no {TOPICS_DIR}/)")
    if _held(root / LOCK_FILE):
        raise InvalidArgument(
            f"{root} is in use by a running broker: stop it first, or ask it "
            "(cursorkit admin topics stats-internal TOPIC)"
        )
    wanted = _wanted(topic)
    problems: list[str] = []
    partitioned = _partitioned(root, problems)
    topics = [
        _topic(name, directory)
        for name, directory in _topic_directories(root / TOPICS_DIR, problems)
        if wanted is None or _matches(name, wanted)
    ]
    if wanted is not None and not topics:
        raise InvalidArgument(f"{root} holds no topic {wanted}")
    return DataDirSummary(path=str(root), topics=topics, partitioned=partitioned, problems=problems)


def as_json(summary: DataDirSummary) -> str:
    """The summary as one JSON document (``cursorkit inspect --json``)."""
    doc = asdict(summary)
    for t, topic in zip(doc["topics"], summary.topics, strict=True):
        t.update(entries=topic.entries, bytes=topic.bytes, damaged=topic.damaged)
    doc["damaged"] = summary.damaged
    return json.dumps(doc, indent=1, ensure_ascii=False)


# -- names -----------------------------------------------------------------------------------------


def _wanted(topic: str | None) -> str | None:
    if topic is None:
        return None
    from cursorkit.broker.server.names import topic_name

    try:
        return topic_name(topic).full
    except CursorkitError as e:
        raise InvalidArgument(f"--topic {topic!r}: {e}") from e


def _matches(name: str, wanted: str) -> bool:
    """Whether ``name`` is the wanted topic or one of its partitions."""
    if name == wanted:
        return True
    prefix, _, index = name.rpartition("-partition-")
    return prefix == wanted and index.isdigit()


def _partitioned(root: Path, problems: list[str]) -> dict[str, int]:
    from cursorkit.fsio import read_regular

    path = root / PARTITIONED_FILE
    try:
        doc = json.loads(read_regular(path, _MAX_PARTITIONED_FILE))
        return {str(k): int(v) for k, v in doc.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError, TypeError) as e:
        problems.append(f"{path}: unreadable ({e})")
        return {}


def _children(directory: Path) -> list[Path]:
    """Subdirectories (never through a symlink), sorted."""
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
    except FileNotFoundError:
        return []


def _topic_directories(topics: Path, problems: list[str]) -> list[tuple[str, Path]]:
    """``(full name, directory)`` of each topic under ``topics/<tenant>/<namespace>/<local>``."""
    from cursorkit.broker.server.paths import listed_segment

    found: list[tuple[str, Path]] = []

    def named(directory: Path) -> str | None:
        try:
            name = listed_segment(directory)
        except CursorkitError as e:
            problems.append(str(e))
            return None
        if name is None:
            problems.append(f"{directory}: a long name's directory without its name file")
        return name

    for tenant_dir in _children(topics):
        tenant = named(tenant_dir)
        for ns_dir in _children(tenant_dir) if tenant is not None else []:
            ns = named(ns_dir)
            for local_dir in _children(ns_dir) if ns is not None else []:
                local = named(local_dir)
                if local is not None:
                    found.append((f"persistent://{tenant}/{ns}/{local}", local_dir))
    return sorted(found)


# -- one topic -------------------------------------------------------------------------------------


def _topic(name: str, directory: Path) -> TopicSummary:
    from cursorkit.broker.log.recovery import recover_directory

    log_dir = directory / "log"
    ledgers: list[LedgerSummary] = []
    damage: list[str] = []
    torn = 0
    error = None
    if log_dir.is_dir():
        try:
            found = recover_directory(log_dir, tidy=False)
        except OSError as e:
            error = f"{log_dir}: unreadable ({e.strerror or e})"
        else:
            for segment in found.segments:
                ledgers.append(LedgerSummary(segment.ledger_id, segment.entries, segment.end))
                segment.close()
            report = found.report
            damage = [f"ledger {lid} from byte {at}: {why}" for lid, at, why in report.damaged]
            torn = report.torn_tail_bytes
    sizes = {ledger.ledger_id: ledger.entries for ledger in ledgers}
    held = [ledger for ledger in ledgers if ledger.entries]
    return TopicSummary(
        name=name,
        directory=str(directory),
        ledgers=ledgers,
        first=f"{held[0].ledger_id}:0" if held else None,
        last=f"{held[-1].ledger_id}:{held[-1].entries - 1}" if held else None,
        log_damage=damage,
        torn_tail_bytes=torn,
        subscriptions=_subscriptions(directory / "subscriptions", sizes),
        error=error,
    )


def _subscriptions(directory: Path, sizes: dict[int, int]) -> list[SubscriptionSummary]:
    from cursorkit.broker.server.paths import listed_subscription

    out: list[SubscriptionSummary] = []
    for sub_dir in _children(directory):
        try:
            name = listed_subscription(sub_dir)
        except CursorkitError as e:
            out.append(SubscriptionSummary(name=sub_dir.name, directory=str(sub_dir), error=str(e)))
            continue
        cursor_dir = sub_dir / "cursor"
        if not cursor_dir.is_dir():
            out.append(SubscriptionSummary(name=name, directory=str(sub_dir), cursor="elsewhere"))
            continue
        out.append(_subscription(name, sub_dir, cursor_dir, sizes))
    return sorted(out, key=lambda s: s.name)


def _subscription(name: str, sub_dir: Path, cursor_dir: Path, sizes: dict[int, int]) -> SubscriptionSummary:
    """The cursor recovered from a copy of its store, and its backlog against the log's ledgers."""
    from cursorkit import CursorStore
    from cursorkit.fsio import read_regular

    with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
        copy = Path(tmp) / "cursor"
        copy.mkdir()
        try:
            for p in cursor_dir.iterdir():
                if p.is_file() and not p.is_symlink():
                    (copy / p.name).write_bytes(read_regular(p))
            with CursorStore.open(copy) as store:
                cursor = store.recover()
                report = store.report
        except (CursorkitError, OSError) as e:
            return SubscriptionSummary(name=name, directory=str(sub_dir), error=f"cursor store: {e}")
    mark_delete = cursor.mark_delete_position
    backlog: int | None = None
    error = None
    try:
        backlog = cursor.backlog(sizes) if sizes else 0
    except CursorkitError as e:  # acks past the entries the log serves: the log lost some
        error = f"backlog unknown: {e}"
    return SubscriptionSummary(
        name=name,
        directory=str(sub_dir),
        mark_delete=f"{mark_delete.ledger_id}:{mark_delete.entry_id}",
        backlog=backlog,
        acked_ranges=cursor.non_contiguous_deleted_ranges,
        partial_batches=cursor.batch_count,
        error=error,
        recovered_past=_stepped_over(report) if report.damaged else None,
    )


def _stepped_over(report: object) -> str:
    """What a file store's recovery passed over, in a line."""
    parts = []
    meta_error = getattr(report, "meta_error", None)
    if meta_error:
        parts.append(f"store.meta unusable ({meta_error})")
    for what, items in (("corrupt records", "corrupt_records"), ("newer markers", "fallbacks")):
        count = len(getattr(report, items, ()) or ())
        if count:
            parts.append(f"{count} {what}")
    torn = getattr(report, "torn_tail_bytes", 0)
    if torn:
        parts.append(f"a torn write of {torn} bytes")
    return "; ".join(parts) or "damage"
