"""What the tests with the official Pulsar client share: a quiet client, receiving, silence."""

from __future__ import annotations

import pulsar

TIMEOUT_MS = 10_000


def client(url: str) -> pulsar.Client:
    """A client that logs only errors (the C++ client is chatty on stderr)."""
    return pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def receive_all(consumer: pulsar.Consumer, n: int, *, ack: bool = True) -> list[pulsar.Message]:
    """``n`` messages (each acknowledged unless ``ack`` is False); a timeout fails the test."""
    out = []
    for _ in range(n):
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)
    return out


def nothing_more(consumer: pulsar.Consumer, wait_ms: int = 500) -> bool:
    """Whether nothing arrives within ``wait_ms``."""
    try:
        consumer.receive(timeout_millis=wait_ms)
    except pulsar.Timeout:
        return True
    return False
