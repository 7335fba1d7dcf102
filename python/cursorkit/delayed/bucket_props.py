"""``BucketProperties``: the cursor properties a tracker records its snapshots in, changed atomically."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping


class BucketProperties:
    """The caller's cursor properties, with an atomic multi-key change where the store offers one."""

    def __init__(self, store: MutableMapping[str, str]) -> None:
        self.store = store

    def apply(self, set_items: Mapping[str, str], delete_keys: Iterable[str] = ()) -> None:
        """Sets ``set_items`` and deletes ``delete_keys``, in one change when the store has ``apply``."""
        apply = getattr(self.store, "apply", None)
        if callable(apply):
            apply(dict(set_items), list(delete_keys))
            return
        for k, v in set_items.items():
            self.store[k] = v
        for k in delete_keys:
            self.store.pop(k, None)

    def drop_if(self, key: str, value: str) -> None:
        """Deletes ``key`` only while it still names ``value`` (a newer bucket may own the key)."""
        if self.store.get(key) == value:
            self.apply({}, [key])
