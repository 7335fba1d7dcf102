"""Checks of the outputs: a local directory or an object-store prefix that a run may write.

Absent, empty or an earlier rebuild's output; a one-topic rebuild reads and writes local paths only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from cursorkit.errors import InvalidArgument

__all__ = ["check_creatable", "check_many_output", "check_one_topic_locations", "check_output_dir"]


def check_output_dir(out: Path, option: str = "--out", *, ignore: Iterable[str] = ()) -> None:
    """A local rebuild output: absent, empty or an earlier rebuild's, and creatable.

    Entries named in ``ignore`` do not make the directory non-empty (a many-topic run's staging).

    Raises:
        InvalidArgument: ``out`` is a file, a non-empty directory without a ``manifest.json``, or
            its nearest existing parent is not a writable directory.
    """
    from cursorkit.pipeline.load import MANIFEST_FILE

    if out.exists():
        if not out.is_dir():
            raise InvalidArgument(f"{option} {out} exists and is not a directory")
        skip = set(ignore)
        others = [p.name for p in out.iterdir() if p.name not in skip]
        if others and MANIFEST_FILE not in others:
            raise InvalidArgument(f"{option} {out} is a non-empty directory that is not a rebuild's output")
    check_creatable(out, option)


def check_one_topic_locations(messages: str, acks: str | None, out: str) -> None:
    """A one-topic rebuild reads and writes local paths: the driver writes its output itself."""
    from cursorkit.pipeline.output import is_object_store

    for option, value in (("--messages", messages), ("--acks", acks), ("--out", out)):
        if value is not None and is_object_store(value):
            raise InvalidArgument(
                f"{option} {value}: a one-topic log (no topic column) is read and written on local paths; "
                "object stores take many-topic logs (with a topic column)"
            )
    check_output_dir(Path(out.removeprefix("file://")))


def check_many_output(out: str) -> None:
    """A many-topic output: a local directory or an object-store prefix that is absent or a rebuild's."""
    from cursorkit.pipeline.load import MANIFEST_FILE
    from cursorkit.pipeline.output import LEASE_FILE, RUNS_DIR, is_object_store, open_output

    if not is_object_store(out):
        check_output_dir(Path(out.removeprefix("file://")), ignore=(RUNS_DIR, LEASE_FILE))
        return
    output = open_output(out)
    try:
        kind = output.kind()
        names = output.names() if kind == "dir" else []
    except (OSError, pa.ArrowException) as e:
        raise InvalidArgument(f"--out {out}: cannot be listed: {e}") from e
    if kind == "file":
        raise InvalidArgument(f"--out {out} exists and is not a directory")
    others = [n for n in names if n not in (RUNS_DIR, LEASE_FILE)]
    if others and MANIFEST_FILE not in others:
        raise InvalidArgument(f"--out {out} is a non-empty prefix that is not a rebuild's output")


def check_creatable(path: Path, option: str) -> None:
    """``path`` exists, or its nearest existing parent is a directory this process may write in."""
    parent = path.absolute()
    while not parent.exists():
        parent = parent.parent
    if parent == path.absolute():
        return
    if not parent.is_dir():
        raise InvalidArgument(f"{option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{option} {path}: cannot create it, {parent} is not writable")
