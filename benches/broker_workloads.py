"""The reference broker's benches' workloads: client processes, the broker's CPU, its profile, restarts.

The broker runs as its own process (``broker_process.BrokerProcess``, or a peer's broker as another
``Target``), the producer and the consumers each in another (``broker_client.py``), so each figure
says whose CPU it is: the broker's is read from ``/proc/<pid>/stat`` (utime + stime) around the
run, the clients' from their own ``os.times()``.
"""

from __future__ import annotations

import json
import os
import pstats
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from broker_process import BrokerProcess

CLIENT = Path(__file__).with_name("broker_client.py")
PROFILER = Path(__file__).with_name("broker_profiler.py")


class Target(Protocol):
    """Which broker a bench drives: cursorkit's ``BrokerProcess`` or a peer's broker process."""

    url: str
    port: int
    proc: subprocess.Popen[str] | None

    def start(self, timeout: float = ...) -> float:
        """Starts the broker; returns once it serves ``url``."""

    def stop(self) -> None:
        """Stops it cleanly."""

    def kill(self) -> None:
        """SIGKILL."""


def broker_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, every thread included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` now, in MiB (``VmRSS`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@dataclass(frozen=True, slots=True)
class Flow:
    """One produce-and-consume run: its rate and each process's CPU per message."""

    messages: int
    seconds: float
    broker_us: float
    producer_us: float
    consumer_us: float
    duplicates: int = 0
    """Messages received more than once (counted with ``unique=True`` only)."""
    p50_ms: float | None = None
    """End-to-end latency percentiles of a paced run (``rate`` > 0)."""
    p99_ms: float | None = None
    nacked: int = 0
    """Messages the consumers nacked once (``nack`` > 0); each came back and was acked."""

    @property
    def rate(self) -> float:
        """Messages per second, from ``go`` to the last message received."""
        return self.messages / self.seconds


class Stalled(Exception):
    """The consumers got no message for ``idle`` seconds before the last one."""

    def __init__(self, received: int, messages: int, idle: float, seconds: float) -> None:
        super().__init__(f"{received:,} of {messages:,} received, then none for {idle:g} s")
        self.received = received
        self.messages = messages
        self.seconds = seconds


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

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=20)


def flow(
    broker: Target,
    topic: str,
    messages: int,
    *,
    batching: bool,
    sub_type: str = "Shared",
    consumers: int = 1,
    keys: int = 0,
    around: Callable[[], None] | None = None,
    idle: float = 0.0,
    unique: bool = False,
    rate: float = 0.0,
    delay_ms: float = 0.0,
    pending: int = 10_000,
    nack: int = 0,
    nack_delay_ms: int = 10,
) -> Flow:
    """Produces ``messages`` 100-byte messages while one subscription consumes and acks them.

    The consumers subscribe first; producer and consumers start together on ``go``. ``around`` is
    called just before ``go`` and just after the last message (the profiler's window). ``idle`` > 0
    raises :class:`Stalled` once no message came for that long (the producer is killed);
    ``unique`` counts distinct message ids (the rest are ``duplicates``); ``rate`` > 0 paces the
    producer and measures the latency of each message (the first 5% left out as warm-up);
    ``delay_ms`` > 0 sends each message with that deliver-after delay; ``pending`` bounds the
    producer's queue (the messages sent and not yet acknowledged by the broker); ``nack`` > 0 has
    the consumers nack every ``nack``-th first delivery once (redelivered after ``nack_delay_ms``)
    and ack it back.
    """
    assert broker.proc is not None
    options = [f"idle={idle}"] if idle else []
    options += ["unique=1"] if unique else []
    options += [f"latency={messages // 20}"] if rate else []
    options += [f"nack={nack}", f"nack_delay={nack_delay_ms}"] if nack else []
    consumer = _Child("consume", broker.url, topic, messages, sub_type, consumers, *options)
    extra = [f"delay={delay_ms}"] if delay_ms else []
    extra += [f"pending={pending}"] if pending != 10_000 else []
    producer = _Child("produce", broker.url, topic, messages, int(batching), keys, rate, *extra)
    if around is not None:
        around()
    before = broker_cpu(broker.proc.pid)
    consumer.go()
    producer.go()
    got = consumer.result()
    after = broker_cpu(broker.proc.pid)
    if around is not None:
        around()
    if got.get("stalled"):
        producer.kill()
        raise Stalled(got.get("unique", got["received"]), messages, idle, got["seconds"])
    sent = producer.result()
    assert got.get("unique", got["received"]) == messages, got
    assert got.get("nacked", 0) == got.get("redelivered", 0), got
    return Flow(
        messages=messages,
        seconds=got["seconds"],
        broker_us=(after - before) / messages * 1e6,
        producer_us=sent["cpu"] / messages * 1e6,
        consumer_us=got["cpu"] / messages * 1e6,
        duplicates=got["received"] - got.get("unique", got["received"]),
        p50_ms=got["p50_us"] / 1e3 if rate else None,
        p99_ms=got["p99_us"] / 1e3 if rate else None,
        nacked=got.get("nacked", 0),
    )


@contextmanager
def running(target: Target) -> Iterator[Target]:
    """The broker started for the block; stopped after it (killed if stopping hangs)."""
    target.start()
    try:
        yield target
    finally:
        try:
            target.stop()
        except subprocess.TimeoutExpired:
            target.kill()


def start_to_accepting(target: Target, timeout: float = 30.0) -> float:
    """Starts the stopped broker; seconds from then until a TCP connection to it is accepted."""
    started = time.monotonic()
    target.start(timeout=timeout)
    socket.create_connection(("127.0.0.1", target.port), timeout=5).close()
    return time.monotonic() - started


@contextmanager
def cpu_burner() -> Iterator[None]:
    """A process spinning on this machine's first CPU for the block (a load beside the one measured)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(proc.pid, {min(os.sched_getaffinity(0))})
        yield
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def broker(data: Path, *, profile: Path | None = None) -> Iterator[BrokerProcess]:
    """A broker process for the block (under ``broker_profiler.py`` writing ``profile`` if given)."""
    process = BrokerProcess(data, interpreter_args=(str(PROFILER), str(profile)) if profile else ())
    with running(process):
        yield process


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


def retain(broker: Target, topic: str, messages: int) -> None:
    """Subscribes ``bench`` (durable; its consumer then leaves) and produces ``messages`` it keeps."""
    import pulsar

    client = pulsar.Client(
        broker.url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        client.subscribe(topic, "bench", consumer_type=pulsar.ConsumerType.Shared).close()
    finally:
        client.close()
    producer = _Child("produce", broker.url, topic, messages, 0, 0)
    producer.go()
    producer.result()


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
