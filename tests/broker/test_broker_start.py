"""What ``cursorkit broker`` does before it listens: imports kept light, the data directory listed later.

A broker accepts connections without first importing numpy, the topics' modules (logs, cursors,
delayed trackers, dispatchers) or any extra; those load off the loop once it listens, and what
needs them waits for them. No timing here: the benches measure start to accepting.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from cursorkit.broker.server.names import topic_name
from cursorkit.broker.server.namespace_topics import NamespaceTopics
from cursorkit.broker.server.paths import topic_directory

HEAVY = (
    "numpy",
    "pyarrow",
    "pyspark",
    "py4j",
    "kazoo",
    "boto3",
    "botocore",
    "aiohttp",
    "prometheus_client",
    "rich",
    "cursorkit.ackstate.cursor",
    "cursorkit.ackstate.store",
    "cursorkit.delayed",
    "cursorkit.keyshared",
    "cursorkit.shared",
    "cursorkit.pipeline.display",
    "cursorkit.broker.log",
    "cursorkit.broker.server.topic",
    "cursorkit.broker.server.subscription",
    "cursorkit.broker.server.dispatch",
)
"""Modules (and their submodules) the broker must not have imported when it starts listening."""

_AT_LISTEN = """
import asyncio, json, os, sys

async def listening(*args, **kwargs):
    print(json.dumps(sorted(sys.modules)), flush=True)  # what the start imported, then stop there
    os._exit(0)

asyncio.start_server = listening
from cursorkit.cli import main
sys.exit(main())
"""
"""``python -c``: ``cursorkit broker`` with its arguments, printing ``sys.modules`` as it starts listening."""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def _modules_at_listen(data: Path) -> list[str]:
    cmd = [sys.executable, "-c", _AT_LISTEN, "broker", "--data", str(data), "--port", "0"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    modules: list[str] = json.loads(run.stdout.splitlines()[0])
    return modules


def test_the_broker_listens_before_importing_numpy_or_the_topics_modules(tmp_path: Path) -> None:
    modules = _modules_at_listen(tmp_path / "data")
    assert "cursorkit.broker.server.broker" in modules  # the spy ran where the broker listens
    assert _heavy(modules) == []


def test_a_broker_with_topics_on_disk_listens_before_importing_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic_directory(data / "topics", topic_name("on-disk").segments, sync=False)
    assert _heavy(_modules_at_listen(data)) == []


_LAZY_NAMES = """
import sys
import cursorkit, cursorkit.ackstate
assert "numpy" not in sys.modules, "import cursorkit imported numpy"
from cursorkit import Cursor, CursorStore, NonDurableCursor, PersistLimits
from cursorkit.ackstate import flush_many, FileCursorStore, RedeliveryCounts
from cursorkit.ackstate.non_durable import EARLIEST, LATEST, start_of
from cursorkit.ackstate.starts import start_of as light_start_of
assert start_of is light_start_of and EARLIEST == "earliest" and LATEST == "latest"
assert Cursor is cursorkit.ackstate.cursor.Cursor and cursorkit.Cursor is Cursor
assert issubclass(NonDurableCursor, Cursor)
for package in (cursorkit, cursorkit.ackstate):
    missing = [n for n in package.__all__ if not hasattr(package, n)]
    assert not missing, (package.__name__, missing)
    assert set(package.__all__) <= set(dir(package))
for sub in ("ackstate", "fsio", "proto", "stores"):  # what `import cursorkit` used to bring along
    assert getattr(cursorkit, sub).__name__ == "cursorkit." + sub
try:
    cursorkit.no_such_name
except AttributeError:
    pass
else:
    raise AssertionError("an unknown name resolved")
"""


def test_the_packages_ack_state_names_load_on_first_use() -> None:
    run = subprocess.run([sys.executable, "-c", _LAZY_NAMES], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr


def test_a_topic_list_asked_for_as_the_broker_starts_holds_the_topics_on_disk(tmp_path: Path) -> None:
    """The listing runs while the broker already listens: an answer waits for it, never misses a topic."""
    topics = tmp_path / "topics"
    topic_directory(topics, topic_name("on-disk").segments, sync=False)

    async def first_answer() -> list[str]:
        known = NamespaceTopics(topics)
        known.start_loading()  # asked at once, before the listing has even begun
        answer = await known.answer(
            ("public", "default"), persistent=True, pattern=None, client_hash=None, max_bytes=1 << 20
        )
        return answer.topics

    assert asyncio.run(first_answer()) == ["persistent://public/default/on-disk"]
