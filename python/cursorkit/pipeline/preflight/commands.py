"""The commands' preflights: each checks a command's inputs, outputs and services, cheapest first.

:func:`check_rebuild` also says which job the logs are for (a ``topic`` column or not).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cursorkit.errors import InvalidArgument, InvalidInput
from cursorkit.pipeline import schema
from cursorkit.pipeline.preflight.logs import LogFacts, read_facts
from cursorkit.pipeline.preflight.outputs import (
    check_creatable,
    check_many_output,
    check_one_topic_locations,
    check_output_dir,
)
from cursorkit.pipeline.preflight.services import check_java, check_master, check_zookeeper

__all__ = ["RebuildPlan", "check_demo", "check_generate", "check_rebuild"]


@dataclass(frozen=True, slots=True)
class RebuildPlan:
    """The checked inputs of a rebuild and the job they are for."""

    messages: LogFacts
    acks: LogFacts | None
    many: bool
    """True: logs with a topic column, for the many-topic job (``cluster.rebuild_topics``)."""


def check_rebuild(
    messages: str,
    acks: str | None,
    out: str,
    *,
    master: str | None = None,
    cursor_store: str | None = None,
    cursor_objects: str | None = None,
    now_ms: int | None = None,
    allow_empty: bool = False,
) -> RebuildPlan:
    """Every check of ``cursorkit rebuild`` that needs no Spark, cheapest first; returns the plan.

    Raises:
        InvalidInput: a log is missing, unreadable, lacks a column, has a column of the wrong type or
            values the job would refuse (footer statistics, the first row group's ack types), or the
            message log is empty without ``allow_empty``.
        InvalidArgument: the output cannot take this run, an option contradicts the logs, or the
            Spark master or the ZooKeeper ensemble does not accept a connection.
    """
    msgs = read_facts(messages, schema.MESSAGE_COLUMNS, "message")
    ack_facts = read_facts(acks, schema.ACK_COLUMNS, "ack") if acks is not None else None
    many = msgs.has_topic
    if acks is not None and ack_facts is not None and ack_facts.has_topic != many:
        if many:
            raise InvalidInput(
                f"ack log {acks}: no topic column, but the message log has one", source=acks, column="topic"
            )
        raise InvalidInput(
            f"ack log {acks}: a topic column, but the message log {messages} has none (a one-topic log)",
            source=acks,
            column="topic",
        )
    if msgs.empty:
        if not allow_empty:
            raise InvalidInput(
                f"message log {messages}: no rows, so there is nothing to rebuild "
                "(--allow-empty accepts an empty log)",
                source=messages,
            )
        if not many and now_ms is None:
            raise InvalidArgument(
                f"--allow-empty: the message log {messages} is empty, so it has no last publish_time "
                "to rebuild at; give --now MS"
            )
    if many:
        check_many_output(out)
    else:
        check_one_topic_locations(messages, acks, out)
    if cursor_objects is not None and cursor_store is None:
        raise InvalidArgument("--cursor-objects applies with --cursor-store only")
    if cursor_store is not None:
        check_zookeeper(cursor_store)
    check_master(master)
    check_java()
    return RebuildPlan(msgs, ack_facts, many)


def check_generate(out: str | os.PathLike[str]) -> None:
    """``cursorkit generate``: ``out`` is a directory (or can be made one) without logs in it.

    Raises:
        InvalidArgument: ``out`` is a file, already holds ``messages/`` or ``acks/``, or cannot be made.
    """
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise InvalidArgument(f"--out {root} exists and is not a directory")
    for name in ("messages", "acks"):
        if (root / name).exists():
            raise InvalidArgument(f"--out {root}: {root / name} already exists; generate writes a new log")
    check_creatable(root, "--out")


def check_demo(directory: str | os.PathLike[str], master: str | None) -> None:
    """``cursorkit demo``: its directory can take the demo's logs and rebuild, and the master answers.

    Raises:
        InvalidArgument: ``directory`` is a file or holds something other than an earlier demo's
            rebuild under ``rebuild/``, or the master does not accept a connection.
    """
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise InvalidArgument(f"--dir {root} exists and is not a directory")
    check_output_dir(root / "rebuild", "--dir")
    check_master(master)
    check_java()
