"""``cursorkit rebuild --cursor-store zk://...``: the rebuilt cursors published where Pulsar keeps them.

After a rebuild commits, every subscription's cursor is read back from the output and written to its
Pulsar znode, ``/managed-ledgers/<tenant>/<ns>/persistent/<topic>/<subscription>`` under the
location's path (a chroot; ``zk://host:2181`` alone means the ensemble's root), so a cluster whose
metadata store was lost gets its subscriptions back. A znode that already exists is left alone and
counted, unless ``overwrite`` (then the rebuilt state replaces it and its owner is fenced). State
beyond the znode goes to ``objects`` when given; otherwise it is cut as Pulsar cuts it, and counted.
The driver holds one topic's cursors at a time; each topic's writes travel pipelined.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cursorkit.ackstate.zk_store import ZkCursorStore, flush_many
from cursorkit.errors import CursorkitError, InvalidArgument
from cursorkit.pipeline.load import fetch_topic, list_topics, read_cursors
from cursorkit.pipeline.output import is_object_store
from cursorkit.stores.location import cursor_znode_path
from cursorkit.stores.objects import ObjectStore

__all__ = ["PublishSummary", "publish_cursors"]


@dataclass(slots=True)
class PublishSummary:
    """What :func:`publish_cursors` did, per cursor znode."""

    published: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    """Znodes left alone because they already existed (``overwrite`` not given)."""
    truncated: dict[str, int] = field(default_factory=dict)
    """Znode → ack ranges no durable copy holds (no object store for state beyond the znode)."""
    failed: dict[str, str] = field(default_factory=dict)


def _split(location: str) -> tuple[str, str]:
    """Hosts and chroot of ``zk://hosts[/chroot]``."""
    if not location.startswith("zk://"):
        raise InvalidArgument(f"--cursor-store must be a zk:// location, got {location!r}")
    rest = location[len("zk://") :]
    hosts, slash, chroot = rest.partition("/")
    if not hosts:
        raise InvalidArgument(f"{location!r}: no ZooKeeper host")
    return hosts, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""


def publish_cursors(
    out: str | os.PathLike[str],
    location: str,
    *,
    topics: list[str] | None = None,
    one_topic: str | None = None,
    objects: ObjectStore | None = None,
    overwrite: bool = False,
    on_topic: Callable[[str], None] | None = None,
    **zk: Any,
) -> PublishSummary:
    """Publishes the cursors of a rebuild output ``out`` to the ZooKeeper ensemble of ``location``.

    A many-topic output publishes every topic (or those in ``topics``); a one-topic output's cursors
    belong to ``one_topic`` (the rebuild's ``--topic``).
    """
    hosts, chroot = _split(location)
    summary = PublishSummary()
    text = os.fspath(out)
    many = list_topics(text) if not is_object_store(text) else None
    if is_object_store(text) or many:
        names = topics if topics is not None else sorted(_topics_of(text))
        for topic in names:
            if on_topic is not None:
                on_topic(topic)
            if is_object_store(text):
                with tempfile.TemporaryDirectory(prefix="cursorkit-publish-") as tmp:
                    _publish_topic(
                        fetch_topic(text, topic, tmp),
                        None,
                        topic,
                        hosts,
                        chroot,
                        objects,
                        overwrite,
                        summary,
                        zk,
                    )
            else:
                _publish_topic(Path(text), topic, topic, hosts, chroot, objects, overwrite, summary, zk)
        return summary
    if one_topic is None:
        raise InvalidArgument("a one-topic output needs the topic its cursors belong to")
    _publish_topic(Path(text), None, one_topic, hosts, chroot, objects, overwrite, summary, zk)
    return summary


def _topics_of(out: str) -> list[str]:
    if is_object_store(out):
        from cursorkit.pipeline.cluster import read_topic_figures

        return list(read_topic_figures(out))
    return list(list_topics(out))


def _publish_topic(
    root: Path,
    topic_in_output: str | None,
    topic: str,
    hosts: str,
    chroot: str,
    objects: ObjectStore | None,
    overwrite: bool,
    summary: PublishSummary,
    zk: dict[str, Any],
) -> None:
    cursors = read_cursors(root, topic=topic_in_output)
    stores: list[tuple[ZkCursorStore, Any]] = []
    try:
        for subscription, cursor in sorted(cursors.items()):
            path = chroot + cursor_znode_path(topic, subscription)
            location = f"zk://{hosts}{path}"
            try:
                store = ZkCursorStore.create(location, name=subscription, objects=objects, **zk)
            except FileExistsError:
                if not overwrite:
                    summary.existing.append(path)
                    continue
                store = ZkCursorStore.open(location, name=subscription, objects=objects, **zk)
            except CursorkitError as e:
                summary.failed[path] = str(e)
                continue
            stores.append((store, cursor))
        for (store, _cursor), result in zip(stores, flush_many(stores), strict=True):
            if isinstance(result, CursorkitError):
                summary.failed[store.path] = str(result)
                continue
            summary.published.append(store.path)
            if result.ranges_cut:
                summary.truncated[store.path] = result.ranges_cut
    finally:
        for store, _ in stores:
            store.close()
