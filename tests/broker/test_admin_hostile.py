"""Hostile HTTP clients on the admin port: each cost bounded, the binary port and the loop never wait.

Each test runs an in-process broker with its admin server (small limits, so deadlines pass fast),
attacks the admin port with raw sockets or a real HTTP client, and meanwhile the official Pulsar
client produces and consumes on the binary port within a second. No attack leaves an error in
the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import resource
import select
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cursorkit.broker.server.config import BrokerConfig
from in_process_broker import InProcess

pytest.importorskip("aiohttp")
pulsar = pytest.importorskip("pulsar")

from aiohttp import web  # noqa: E402

from cursorkit.broker.server.admin.bodies import read_json  # noqa: E402
from cursorkit.broker.server.admin.http_server import AdminServer, HttpLimits  # noqa: E402

FAST = HttpLimits(
    header_timeout_s=0.5,
    keep_alive_s=1.5,
    body_timeout_s=0.5,
    linger_s=0.3,
    send_timeout_s=0.8,
    max_body=64 * 1024,
)
"""Small deadlines, so a test sees each one pass within a second or two."""


# --- the broker, its admin server with three test routes, and a Pulsar client beside them -------


async def _echo_json(request: web.Request) -> web.Response:
    return web.json_response({"body": await read_json(request)})


async def _boom(request: web.Request) -> web.Response:
    raise RuntimeError("a fault of the handler's")


async def _big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * (32 << 20))


async def _serve(inproc: InProcess, limits: HttpLimits) -> AdminServer:
    server = AdminServer(inproc.broker, limits)
    server.app.router.add_put("/test/json", _echo_json)
    server.app.router.add_get("/test/boom", _boom)
    server.app.router.add_get("/test/big", _big)
    await server.start("127.0.0.1", 0)
    return server


class Served:
    """An in-process broker, its admin server and a Pulsar producer and consumer on its binary port."""

    def __init__(self, tmp: Path, limits: HttpLimits, *, test_routes: bool = True) -> None:
        config = BrokerConfig(data=tmp / "data", port=0, sync=False)
        if test_routes:
            self.inproc = InProcess(config)
            self.admin: AdminServer = self.inproc.call(_serve(self.inproc, limits))
        else:  # the helper's own admin server
            self.inproc = InProcess(config, admin=limits)
            assert self.inproc.admin is not None
            self.admin = self.inproc.admin
        self.port = self.admin.port
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = pulsar.Client(
            self.inproc.url,
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        topic = "persistent://public/default/beside-the-admin-port"
        self.consumer = self.client.subscribe(topic, "s")
        self.producer = self.client.create_producer(topic)
        self.sent = 0

    def round_trip(self) -> float:
        """Seconds to produce one message and consume it on the binary port."""
        start = time.monotonic()
        self.sent += 1
        self.producer.send(str(self.sent).encode())
        msg = self.consumer.receive(timeout_millis=5000)
        self.consumer.acknowledge(msg)
        assert msg.data() == str(self.sent).encode()
        return time.monotonic() - start

    def open_connections(self) -> int:
        async def read() -> int:
            assert self.admin.gate is not None
            return self.admin.gate.open

        return int(self.inproc.call(read()))

    def connection_tasks(self) -> int:
        """Tasks of aiohttp serving connections (one each, until it ends)."""

        async def read() -> int:
            return sum("RequestHandler.start" in repr(t.get_coro()) for t in asyncio.all_tasks())

        return int(self.inproc.call(read()))

    def close(self) -> None:
        self.client.close()
        if self.inproc.admin is None:
            self.inproc.call(self.admin.stop())
        self.inproc.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path, FAST)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def quiet_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Fails the test if anything logged an error or a traceback (warnings of limits are fine)."""
    caplog.set_level(logging.WARNING)
    yield caplog
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]


