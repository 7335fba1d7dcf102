"""The cursor-properties store the bucket tracker keeps its bucket pointers in.

Pulsar records every immutable bucket as a cursor property
``#pulsar.internal.delayed.bucket_<start>_<end>`` = snapshot id, and rebuilds the tracker from them.
:class:`CursorProperties` is that map plus :meth:`~CursorProperties.apply`, a multi-key change made
durable in one step, so a merge adds the merged bucket and drops its sources atomically.
:class:`FileCursorProperties` persists the map to one small checksummed file, rewritten atomically on
every change; :class:`MemoryCursorProperties` is the non-durable twin for tests and embedding.

File layout (little endian)::

    magic (8 bytes: 0x89 "CKPROP" LF) | version u16 | flags u16 (0) | count u32
    count x (key length u32 | key UTF-8 | value length u32 | value UTF-8), keys ascending
    CRC-32 u32 of everything before it
"""

from __future__ import annotations

import abc
import contextlib
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path

from cursorkit.errors import CorruptSnapshot, InvalidArgument, InvalidInputType, UnsupportedVersion
from cursorkit.fsio import Opener, atomic_write, fsync_dir, temp_target

__all__ = ["FORMAT_VERSION", "CursorProperties", "FileCursorProperties", "MemoryCursorProperties"]

FORMAT_VERSION = 1
"""Version of the properties file format this build writes and reads."""

_MAGIC = b"\x89CKPROP\n"
_HEAD = struct.Struct("<8sHHI")  # magic, version, flags, count
_U32 = struct.Struct("<I")


def _check_text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInputType(f"cursor property {what} must be a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"cursor property {what} {value!r} is not encodable as UTF-8") from e
    return value


class CursorProperties(MutableMapping[str, str]):
    """A ``str -> str`` map whose changes are durable as they return, with an atomic multi-key change.

    Every ``MutableMapping`` method works; single changes (``props[k] = v``, ``del props[k]``) are
    one durable step each (so is each key of ``update``), :meth:`apply` and :meth:`clear` one step
    for all their keys. Thread-safe;
    iteration runs over the state at the time it began. Keys and values must be ``str``
    (``InvalidInputType`` otherwise); a failed change leaves the map as it was.
    """

    def __init__(self, initial: Mapping[str, str]) -> None:
        self._data: dict[str, str] = dict(initial)
        self._lock = threading.RLock()

    @abc.abstractmethod
    def _commit(self, new: dict[str, str]) -> None:
        """Makes ``new`` the durable content; raises (leaving the old content) when it cannot."""

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)  # the dict is replaced, never changed, so this never sees a change

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __setitem__(self, key: str, value: str) -> None:
        self.apply({key: value})

    def __delitem__(self, key: str) -> None:
        with self._lock:
            if key not in self._data:
                raise KeyError(key)
            self.apply({}, (key,))

    def apply(self, set_items: Mapping[str, str], delete_keys: Iterable[str] = ()) -> None:
        """Sets ``set_items`` and removes ``delete_keys`` (missing ones are ignored) in one durable step.

        A key in both is an ``InvalidArgument``; nothing is written when nothing changes.
        """
        if not isinstance(set_items, Mapping):
            raise InvalidInputType(f"set_items must be a mapping, got {type(set_items).__name__}")
        if isinstance(delete_keys, str | bytes) or not isinstance(delete_keys, Iterable):
            raise InvalidInputType(
                f"delete_keys must be an iterable of str, got {type(delete_keys).__name__}"
            )
        sets = {_check_text("key", k): _check_text("value", v) for k, v in set_items.items()}
        deletes = [_check_text("key", k) for k in delete_keys]
        both = sets.keys() & set(deletes)
        if both:
            raise InvalidArgument(f"keys both set and deleted: {sorted(both)}")
        with self._lock:
            new = dict(self._data)
            for k in deletes:
                new.pop(k, None)
            new.update(sets)
            if new == self._data:
                return
            self._commit(new)
            self._data = new

    def clear(self) -> None:
        """Removes every property in one durable step."""
        with self._lock:
            self.apply({}, list(self._data))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


