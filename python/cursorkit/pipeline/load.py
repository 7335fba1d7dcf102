"""Opening a rebuild's output with the library: its cursors and its shared delayed index."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cursorkit.ackstate import Cursor
from cursorkit.ackstate.store import CursorStore
from cursorkit.delayed import BucketDelayedDeliveryTracker, FileBucketSnapshotStorage
from cursorkit.delayed.properties import FileCursorProperties
from cursorkit.errors import CorruptSnapshot, InvalidArgument

__all__ = ["Manifest", "open_delayed_index", "read_cursors", "read_manifest"]


@dataclass(frozen=True, slots=True)
class Manifest:
    """``manifest.json`` of a rebuild's output."""

    root: Path
    topic: str
    now_ms: int
    subscriptions: dict[str, str]
    """Subscription name -> cursor store directory (relative to ``root``)."""
    delayed: dict[str, str] | None
    """``storage``, ``properties``, ``topic``, ``cursor`` of the shared delayed index, or None."""
    raw: dict[str, Any]

    def ledger_sizes(self) -> dict[int, int]:
        """Entries per ledger of the message log (from ``summary.json``)."""
        data = json.loads((self.root / "summary.json").read_text())
        return {int(k): int(v) for k, v in data["ledger_sizes"].items()}


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest of the rebuild output at ``path`` (``InvalidArgument`` if it is not one)."""
    root = Path(path)
    try:
        raw = json.loads((root / "manifest.json").read_text())
    except FileNotFoundError:
        raise InvalidArgument(f"{root} is not a rebuild's output (no manifest.json)") from None
    except json.JSONDecodeError as e:
        raise CorruptSnapshot(f"{root / 'manifest.json'}: {e}") from None
    if raw.get("format") != "cursorkit-rebuild" or raw.get("version") != 1:
        raise CorruptSnapshot(f"{root / 'manifest.json'}: not a version-1 cursorkit rebuild manifest")
    return Manifest(
        root, raw["topic"], int(raw["now_ms"]), dict(raw["subscriptions"]), raw.get("delayed"), raw
    )


def read_cursors(
    path: str | os.PathLike[str], ledger_sizes: Mapping[int, int] | None = None
) -> dict[str, Cursor]:
    """Every subscription's cursor, recovered from its ``CursorStore``."""
    m = read_manifest(path)
    sizes = dict(ledger_sizes) if ledger_sizes is not None else m.ledger_sizes()
    out: dict[str, Cursor] = {}
    for name, rel in m.subscriptions.items():
        store = CursorStore.open(m.root / rel)
        try:
            out[name] = store.recover(ledger_sizes=sizes)
        finally:
            store.close()
    return out


def open_delayed_index(path: str | os.PathLike[str], **settings: Any) -> BucketDelayedDeliveryTracker | None:
    """The topic's delayed index recovered from the output (``settings`` go to the tracker), or None.

    The storage and properties are opened in place: the tracker's later seals, merges and deletions
    write there, as a broker's would.
    """
    m = read_manifest(path)
    if m.delayed is None:
        return None
    storage = FileBucketSnapshotStorage(m.root / m.delayed["storage"])
    props = FileCursorProperties(m.root / m.delayed["properties"])
    settings.setdefault("topic", m.delayed["topic"])
    settings.setdefault("cursor", m.delayed["cursor"])
    return BucketDelayedDeliveryTracker.recover(storage=storage, cursor_properties=props, **settings)
