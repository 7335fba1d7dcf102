"""A Pulsar client process for the broker benches: one producer, or the consumers of one subscription.

Run by path (``python broker_client.py ROLE URL TOPIC N ...``: ``produce ... BATCHING KEYS``,
``consume ... TYPE CONSUMERS``, ``hole ... EVERY``), so the client's work
never shares a process, nor a GIL, with the broker or the other side. It connects, prints ``ready``,
waits for ``go`` on stdin, does its part and prints one JSON line: its seconds from ``go`` to the
end and its own CPU seconds (every thread, the C++ client's included).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

import _pulsar
import pulsar

PAYLOAD = 100
TIMEOUT_MS = 60_000


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _handshake() -> tuple[float, float]:
    """``ready`` out, ``go`` in; returns the wall clock and CPU at ``go``."""
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    return time.perf_counter(), _cpu()


def _done(started: tuple[float, float], **extra: Any) -> None:
    print(
        json.dumps({"seconds": time.perf_counter() - started[0], "cpu": _cpu() - started[1], **extra}),
        flush=True,
    )


def produce(url: str, topic: str, messages: int, batching: bool, keys: int) -> None:
    """Sends ``messages`` messages of 100 bytes (keyed round-robin over ``keys`` keys when > 0)."""
    client = _client(url)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        max_pending_messages=10_000,
        block_if_queue_full=True,
    )._producer  # the native producer: no Python wrapper per message
    payload = b"x" * PAYLOAD
    names = [str(k) for k in range(keys)]
    started = _handshake()
    for i in range(messages):
        builder = _pulsar.MessageBuilder().content(payload)
        if keys:
            builder = builder.partition_key(names[i % keys])
        # No receipt callback: one from the client's thread per message costs ~20 µs of GIL traffic
        # (it would triple this process's CPU); the consumer's count checks that every message came.
        producer.send_async(builder.build(), None)
    producer.flush()
    _done(started)
    client.close()


def consume(url: str, topic: str, messages: int, sub_type: str, consumers: int) -> None:
    """Receives and acknowledges ``messages`` messages, one thread per consumer of one subscription."""
    client = _client(url)
    kind = {"Shared": pulsar.ConsumerType.Shared, "Key_Shared": pulsar.ConsumerType.KeyShared}[sub_type]
    natives = [
        client.subscribe(topic, "bench", consumer_type=kind, receiver_queue_size=1000)._consumer
        for _ in range(consumers)
    ]
    counts = [0] * consumers
    finished = threading.Event()

    def drain(n: int) -> None:
        consumer = natives[n]
        while not finished.is_set():
            try:
                msg = consumer.receive(100)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(msg)
            counts[n] += 1

    threads = [threading.Thread(target=drain, args=(n,), daemon=True) for n in range(consumers)]
    started = _handshake()
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_MS / 1000 + messages / 1000
    while sum(counts) < messages and time.monotonic() < deadline:
        time.sleep(0.001)
    finished.set()
    for t in threads:
        t.join()
    _done(started, received=sum(counts), per_consumer=counts)
    client.close()


def hole(url: str, topic: str, messages: int, every: int) -> None:
    """Sends ``messages`` unbatched messages, then acknowledges every ``every``-th by id, unreceived."""
    client = _client(url)
    consumer = client.subscribe(
        topic, "bench", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1
    )
    producer = client.create_producer(
        topic, batching_enabled=False, max_pending_messages=10_000, block_if_queue_full=True
    )._producer
    payload = b"x" * PAYLOAD
    ids: list[Any] = []
    sent = [0]

    def receipt(_: Any, message_id: Any) -> None:  # receipts arrive in send order
        sent[0] += 1
        if sent[0] % every == 0:
            ids.append(message_id)

    started = _handshake()
    for _ in range(messages):
        producer.send_async(_pulsar.MessageBuilder().content(payload).build(), receipt)
    producer.flush()
    for message_id in ids:
        consumer._consumer.acknowledge(message_id)
    time.sleep(1.0)  # the client sends grouped acks every 100 ms; the broker flushes every 100 ms
    _done(started, acked=len(ids))
    client.close()


def main(argv: list[str]) -> None:
    """Runs one role (``produce``, ``consume`` or ``hole``) with its arguments, as the module says."""
    role, url, topic, n, *rest = argv
    if role == "produce":
        produce(url, topic, int(n), rest[0] == "1", int(rest[1]))
    elif role == "consume":
        consume(url, topic, int(n), rest[0], int(rest[1]))
    else:
        hole(url, topic, int(n), int(rest[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
