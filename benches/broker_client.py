"""A Pulsar client process for the broker benches: one producer, or the consumers of one subscription.

Run by path (``python broker_client.py ROLE URL TOPIC N ...``: ``produce ... BATCHING KEYS [RATE]
[delay=MS] [pending=N]``, ``consume ... TYPE CONSUMERS [idle=S] [unique=1] [latency=SKIP] [nack=EVERY]
[nack_delay=MS]``, ``hole ... EVERY``), so the client's
work never shares a process, nor a GIL, with the broker or the other side. It connects, prints
``ready``, waits for ``go`` on stdin, does its part and prints one JSON line: its seconds from ``go``
to the end and its own CPU seconds (every thread, the C++ client's included).

A paced producer (``RATE`` > 0 messages a second) stamps each payload with its send time
(``CLOCK_MONOTONIC``, the same clock in every process of the host); ``latency=SKIP`` makes the
consumer report the percentiles of receive time minus stamp, the first SKIP messages left out.
``delay=MS`` sends every message with a deliver-after time (it waits in the broker's delayed
tracker; ``pending=N`` bounds the producer's queue, so a message's deliver-at time, set as it is
built, is not spent waiting in it); ``nack=EVERY`` makes the consumer nack every EVERY-th first
delivery once and ack its redelivery.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from datetime import timedelta
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


def produce(
    url: str,
    topic: str,
    messages: int,
    batching: bool,
    keys: int,
    rate: float = 0.0,
    delay_ms: float = 0.0,
    pending: int = 10_000,
) -> None:
    """Sends ``messages`` messages of 100 bytes (keyed round-robin over ``keys`` keys when > 0).

    At ``rate`` > 0, message i leaves at ``i / rate`` s after ``go``, its send time in its first 8 bytes.
    ``delay_ms`` > 0 (unpaced only): each message is to be delivered that long after it is built.
    ``pending``: the most messages sent and not yet acknowledged by the broker (then ``send`` waits).
    """
    client = _client(url)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        max_pending_messages=pending,
        block_if_queue_full=True,
    )._producer  # the native producer: no Python wrapper per message
    payload = b"x" * PAYLOAD
    names = [str(k) for k in range(keys)]
    after = timedelta(milliseconds=delay_ms)
    started = _handshake()
    if rate > 0:
        _paced(producer, messages, rate)
        producer.flush()
        _done(started)
        client.close()
        return
    for i in range(messages):
        builder = _pulsar.MessageBuilder().content(payload)
        if keys:
            builder = builder.partition_key(names[i % keys])
        if delay_ms:
            builder = builder.deliver_after(after)
        # No receipt callback: one from the client's thread per message costs ~20 µs of GIL traffic
        # (it would triple this process's CPU); the consumer's count checks that every message came.
        producer.send_async(builder.build(), None)
    producer.flush()
    _done(started)
    client.close()


def _paced(producer: Any, messages: int, rate: float) -> None:
    """Sends stamped 100-byte messages at ``rate`` a second, each at its own time from the start."""
    filler = b"x" * (PAYLOAD - 8)
    start = time.monotonic()
    for i in range(messages):
        wait = start + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        stamp = time.monotonic_ns().to_bytes(8, "little")
        producer.send_async(_pulsar.MessageBuilder().content(stamp + filler).build(), None)


def consume(
    url: str,
    topic: str,
    messages: int,
    sub_type: str,
    consumers: int,
    idle: float = 0.0,
    unique: bool = False,
    latency: int | None = None,
    nack: int = 0,
    nack_delay_ms: int = 10,
) -> None:
    """Receives and acknowledges ``messages`` messages, one thread per consumer of one subscription.

    ``idle`` > 0: gives up once no message came for that many seconds (``stalled`` in the result).
    ``unique``: counts distinct message ids too, and stops on ``messages`` distinct ones.
    ``latency``: reports p50 and p99 of receive time minus the producer's stamp, from message
    ``latency`` on. ``nack`` > 0: each consumer nacks every ``nack``-th message it gets for the first
    time (redelivered ``nack_delay_ms`` later) and acks it when it comes back (``redelivery_count``
    > 0); ``nacked`` and ``redelivered`` in the result.
    """
    client = _client(url)
    kind = {"Shared": pulsar.ConsumerType.Shared, "Key_Shared": pulsar.ConsumerType.KeyShared}[sub_type]
    natives = [
        client.subscribe(
            topic,
            "bench",
            consumer_type=kind,
            receiver_queue_size=1000,
            negative_ack_redelivery_delay_ms=nack_delay_ms,
        )._consumer
        for _ in range(consumers)
    ]
    counts = [0] * consumers
    firsts = [0] * consumers
    nacked = [0] * consumers
    redelivered = [0] * consumers
    seen: set[tuple[int, int, int]] = set()
    delays: list[int] = []
    finished = threading.Event()

    def drain(n: int) -> None:
        consumer = natives[n]
        while not finished.is_set():
            try:
                msg = consumer.receive(100)
            except pulsar.Timeout:
                continue
            if latency is not None:
                delays.append(time.monotonic_ns() - int.from_bytes(msg.data()[:8], "little"))
            if nack:
                if msg.redelivery_count():
                    redelivered[n] += 1
                else:
                    firsts[n] += 1
                    if firsts[n] % nack == 0:
                        consumer.negative_acknowledge(msg)
                        nacked[n] += 1
                        continue
            if unique:
                mid = msg.message_id()
                seen.add((mid.ledger_id(), mid.entry_id(), mid.batch_index()))
            consumer.acknowledge(msg)
            counts[n] += 1

    def got() -> int:
        return len(seen) if unique else sum(counts)

    threads = [threading.Thread(target=drain, args=(n,), daemon=True) for n in range(consumers)]
    started = _handshake()
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_MS / 1000 + messages / 1000
    last, moved = 0, time.monotonic()
    stalled = False
    while got() < messages and time.monotonic() < deadline:
        time.sleep(0.001)
        if got() != last:
            last, moved = got(), time.monotonic()
        elif idle and time.monotonic() - moved > idle:
            stalled = True
            break
    finished.set()
    for t in threads:
        t.join()
    extra: dict[str, Any] = {"received": sum(counts), "per_consumer": counts, "stalled": stalled}
    if unique:
        extra["unique"] = len(seen)
    if nack:
        extra |= {"nacked": sum(nacked), "redelivered": sum(redelivered)}
    if latency is not None:
        kept = delays[latency:] or delays
        q = statistics.quantiles(kept, n=100, method="inclusive") if len(kept) > 1 else kept * 99
        extra |= {"p50_us": q[49] / 1e3, "p99_us": q[98] / 1e3, "samples": len(kept)}
    _done(started, **extra)
    if stalled:  # closing waits on the broker that stopped answering: leave without it
        os._exit(0)
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
    positional = [arg for arg in rest if "=" not in arg]
    options = dict(arg.split("=", 1) for arg in rest if "=" in arg)
    if role == "produce":
        produce(
            url,
            topic,
            int(n),
            positional[0] == "1",
            int(positional[1]),
            float(positional[2]) if positional[2:] else 0.0,
            delay_ms=float(options.get("delay", 0)),
            pending=int(options.get("pending", 10_000)),
        )
    elif role == "consume":
        consume(
            url,
            topic,
            int(n),
            positional[0],
            int(positional[1]),
            idle=float(options.get("idle", 0)),
            unique=options.get("unique") == "1",
            latency=int(options["latency"]) if "latency" in options else None,
            nack=int(options.get("nack", 0)),
            nack_delay_ms=int(options.get("nack_delay", 10)),
        )
    else:
        hole(url, topic, int(n), int(positional[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
