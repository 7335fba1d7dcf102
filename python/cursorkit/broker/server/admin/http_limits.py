"""What one HTTP client may cost the admin server, each limit with its default and what happens past it.

=====================  =========  ===============================================================
limit                  default    past it
=====================  =========  ===============================================================
``max_connections``    512        a new connection gets a 503 ``{"reason"}`` and is closed at once
``descriptor_share``   0.9        past this share of the descriptor limit the same (the binary
                                  port refuses only past 0.95: admin clients never starve it)
``header_timeout_s``   10 s       a request head not complete this long after the connection
                                  opened (or after its first byte, on a kept-alive connection):
                                  the connection is closed (slowloris, silent clients)
``keep_alive_s``       15 s       an idle kept-alive connection is closed
``max_line_size``      8190 B     a longer request line: 400 ``{"reason"}``, connection closed
``max_field_size``     8190 B     a longer header (name and value): the same
``max_headers``        32         more headers: the same (a head holds at most ~270 KiB)
``max_body``           64 KiB     a longer ``Content-Length``: 413 without reading the body; a
                                  chunked body growing past it: 413 once it does
``body_timeout_s``     10 s       a body :func:`~.bodies.read_json` has not received by then: 408
``linger_s``           2 s        a body no handler read is discarded this long, then the
                                  connection is closed
``send_timeout_s``     30 s       a response the client does not take this long: connection closed
=====================  =========  ===============================================================

A malformed request (garbage, not HTTP, bad framing) gets a 400 ``{"reason"}`` and its connection
is closed; the broker logs it at debug level only. Pipelined requests are bounded by aiohttp (it
stops reading a connection holding a few parsed requests).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "KEEP_ALIVE_S",
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "HttpLimits",
]

MAX_BODY = 64 * 1024
"""The largest request body read (Pulsar's admin bodies are a few hundred bytes)."""
KEEP_ALIVE_S = 15.0
"""An idle keep-alive connection is closed after this long."""
MAX_CONNECTIONS = 512
"""HTTP connections served at once; one past it is closed at once."""
HEADER_TIMEOUT_S = 10.0
"""A request head must arrive within this long (from the connection, or from its first byte)."""
BODY_TIMEOUT_S = 10.0
"""A request body must arrive within this long once its handler reads it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    """The admin server's bounds on one client's cost (the module's table says what each does)."""

    max_connections: int = MAX_CONNECTIONS
    descriptor_share: float = 0.9
    header_timeout_s: float = HEADER_TIMEOUT_S
    keep_alive_s: float = KEEP_ALIVE_S
    max_line_size: int = 8190
    max_field_size: int = 8190
    max_headers: int = 32
    max_body: int = MAX_BODY
    body_timeout_s: float = BODY_TIMEOUT_S
    linger_s: float = 2.0
    send_timeout_s: float = 30.0
    backlog: int = 1024
