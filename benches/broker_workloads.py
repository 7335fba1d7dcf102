"""The reference broker's benches' workloads: client processes, the broker's CPU, its profile, restarts.

The broker runs as its own process (``broker_process.BrokerProcess``), the producer and the
consumers each in another (``broker_client.py``), so each figure says whose CPU it is: the broker's
is read from ``/proc/<pid>/stat`` (utime + stime) around the run, the clients' from their own
``os.times()``.
"""

from __future__ import annotations

import json
import os
import pstats
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_process import BrokerProcess

CLIENT = Path(__file__).with_name("broker_client.py")
PROFILER = Path(__file__).with_name("broker_profiler.py")


def broker_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, every thread included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Flow:
    """One produce-and-consume run: its rate and each process's CPU per message."""

    messages: int
    seconds: float
    broker_us: float
    producer_us: float
    consumer_us: float

    @property
    def rate(self) -> float:
        """Messages per second, from ``go`` to the last message received."""
        return self.messages / self.seconds


class _Child:
    """A client process between its ``ready`` and its JSON line."""

    def __init__(self, *args: object) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CLIENT), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            raise RuntimeError(f"client {args[0]} did not start: {line!r}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.proc.wait(timeout=60)
        if not line:
            raise RuntimeError(f"client exited {self.proc.returncode} without a result")
        out: dict[str, Any] = json.loads(line)
        return out


def flow(
    broker: BrokerProcess,
    topic: str,
    messages: int,
    *,
    batching: bool,
    sub_type: str = "Shared",
    consumers: int = 1,
    keys: int = 0,
    around: Callable[[], None] | None = None,
) -> Flow:
    """Produces ``messages`` 100-byte messages while one subscription consumes and acks them.

    The consumers subscribe first; producer and consumers start together on ``go``. ``around`` is
    called just before ``go`` and just after the last message (the profiler's window).
    """
    assert broker.proc is not None
    consumer = _Child("consume", broker.url, topic, messages, sub_type, consumers)
    producer = _Child("produce", broker.url, topic, messages, int(batching), keys)
    if around is not None:
        around()
    before = broker_cpu(broker.proc.pid)
    consumer.go()
    producer.go()
    got = consumer.result()
    after = broker_cpu(broker.proc.pid)
    if around is not None:
        around()
    sent = producer.result()
    assert got["received"] == messages, got
    return Flow(
        messages=messages,
        seconds=got["seconds"],
        broker_us=(after - before) / messages * 1e6,
        producer_us=sent["cpu"] / messages * 1e6,
        consumer_us=got["cpu"] / messages * 1e6,
    )


@contextmanager
def broker(data: Path, *, profile: Path | None = None) -> Iterator[BrokerProcess]:
    """A broker process for the block (under ``broker_profiler.py`` writing ``profile`` if given)."""
    process = BrokerProcess(data, interpreter_args=(str(PROFILER), str(profile)) if profile else ())
    process.start()
    try:
        yield process
    finally:
        try:
            process.stop()
        except subprocess.TimeoutExpired:
            process.kill()


def profile_window(process: BrokerProcess, out: Path) -> Callable[[], None]:
    """Starts the profiler on the first call, stops it and waits for its dump on the second."""
    calls = [0]

    def toggle() -> None:
        assert process.proc is not None
        calls[0] += 1
        process.proc.send_signal(signal.SIGUSR1 if calls[0] == 1 else signal.SIGUSR2)
        if calls[0] == 2:
            deadline = time.monotonic() + 30
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # the dump is one write; let it finish

    return toggle


# -- restart --------------------------------------------------------------------------------------


def build_holes(process: BrokerProcess, topic: str, messages: int, every: int) -> int:
    """Produces ``messages`` unbatched messages and acks every ``every``-th; returns the acks sent."""
    child = _Child("hole", process.url, topic, messages, every)
    child.go()
    result = child.result()
    return int(result["acked"])


def restart_to_first_message(process: BrokerProcess, topic: str) -> tuple[float, float]:
    """Starts the stopped broker; returns (seconds to its ready line, seconds to a first message).

    The consumer is this process's (the client library imported beforehand), so the figure is the
    broker's start, recovery and first dispatch, plus one connect and subscribe.
    """
    import pulsar

    started = time.perf_counter()
    process.start(timeout=60)
    ready = time.perf_counter() - started
    client = pulsar.Client(
        process.url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        consumer = client.subscribe(topic, "bench", consumer_type=pulsar.ConsumerType.Shared)
        msg = consumer.receive(timeout_millis=60_000)
        first = time.perf_counter() - started
        assert msg.message_id().entry_id() == 0, msg.message_id()  # the first entry is a hole
    finally:
        client.close()
    return ready, first


def cursor_holes(data: Path, topic: str) -> int:
    """The ack holes the stopped broker's cursor of ``topic``'s subscription ``bench`` holds."""
    from cursorkit import CursorStore

    directory = data / "topics" / "public" / "default" / topic / "subscriptions" / b"bench".hex() / "cursor"
    store = CursorStore.open(directory)
    try:
        return int(store.recover().stats().non_contiguous_deleted_ranges)
    finally:
        store.close()


# -- profile --------------------------------------------------------------------------------------

CURSORKIT = "cursorkit calls (ackstate, delayed, keyshared, shared, their _core classes)"
LOG = "message log (broker/log, its records in _core)"
SERVER = "broker server (broker/server)"
PROTOCOL = "protocol (broker/protocol, its framing in _core, protobuf)"
OTHER = "asyncio, sockets, the rest"
CATEGORIES = (CURSORKIT, LOG, SERVER, PROTOCOL, OTHER)
LEAVES = (CURSORKIT, LOG, PROTOCOL)
"""The parts the server calls into: their inclusive time is the broker's time spent in them."""

Func = tuple[str, int, str]

_CORE_PROTOCOL = ("FrameScanner", "message_frames", "send_receipts", "entry_fields")
_CORE_LOG = ("encode_records", "decode_records")
"""The broker's own byte work in ``cursorkit._core``: counted with its part, not as cursorkit's calls."""


def category(func: Func) -> str:
    """Which part of the broker a profiled function belongs to."""
    path, _, name = func
    path = path.replace(os.sep, "/")
    if path == "~":
        if "cursorkit._core" in name:
            if any(f in name for f in _CORE_PROTOCOL):
                return PROTOCOL
            if any(f in name for f in _CORE_LOG):
                return LOG
            return CURSORKIT
        if "google._upb" in name or "crc32c" in name:
            return PROTOCOL
        return OTHER
    for part in ("ackstate", "delayed", "keyshared", "shared"):
        if f"/cursorkit/{part}/" in path:
            return CURSORKIT
    if "/cursorkit/broker/log/" in path:
        return LOG
    if "/cursorkit/broker/server/" in path:
        return SERVER
    if "/cursorkit/broker/protocol/" in path or "/cursorkit/proto/" in path or "/google/protobuf/" in path:
        return PROTOCOL
    return OTHER


@dataclass(frozen=True, slots=True)
class Profile:
    """Shares of the profiled CPU: by each part's own time, and inclusive (its callees counted)."""

    total: float
    own: dict[str, float]
    inclusive: dict[str, float]
    top: list[tuple[str, int, float, float]]
    """The top functions by own time: name, calls, own seconds, cumulative seconds."""


def read_profile(path: Path, top: int = 15) -> Profile:
    """The shares of each category and the ``top`` functions of a cProfile dump."""
    stats: dict[Func, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    total = sum(s[2] for s in stats.values())
    own = dict.fromkeys(CATEGORIES, 0.0)
    inclusive = dict.fromkeys(CATEGORIES, 0.0)
    for func, (_, _, tt, _, callers) in stats.items():
        kind = category(func)
        own[kind] += tt
        # Entered from another part: that edge's cumulative time is this part's, callees included.
        inclusive[kind] += sum(edge[3] for caller, edge in callers.items() if category(caller) != kind)
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    rows = [(pstats.func_std_string(f), s[1], s[2], s[3]) for f, s in ranked]
    return Profile(
        total=total,
        own={k: v / total for k, v in own.items()},
        inclusive={k: v / total for k, v in inclusive.items()},
        top=rows,
    )


def render_profile(profile: Profile, run: str) -> str:
    """The profile as Markdown: each part's share, then the top functions."""
    lines = [
        f"#### Broker CPU profile: {run} (cProfile on CPU time, {profile.total:.2f} s profiled)",
        "",
        "| part | own time | inclusive (callees counted) |",
        "|---|---|---|",
    ]
    for k in CATEGORIES:  # the server calls all the others: only the others' inclusive shares say much
        inclusive = f"{profile.inclusive[k]:.0%}" if k in LEAVES else ""
        lines.append(f"| {k} | {profile.own[k]:.0%} | {inclusive} |")
    lines += ["", "| function | calls | own s | cum s |"]
    lines.append("|---|---|---|---|")
    lines += [f"| `{name}` | {calls:,} | {tt:.3f} | {ct:.3f} |" for name, calls, tt, ct in profile.top]
    return "\n".join(lines)
