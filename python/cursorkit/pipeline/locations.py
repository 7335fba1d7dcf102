"""Where the pipeline reads and writes, told from the location's text alone (no pyarrow needed).

``cursorkit inspect`` checks a location with these before it knows whether it needs an object store,
so it runs with only the broker's extra installed.
"""

from __future__ import annotations

import os

from cursorkit.errors import InvalidArgument

__all__ = ["OBJECT_STORE_SCHEMES", "check_scheme", "is_object_store"]

OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "hdfs", "abfs", "abfss")
"""URI schemes of the object stores (and HDFS) reached through ``pyarrow.fs``; ``file://`` is a path."""


def check_scheme(location: str, what: str, *, also: tuple[str, ...] = ()) -> None:
    """Refuses (``InvalidArgument``) a ``scheme://`` location no reader here opens, naming the ones it does.

    ``also`` adds schemes the caller opens itself (``zk`` for ``inspect``).
    """
    if "://" not in location:
        return
    scheme = location.partition("://")[0]
    known = ("file", *OBJECT_STORE_SCHEMES, *also)
    if scheme not in known:
        hint = " (ZooKeeper is zk://host:port/path)" if scheme in ("zookeeper", "zoo", "zkp") else ""
        raise InvalidArgument(
            f"{what} {location}: unknown scheme {scheme}://{hint}; use a path or "
            + ", ".join(f"{k}://" for k in known)
        )


def is_object_store(out: str | os.PathLike[str]) -> bool:
    """Whether ``out`` names an object store (``s3://``...) rather than a path."""
    text = os.fspath(out)
    return "://" in text and not text.startswith("file://")
