"""``cursorkit rebuild --cursor-store zk://...``: the rebuilt cursors published where Pulsar keeps them.

After a rebuild commits, every subscription's cursor is read back from the output and written to its
Pulsar znode, ``/managed-ledgers/<tenant>/<ns>/persistent/<topic>/<subscription>`` under the
location's path (a chroot; ``zk://host:2181`` alone means the ensemble's root), so a cluster whose
metadata store was lost gets its subscriptions back. A znode that already exists is left alone and
counted, unless ``overwrite`` (then the rebuilt state replaces it and its owner is fenced). State
beyond the znode goes to ``objects`` when given; otherwise it is cut as Pulsar cuts it, and counted.
A cursor whose store in the output is damaged (its files differ from the manifest, or its recovery
stepped over damage) is never published unless ``publish_damaged``: a rewound cursor in ZooKeeper
would make Pulsar redeliver what was acknowledged. A topic that cannot be read is counted as failed
and the others go on. The driver holds one topic's cursors at a time; each topic's writes travel
pipelined.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cursorkit.ackstate.store.zookeeper import ZkCursorStore, flush_many
from cursorkit.errors import CursorkitError, InvalidArgument
from cursorkit.pipeline.load import fetch_topic, list_topics, read_cursors
from cursorkit.pipeline.output import is_object_store
from cursorkit.stores.location import ZkLocation, cursor_znode_path, parse_zk_root
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
    """Znode (or topic, when the topic could not be read) → why it was not published."""
    damaged: dict[str, str] = field(default_factory=dict)
    """Znode → what its damaged store lost: not published (``publish_damaged`` not given)."""
    forced: dict[str, str] = field(default_factory=dict)
    """Znode → what its damaged store lost: published anyway (``publish_damaged``)."""


def publish_cursors(
    out: str | os.PathLike[str],
    location: str,
    *,
    topics: list[str] | None = None,
    one_topic: str | None = None,
    objects: ObjectStore | None = None,
    overwrite: bool = False,
    publish_damaged: bool = False,
    on_topic: Callable[[str], None] | None = None,
    **zk: Any,
) -> PublishSummary:
    """Publishes the cursors of a rebuild output ``out`` to the ZooKeeper ensemble of ``location``.

    A many-topic output publishes every topic (or those in ``topics``); a one-topic output's cursors
    belong to ``one_topic`` (the rebuild's ``--topic``). Damaged cursors are left out and listed in
    ``damaged`` unless ``publish_damaged`` (then they are written and listed in ``forced``).
    """
    publisher = _Publisher(parse_zk_root(location), objects, overwrite, publish_damaged, zk)
    text = os.fspath(out)
    remote = is_object_store(text)
    local_topics = {} if remote else list_topics(text)
    if not remote and not local_topics:
        if one_topic is None:
            raise InvalidArgument("a one-topic output needs the topic its cursors belong to")
        publisher.topic(Path(text), None, one_topic)
        return publisher.summary
    if topics is None:
        topics = sorted(_remote_topics(text) if remote else local_topics)
    for topic in topics:
        if on_topic is not None:
            on_topic(topic)
        try:
            if remote:
                with tempfile.TemporaryDirectory(prefix="cursorkit-publish-") as tmp:
                    publisher.topic(fetch_topic(text, topic, tmp), None, topic)
            else:
                publisher.topic(Path(text), topic, topic)
        except CursorkitError as e:  # this topic cannot be read: the others still go
            publisher.summary.failed[topic] = str(e)
    return publisher.summary


def _remote_topics(out: str) -> list[str]:
    from cursorkit.pipeline.cluster import read_topic_figures

    return list(read_topic_figures(out))


@dataclass(slots=True)
class _Publisher:
    """Where cursors go (ensemble and chroot, object store) and what publishing them did."""

    root: ZkLocation
    objects: ObjectStore | None
    overwrite: bool
    publish_damaged: bool
    zk: dict[str, Any]
    summary: PublishSummary = field(default_factory=PublishSummary)

    def topic(self, output: Path, topic_in_output: str | None, topic: str) -> None:
        """Writes one topic's cursors (read from ``output``) to their znodes, pipelined."""
        summary = self.summary
        cursors = read_cursors(output, topic=topic_in_output, allow_damaged=True)
        stores: list[tuple[ZkCursorStore, Any]] = []
        for subscription in cursors.damage.keys() - cursors.keys():  # no state to publish at all
            summary.damaged[self.root.path + cursor_znode_path(topic, subscription)] = cursors.damage[
                subscription
            ]
        try:
            for subscription, cursor in sorted(cursors.items()):
                path = self.root.path + cursor_znode_path(topic, subscription)
                lost = cursors.damage.get(subscription)
                if lost is not None:
                    if not self.publish_damaged:
                        summary.damaged[path] = lost
                        continue
                    summary.forced[path] = lost
                location = f"zk://{self.root.hosts}{path}"
                options = {"name": subscription, "objects": self.objects, **self.zk}
                try:
                    store = ZkCursorStore.create(location, **options)
                except FileExistsError:
                    if not self.overwrite:
                        summary.existing.append(path)
                        continue
                    store = ZkCursorStore.open(location, **options)
                except CursorkitError as e:
                    summary.failed[path] = str(e)
                    continue
                counts = cursors.redeliveries.get(subscription)
                held = store.redelivery_counts  # an overwritten znode's counts give way to the rebuilt ones
                if len(held) or counts is not None:
                    held.clear()
                    if counts is not None:
                        held.apply(counts.encode())
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