# --- raw HTTP ----------------------------------------------------------------------------------


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read_until_closed(s: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """What arrives until the server closes (True) or ``timeout`` passes (False)."""
    data = b""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _status_and_reason(data: bytes) -> tuple[int, str]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    reason = json.loads(body)["reason"]
    assert isinstance(reason, str) and reason
    return status, reason


def _closed_within(s: socket.socket, timeout: float) -> float | None:
    """Seconds until the server closes the connection (None: still open after ``timeout``)."""
    start = time.monotonic()
    _, closed = _read_until_closed(s, timeout)
    return time.monotonic() - start if closed else None


def _answer(s: socket.socket) -> bytes:
    """One JSON answer on a kept-alive connection (the connection closing first fails the test)."""
    s.settimeout(5)
    data = b""
    while not data.endswith(b"}"):
        chunk = s.recv(4096)
        assert chunk, f"closed before its answer: {data!r}"
        data += chunk
    return data


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - a test server on 127.0.0.1
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _put(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, method="PUT")  # noqa: S310
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:  # noqa: S310
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# --- malformed requests -----------------------------------------------------------------------

_LONG = b"a" * (FAST.max_line_size + 10)
MALFORMED = {
    "garbage": b"\x00\xff\xfe garbage \x01\x02\r\n\r\n",
    "tls hello": bytes.fromhex("16030100a5010000a10303") + bytes(range(64)),
    "http2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "bad version": b"GET / HTTP/7.1\r\nHost: x\r\n\r\n",
    # No line end: refused as soon as the limit is passed, not when the line ends.
    "request line over max_line_size": b"GET /" + _LONG,
    "header over max_field_size": b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + _LONG,
    "too many headers": b"GET / HTTP/1.1\r\n"
    + b"".join(b"X-H%d: v\r\n" % i for i in range(FAST.max_headers + 1))
    + b"\r\n",
    "nul in a header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "negative length": b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    "two lengths": b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "length and chunked": b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "bad chunk size": b"PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_request_gets_a_json_400_and_its_connection_closes(
    served: Served, quiet_log: pytest.LogCaptureFixture, name: str
) -> None:
    with _connect(served.port) as s:
        s.sendall(MALFORMED[name])
        data, closed = _read_until_closed(s, 2.0)
    assert closed, name
    status, _ = _status_and_reason(data)
    assert status == 400, (name, data[:200])
    assert served.round_trip() < 1.0
    assert _get(f"{served.url}/admin/v2/no/such/path")[0] == 404


def test_random_bytes_never_hang_crash_or_log_an_error(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(47)
    statuses = set()
    for i in range(150):
        junk = rng.randbytes(rng.randrange(1, 300))
        if i % 3 == 0:  # a plausible start, then junk
            junk = b"GET /admin/v2/" + junk
        with _connect(served.port) as s:
            s.sendall(junk + b"\r\n\r\n")
            data, closed = _read_until_closed(s, 2.0)
        assert closed, junk  # answered and closed, or closed at the head deadline
        if data:
            statuses.add(_status_and_reason(data)[0])
    assert statuses <= {400, 404}, statuses
    assert served.round_trip() < 1.0
    assert _get(f"{served.url}/admin/v2/no/such/path")[0] == 404


# --- bodies -----------------------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    for path in ("/test/json", "/admin/v2/persistent/public/default/t", "/no/such/path"):
        with _connect(served.port) as s:  # the head alone: the 413 does not wait for the body
            s.sendall(b"PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" % path.encode())
            data, closed = _read_until_closed(s, 2.0)
        assert closed
        status, reason = _status_and_reason(data)
        assert status == 413 and "65536" in reason, (path, reason)
    status, body = _put(f"{served.url}/test/json", b"[" + b"1," * 40_000 + b"1]")  # a real client
    assert status == 413 and "reason" in body
    assert served.round_trip() < 1.0


def test_a_chunked_body_is_refused_once_it_grows_past_the_limit(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    with _connect(served.port) as s:
        s.sendall(b"PUT /test/json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"1," * 2048
        for _ in range(FAST.max_body // len(chunk) + 2):  # past the limit, never the final chunk
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        data, _ = _read_until_closed(s, 1.0)
        assert _status_and_reason(data)[0] == 413
        # Streaming on after the refusal: discarded for linger_s, then the connection closes,
        # and the binary port serves meanwhile.
        stop = threading.Event()

        def flood() -> None:
            with contextlib.suppress(OSError):
                while not stop.is_set():
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))

        thread = threading.Thread(target=flood)
        thread.start()
        try:
            assert served.round_trip() < 1.0
            thread.join(FAST.linger_s + 2.0)
            assert not thread.is_alive()  # the server closed: sending failed
        finally:
            stop.set()
            thread.join()


def test_a_body_discarded_past_the_head_deadline_ends_with_its_connection(
    tmp_path: Path, quiet_log: pytest.LogCaptureFixture
) -> None:
    """An unread body is discarded (lingering); a closed connection leaves no task behind."""
    served = Served(tmp_path, replace(FAST, linger_s=3.0))
    try:
        with _connect(served.port) as s:
            s.sendall(b"PUT /no/such/path HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            start = time.monotonic()
            with contextlib.suppress(OSError):  # the server closes at the head deadline
                while time.monotonic() - start < 2.0:
                    s.sendall(b"10\r\n0123456789abcdef\r\n")
                    time.sleep(0.01)
            assert time.monotonic() - start < 1.25
        time.sleep(0.2)
        assert served.open_connections() == 0
        assert served.connection_tasks() == 0  # not discarding on for linger_s
    finally:
        served.close()


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{not json", 400),
        (b"\xff\xfe\xfa", 400),
        (b"[" * 60_000, 400),  # too deep for the decoder: refused, not a crash
        (b'{"a": [1, 2]}', 200),
        (b"", 200),
    ],
)
def test_read_json_answers_malformed_json_with_a_400_reason(
    served: Served, quiet_log: pytest.LogCaptureFixture, body: bytes, status: int
) -> None:
    got, answer = _put(f"{served.url}/test/json", body)
    assert got == status, answer
    if status == 200:
        assert answer == {"body": json.loads(body) if body else None}
    else:
        assert isinstance(answer["reason"], str)


def test_a_body_that_does_not_arrive_gets_a_408(served: Served, quiet_log: pytest.LogCaptureFixture) -> None:
    with _connect(served.port) as s:
        s.sendall(b"PUT /test/json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n[1,")
        start = time.monotonic()
        data, closed = _read_until_closed(s, 3.0)
    assert _status_and_reason(data)[0] == 408
    assert closed and time.monotonic() - start < FAST.body_timeout_s + FAST.linger_s + 1.0


# --- slow and silent clients ------------------------------------------------------------------


def test_a_head_sent_a_byte_at_a_time_is_cut_off_at_the_head_deadline(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    head = b"GET /admin/v2/persistent/public/default HTTP/1.1\r\nHost: x\r\n\r\n"
    with _connect(served.port) as s:
        start = time.monotonic()
        for byte in head:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                break
            if select.select([s], [], [], 0.05)[0]:  # the server closed
                break
        elapsed = time.monotonic() - start
        data, closed = _read_until_closed(s, 1.0)
    assert closed and data == b""
    assert FAST.header_timeout_s - 0.1 < elapsed < 1.25  # aiohttp alone: at keep_alive_s (1.5)
    assert served.round_trip() < 1.0


def test_a_silent_connection_is_closed_at_the_head_deadline(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    with _connect(served.port) as s:
        closed_after = _closed_within(s, 3.0)
    assert closed_after is not None
    assert FAST.header_timeout_s - 0.1 < closed_after < 1.25  # aiohttp alone: at keep_alive_s
    assert served.open_connections() == 0


def test_a_kept_alive_connection_idles_until_keep_alive_but_a_started_head_has_the_head_deadline(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    request = b"GET /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n"

    def ask(s: socket.socket) -> int:
        s.sendall(request)
        return _status_and_reason(_answer(s))[0]

    with _connect(served.port) as s:
        assert ask(s) == 404
        time.sleep(FAST.header_timeout_s + 0.3)  # idle past the head deadline, within keep-alive
        assert ask(s) == 404
        closed_after = _closed_within(s, 3.0)  # idle: closed at keep_alive_s
    assert closed_after is not None
    assert FAST.keep_alive_s - 0.2 < closed_after < FAST.keep_alive_s + 0.7

    with _connect(served.port) as s:
        assert ask(s) == 404
        s.sendall(request[:5])  # a second head started, never finished
        closed_after = _closed_within(s, 3.0)
    assert closed_after is not None
    assert closed_after < 1.25  # the head deadline, not keep-alive's 1.5 s


def test_a_client_that_does_not_take_its_response_is_dropped(
    served: Served, quiet_log: pytest.LogCaptureFixture
) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        s.connect(("127.0.0.1", served.port))
        s.sendall(b"GET /test/big HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)
        assert served.open_connections() == 1
        assert served.round_trip() < 1.0
        deadline = time.monotonic() + FAST.send_timeout_s + 1.5
        while served.open_connections() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.open_connections() == 0
    finally:
        s.close()


# --- many connections -------------------------------------------------------------------------


def _refused_at_once(
    sockets: list[socket.socket], want: int
) -> tuple[list[socket.socket], list[socket.socket]]:
    """The sockets answered 503 and closed (up to ``want`` of them, within 2 s) and the others."""
    refused = []
    with selectors.DefaultSelector() as sel:  # epoll: select() stops at descriptor 1024
        for s in sockets:
            sel.register(s, selectors.EVENT_READ)
        deadline = time.monotonic() + 2.0
        while len(refused) < want and time.monotonic() < deadline:
            for key, _ in sel.select(0.2):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                data, closed = _read_until_closed(s, 0.5)
                assert closed and _status_and_reason(data)[0] == 503
                sel.unregister(s)
                refused.append(s)
    return refused, [s for s in sockets if s not in refused]


def test_a_thousand_idle_connections(tmp_path: Path, quiet_log: pytest.LogCaptureFixture) -> None:
    """512 served (the default limit), the rest refused at once; idle ones closed at keep-alive."""
    limits = HttpLimits(keep_alive_s=1.0)  # the head deadline: 10 s
    served = Served(tmp_path, limits, test_routes=False)
    sockets: list[socket.socket] = []
    try:
        start = time.monotonic()
        sockets.extend(_connect(served.port) for _ in range(1000))
        opened_in = time.monotonic() - start
        refused, live = _refused_at_once(sockets, 1000 - limits.max_connections)
        for s in refused:
            s.close()
        assert len(refused) == 1000 - limits.max_connections == 488, opened_in
        assert served.open_connections() == limits.max_connections

        assert served.round_trip() < 1.0  # the binary port serves meanwhile
        status, body = _get(f"{served.url}/admin/v2/no/such/path")  # at the limit: refused
        assert status == 503 and "admin connections (512)" in body["reason"]
        for s in live[:5]:
            s.close()
        time.sleep(0.1)
        status, body = _get(f"{served.url}/admin/v2/no/such/path")  # below it: served
        assert status == 404
        live = live[5:]

        for s in live:  # each asks once, then idles on its kept-alive connection
            s.sendall(b"GET /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in live:
            assert _answer(s).startswith(b"HTTP/1.1 404")
        start = time.monotonic()
        while served.open_connections() and time.monotonic() - start < limits.keep_alive_s + 2:
            assert served.round_trip() < 1.0
            time.sleep(0.1)
        assert served.open_connections() == 0
        assert all(_closed_within(s, 0.5) is not None for s in live)
    finally:
        for s in sockets:
            s.close()
        served.close()


def test_admin_connections_stop_short_of_the_binary_ports_descriptor_share(
    tmp_path: Path, quiet_log: pytest.LogCaptureFixture
) -> None:
    served = Served(tmp_path, replace(FAST, header_timeout_s=5.0), test_routes=False)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    sockets: list[socket.socket] = []
    try:
        in_use = served.inproc.broker.descriptors.in_use()
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 400, hard))
        refused: list[socket.socket] = []
        with selectors.DefaultSelector() as sel:
            while not refused and len(sockets) < 300:  # each costs two descriptors here
                for _ in range(10):
                    sockets.append(_connect(served.port))
                    sel.register(sockets[-1], selectors.EVENT_READ)
                refused = [key.fileobj for key, _ in sel.select(0.05)]  # type: ignore[misc]
        assert refused, len(sockets)
        for s in refused:
            data, closed = _read_until_closed(s, 1.0)
            status, reason = _status_and_reason(data)
            assert closed and status == 503 and "file descriptors" in reason
        assert served.open_connections() < len(sockets) < FAST.max_connections
        # The binary port still has room: a new client connects and produces.
        assert not served.inproc.broker.descriptors.short(0.95)
        other = pulsar.Client(served.inproc.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            producer = other.create_producer("persistent://public/default/room-left")
            producer.send(b"x")
        finally:
            other.close()
        assert served.round_trip() < 1.0
    finally:
        for s in sockets:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        served.close()


# --- faults of a handler ----------------------------------------------------------------------


def test_a_handler_that_raises_gets_a_json_500_logged_once(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    status, body = _get(f"{served.url}/test/boom")
    assert status == 500 and "logged" in body["reason"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert "a fault of the handler's" in str(errors[0].exc_info[1])
    assert _get(f"{served.url}/no/such/path")[0] == 404
    assert served.round_trip() < 1.0