class MemoryCursorProperties(CursorProperties):
    """A dict-backed :class:`CursorProperties`: same semantics, nothing durable."""

    def __init__(self, initial: Mapping[str, str] | None = None) -> None:
        if initial is not None and not isinstance(initial, Mapping):
            raise InvalidInputType(f"initial must be a mapping, got {type(initial).__name__}")
        items = {} if initial is None else initial
        super().__init__({_check_text("key", k): _check_text("value", v) for k, v in items.items()})

    def _commit(self, new: dict[str, str]) -> None:
        """Nothing to persist."""


def _encode(data: Mapping[str, str]) -> bytes:
    parts = [_HEAD.pack(_MAGIC, FORMAT_VERSION, 0, len(data))]
    for key in sorted(data):
        for raw in (key.encode("utf-8"), data[key].encode("utf-8")):
            parts += [_U32.pack(len(raw)), raw]
    body = b"".join(parts)
    return body + _U32.pack(zlib.crc32(body))


def _decode(data: bytes, where: Path) -> dict[str, str]:
    if len(data) < _HEAD.size + _U32.size:
        raise CorruptSnapshot(f"{where}: {len(data)} bytes is shorter than a properties file (at byte 0)")
    end = len(data) - _U32.size
    (crc,) = _U32.unpack_from(data, end)
    magic, version, flags, count = _HEAD.unpack_from(data, 0)
    if magic != _MAGIC:
        raise CorruptSnapshot(f"{where}: bad magic at byte 0 (not a cursor properties file)")
    if zlib.crc32(memoryview(data)[:end]) != crc:
        raise CorruptSnapshot(
            f"{where}: checksum mismatch (checksum at byte {end}; file truncated or damaged)"
        )
    if version != FORMAT_VERSION or flags != 0:
        raise UnsupportedVersion(f"{where}: properties format {version}; this build reads {FORMAT_VERSION}")
    out: dict[str, str] = {}
    pos = _HEAD.size
    for _ in range(count):
        texts: list[str] = []
        for _part in range(2):
            if pos + _U32.size > end:
                raise CorruptSnapshot(f"{where}: entry runs past the end at byte {pos}")
            (n,) = _U32.unpack_from(data, pos)
            pos += _U32.size
            if pos + n > end:
                raise CorruptSnapshot(f"{where}: entry runs past the end at byte {pos}")
            try:
                texts.append(data[pos : pos + n].decode("utf-8"))
            except UnicodeDecodeError as e:
                raise CorruptSnapshot(f"{where}: entry at byte {pos} is not UTF-8") from e
            pos += n
        out[texts[0]] = texts[1]
    if pos != end or len(out) != count:
        raise CorruptSnapshot(f"{where}: entries do not match their count at byte {pos}")
    return out


class FileCursorProperties(CursorProperties):
    """:class:`CursorProperties` in one checksummed file, rewritten atomically by every change.

    Loaded at construction (an empty file is written when none exists; its directory is created);
    ``CorruptSnapshot`` names the file when it is damaged. A failed write raises ``PersistFailed``
    and keeps the previous content in memory and on disk (unless only the final directory fsync
    failed: the new file is then in place but may not survive a crash). ``opener`` is the
    ``CursorStore`` fault-injection hook. One object per file: two writers would overwrite each other.
    """

    def __init__(self, path: str | os.PathLike[str], *, opener: Opener | None = None) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidInputType(f"path must be a str or path, got {type(path).__name__}")
        if opener is not None and not callable(opener):
            raise InvalidInputType(f"opener must be callable, got {type(opener).__name__}")
        self._path = Path(path)
        self._opener = opener
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_stale_temps()
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            super().__init__({})
            atomic_write(self._path, _encode({}), opener=opener)
            return
        super().__init__(_decode(raw, self._path))

    @property
    def path(self) -> Path:
        """The properties file."""
        return self._path

    def _drop_stale_temps(self) -> None:
        """Removes temp files an interrupted write of this file left behind."""
        removed = False
        for p in self._path.parent.iterdir():
            if temp_target(p.name) == self._path.name:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                removed = True
        if removed:
            fsync_dir(self._path.parent)

    def _commit(self, new: dict[str, str]) -> None:
        """Rewrites the whole file atomically (temp, fsync, rename, fsync directory)."""
        atomic_write(self._path, _encode(new), opener=self._opener)

    def __repr__(self) -> str:
        return f"FileCursorProperties({str(self._path)!r}, {self._data!r})"
