"""Object storage through ``pyarrow.fs``: immutable objects put whole, read whole or by byte range.

``ObjectStore("s3://bucket/prefix", endpoint=..., access_key=..., ...)`` is a prefix on any
S3-compatible store (AWS, MinIO, Ceph, moto's server); any other ``pyarrow.fs`` URI (``gs://``,
``file://``, a plain path) works too, or a ready ``filesystem``. A put is one atomic PUT, so a reader
sees a whole object or none. Settings not given fall back to the AWS variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``), as the AWS tools do.

Errors: a missing object is ``FileNotFoundError``; a write the store did not take is
``PersistFailed``; a read it did not answer is ``StoreUnavailable``; a key that would leave the
prefix is ``InvalidArgument``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cursorkit.errors import InvalidArgument, InvalidInputType, PersistFailed, StoreUnavailable
from cursorkit.fsio import atomic_write

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["ObjectInfo", "ObjectStore", "s3_filesystem"]


def _pafs() -> Any:
    """``pyarrow.fs``, imported on first use (the broker-side library does not need pyarrow)."""
    try:
        import pyarrow.fs
    except ModuleNotFoundError as e:  # pragma: no cover - the dev venv has pyarrow
        raise ModuleNotFoundError(
            "object stores need pyarrow: pip install 'cursorkit[objectstore]'", name="pyarrow"
        ) from e
    return pyarrow.fs


_KEY_PART = re.compile(r"[A-Za-z0-9._=+@,-]+")
_MAX_KEY_BYTES = 1024


def s3_filesystem(
    *,
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    **options: Any,
) -> pafs.S3FileSystem:
    """An S3 file system from explicit settings, each falling back to its AWS variable.

    ``endpoint`` is a URL (``http://127.0.0.1:9000``); other keyword arguments go to
    ``pyarrow.fs.S3FileSystem`` (``request_timeout``, ``connect_timeout``, ``retry_strategy``...).
    """
    endpoint = endpoint if endpoint is not None else os.environ.get("AWS_ENDPOINT_URL")
    settings: dict[str, Any] = {
        "region": region if region is not None else os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "allow_bucket_creation": True,
        **options,
    }
    if access_key is not None or secret_key is not None:
        settings.update(access_key=access_key, secret_key=secret_key, session_token=session_token)
    if endpoint:
        scheme, sep, host = endpoint.partition("://")
        settings.setdefault("endpoint_override", host.rstrip("/") if sep else scheme)
        settings.setdefault("scheme", scheme if sep else "https")
    try:
        fs: pafs.S3FileSystem = _pafs().S3FileSystem(**settings)
        return fs
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"object store settings: {e}") from e


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object: its key under the store's prefix and its size."""

    key: str
    size: int


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInputType(f"an object key must be a str, got {type(key).__name__}")
    parts = key.split("/")
    if not key or len(key.encode()) > _MAX_KEY_BYTES or not all(_KEY_PART.fullmatch(p) for p in parts):
        raise InvalidArgument(f"object key {key!r} is not '/'-separated [A-Za-z0-9._=+@,-] names")
    if any(p in (".", "..") for p in parts):
        raise InvalidArgument(f"object key {key!r} has a '.' or '..' segment")
    return key


class ObjectStore:
    """A prefix of an object store: put, get, ranged get, size, delete and list of immutable objects.

    Thread-safe (``pyarrow.fs`` file systems are). ``uri`` is kept for messages and for the
    references other records hold (a cursor znode names its state object by URI).
    """

    def __init__(
        self,
        uri: str,
        *,
        filesystem: pafs.FileSystem | None = None,
        endpoint: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        region: str | None = None,
        **options: Any,
    ) -> None:
        given: object = uri
        if not isinstance(given, str) or not given:
            raise InvalidInputType(f"an object store location must be a non-empty str, got {given!r}")
        self.uri = uri.rstrip("/")
        fsmod = _pafs()
        if filesystem is not None:
            if not isinstance(filesystem, fsmod.FileSystem):
                raise InvalidInputType(f"filesystem must be a pyarrow.fs.FileSystem, got {filesystem!r}")
            fs, root = filesystem, self.uri.partition("://")[2] if "://" in self.uri else self.uri
        elif self.uri.startswith("s3://"):
            fs = s3_filesystem(
                endpoint=endpoint,
                access_key=access_key,
                secret_key=secret_key,
                session_token=session_token,
                region=region,
                **options,
            )
            root = self.uri[len("s3://") :]
        elif "://" not in self.uri:
            fs, root = fsmod.LocalFileSystem(), os.path.abspath(self.uri)
        else:
            try:
                fs, root = fsmod.FileSystem.from_uri(self.uri)
            except (OSError, ValueError) as e:
                raise InvalidArgument(f"object store {uri!r}: {e}") from e
        bucket = root.strip("/").split("/", 1)[0]
        if not bucket:
            raise InvalidArgument(f"object store {uri!r} names no bucket or directory")
        self.filesystem: pafs.FileSystem = fs
        self.root = root.rstrip("/")
        self._local = isinstance(fs, fsmod.LocalFileSystem)

    def __repr__(self) -> str:
        return f"ObjectStore({self.uri!r})"

    def path_of(self, key: str) -> str:
        """The file-system path of ``key``."""
        return f"{self.root}/{_check_key(key)}"

    def uri_of(self, key: str) -> str:
        """The URI of ``key`` (what a reference to the object records)."""
        return f"{self.uri}/{_check_key(key)}"

    def put(self, key: str, data: bytes) -> None:
        """Stores ``data`` as ``key`` in one write a reader sees whole or not at all."""
        path = self.path_of(key)
        try:
            if self._local:
                self._put_local(path, data)
                return
            with self.filesystem.open_output_stream(path) as out:
                out.write(data)
        except OSError as e:
            raise PersistFailed(e.errno or errno.EIO, f"{self.uri}/{key}: put failed ({e})") from e

    def _put_local(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, data, sync=True)

    def get(self, key: str) -> bytes:
        """The whole object; ``FileNotFoundError`` when there is none."""
        path = self.path_of(key)
        try:
            with self.filesystem.open_input_stream(path) as src:
                data: bytes = src.read()
                return data
        except FileNotFoundError:
            raise
        except OSError as e:
            raise self._unavailable(key, "get", e) from e

    @contextlib.contextmanager
    def open_ranged(self, key: str) -> Iterator[tuple[int, Callable[[int, int], bytes]]]:
        """The object's size and a ``read(n, offset)`` of its bytes, for reads by byte range.

        Opening costs one metadata request; each read is one ranged GET. A missing object is
        ``FileNotFoundError``; a failed request, ``StoreUnavailable``.
        """
        path = self.path_of(key)
        try:
            src = self.filesystem.open_input_file(path)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise self._unavailable(key, "open", e) from e

        def read(n: int, offset: int) -> bytes:
            try:
                data: bytes = src.read_at(n, offset)
            except OSError as e:
                raise self._unavailable(key, "ranged get", e) from e
            return data

        try:
            yield int(src.size()), read
        finally:
            src.close()

    def size(self, key: str) -> int:
        """Stored bytes of the object; ``FileNotFoundError`` when there is none."""
        path = self.path_of(key)
        try:
            info = self.filesystem.get_file_info(path)
        except OSError as e:
            raise self._unavailable(key, "head", e) from e
        if info.type != _pafs().FileType.File:
            raise FileNotFoundError(errno.ENOENT, "no such object", f"{self.uri}/{key}")
        return int(info.size)

    def delete(self, key: str) -> bool:
        """Deletes the object; ``False`` if it was not there (deleting stays idempotent)."""
        path = self.path_of(key)
        try:
            self.filesystem.delete_file(path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise PersistFailed(e.errno or errno.EIO, f"{self.uri}/{key}: delete failed ({e})") from e
        return True

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object under the key prefix ``prefix`` (a '/'-separated directory, or the whole store)."""
        fsmod = _pafs()
        base = self.root if not prefix else self.path_of(prefix.rstrip("/"))
        try:
            found = self.filesystem.get_file_info(
                fsmod.FileSelector(base, recursive=True, allow_not_found=True)
            )
        except OSError as e:
            raise self._unavailable(prefix or ".", "list", e) from e
        cut = len(self.root) + 1
        out = [ObjectInfo(i.path[cut:], int(i.size)) for i in found if i.type == fsmod.FileType.File]
        out.sort(key=lambda o: o.key)
        return out

    def _unavailable(self, key: str, what: str, e: OSError) -> StoreUnavailable:
        return StoreUnavailable(e.errno or errno.EIO, f"{self.uri}/{key}: {what} failed ({e})")
