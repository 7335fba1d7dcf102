"""Inspecting a many-topic rebuild output, local or on an object store: every topic, checked.

Each topic's directory is checked against the root manifest (every file's size and SHA-256, and
that it holds the topic the manifest names it for) and inspected like a one-topic output, so one
damaged topic among a thousand is found without naming it. On an object store a topic is fetched
into a temporary directory first; paths in the summary name the object store, never the copy.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cursorkit.errors import CursorkitError, DamagedStore, InvalidArgument
from cursorkit.pipeline.inspector.outputs import inspect_rebuild
from cursorkit.pipeline.inspector.summaries import RebuildOutputSummary, retarget
from cursorkit.pipeline.manifest import TopicsManifest, inside

__all__ = ["TopicsOutputSummary", "inspect_topic", "inspect_topics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicsOutputSummary:
    """A many-topic rebuild output: the run's figures per topic and each topic's inspection."""

    path: str
    run: str
    figures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per topic, the run's figures (``summary.json``); empty when the summary is unreadable."""
    topics: Mapping[str, RebuildOutputSummary] = field(default_factory=dict)
    """Each topic that could be inspected."""
    problems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per topic (``""``: the output as a whole), what kept it from being inspected or read."""

    @property
    def damaged_topics(self) -> list[str]:
        """Topics with any damage, in name order."""
        bad = {t for t, s in self.topics.items() if s.damaged} | {t for t in self.problems if t}
        return sorted(bad)

    @property
    def damaged(self) -> bool:
        """Whether any topic, or the output as a whole, is damaged."""
        return bool(self.damaged_topics) or bool(self.problems.get(""))

    def damage_of(self, topic: str) -> list[str]:
        """What is wrong with one topic, one line per part (empty: nothing)."""
        lines = list(self.problems.get(topic, ()))
        s = self.topics.get(topic)
        if s is not None:
            lines += list(s.problems)
            if s.delayed is not None and s.delayed.damaged:
                lines.append("delayed index: " + (s.delayed.error or _bucket_damage(s)))
            for name, c in sorted(s.subscriptions.items()):
                if c.damaged:
                    lines.append(f"subscription {name!r}: {c.error or _recovery_damage(c.recovery)}")
        return lines


def _bucket_damage(s: RebuildOutputSummary) -> str:
    assert s.delayed is not None
    bad = s.delayed.damaged_buckets
    if bad:
        return f"damaged buckets {', '.join(map(str, bad))}"
    return "its properties name snapshots that are missing or damaged"


def _recovery_damage(report: object) -> str:
    steps = [str(d) for d in (*getattr(report, "fallbacks", ()), *getattr(report, "corrupt_records", ()))]
    torn = getattr(report, "torn_tail_bytes", 0)
    if torn:
        steps.append(f"a torn tail of {torn} bytes")
    return "; ".join(steps[:3]) or "recovery stepped over damage"


def inspect_topics(location: str, *, verify: bool = True, sample: int = 20) -> TopicsOutputSummary:
    """Inspects every topic of a many-topic output at ``location`` (a directory or ``s3://…``)."""
    from cursorkit.pipeline.cluster import read_topic_figures
    from cursorkit.pipeline.load import open_topics
    from cursorkit.pipeline.locations import is_object_store

    output, doc = open_topics(location)
    problems: dict[str, tuple[str, ...]] = {}
    try:
        figures: Mapping[str, Mapping[str, Any]] = read_topic_figures(location)
    except CursorkitError as e:
        figures = {}
        problems[""] = (f"the run's summary: {e}",)
    if is_object_store(location):
        topics = _remote(output.uri, doc, problems, verify=verify, sample=sample)
    else:
        topics = _local(Path(location), doc, problems, verify=verify, sample=sample)
    return TopicsOutputSummary(
        path=output.uri, run=doc.run, figures=figures, topics=topics, problems=problems
    )


def _local(
    root: Path, doc: TopicsManifest, problems: dict[str, tuple[str, ...]], *, verify: bool, sample: int
) -> dict[str, RebuildOutputSummary]:
    out: dict[str, RebuildOutputSummary] = {}
    for topic, entry in sorted(doc.topics.items()):
        try:
            where = inside(root, entry.dir, f"topics[{topic!r}].dir")
            out[topic] = inspect_rebuild(where, verify=verify, sample=sample, files=entry.files, topic=topic)
        except CursorkitError as e:
            problems[topic] = (str(e),)
    return out


def _remote(
    uri: str, doc: TopicsManifest, problems: dict[str, tuple[str, ...]], *, verify: bool, sample: int
) -> dict[str, RebuildOutputSummary]:
    from cursorkit.pipeline.load import fetch_topic

    out: dict[str, RebuildOutputSummary] = {}
    for topic, entry in sorted(doc.topics.items()):
        with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
            try:
                local = fetch_topic(uri, topic, tmp)
                summary = inspect_rebuild(local, verify=verify, sample=sample, files=entry.files, topic=topic)
            except DamagedStore as e:
                problems[topic] = tuple(f"{path}: {why}" for path, why in e.damage.items()) or (str(e),)
                continue
            except CursorkitError as e:
                problems[topic] = (str(e),)
                continue
            out[topic] = retarget(summary, str(local), f"{uri.rstrip('/')}/{entry.dir}")
    return out


def inspect_topic(
    location: str, topic: str, *, verify: bool = True, sample: int = 20
) -> RebuildOutputSummary:
    """Inspects one topic of a many-topic output (a directory or ``s3://…``) against the root manifest.

    Raises ``InvalidArgument`` when the output has no such topic, ``DamagedStore`` when an object
    store's copy of the topic does not match the manifest.
    """
    from cursorkit.pipeline.load import open_topics
    from cursorkit.pipeline.locations import is_object_store

    output, doc = open_topics(location)
    entry = doc.topics.get(topic)
    if entry is None:
        raise InvalidArgument(f"{location} has no topic {topic!r}")
    if not is_object_store(location):
        where = inside(Path(location), entry.dir, f"topics[{topic!r}].dir")
        return inspect_rebuild(where, verify=verify, sample=sample, files=entry.files, topic=topic)
    from cursorkit.pipeline.load import fetch_topic

    with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
        local = fetch_topic(output.uri, topic, tmp)
        summary = inspect_rebuild(local, verify=verify, sample=sample, files=entry.files, topic=topic)
        return retarget(summary, str(local), f"{output.uri.rstrip('/')}/{entry.dir}")
