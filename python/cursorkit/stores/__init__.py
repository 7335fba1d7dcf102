"""Shared stores: where state lives when more than one broker can own it (ZooKeeper, object storage)."""

from __future__ import annotations

from cursorkit.stores.location import (
    ZkLocation,
    cursor_znode_path,
    is_zk_location,
    java_url_encode,
    managed_ledger_path,
    parse_zk_location,
)
from cursorkit.stores.objects import ObjectInfo, ObjectStore, s3_filesystem
from cursorkit.stores.zookeeper import ZkSession

__all__ = [
    "ObjectInfo",
    "ObjectStore",
    "ZkLocation",
    "ZkSession",
    "cursor_znode_path",
    "is_zk_location",
    "java_url_encode",
    "managed_ledger_path",
    "parse_zk_location",
    "s3_filesystem",
]
