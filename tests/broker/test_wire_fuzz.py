"""The wire fuzzer: every attack of ``wire_attacks`` against one broker beside an official-client pair.

Random bytes, bit flips of valid conversations, lying size fields, half frames, many connections,
many topics and misuse run from two processes of their own for a bounded time (seconds in CI,
minutes under ``make fuzz``). Meanwhile a producer and a consumer of the official client exchange
numbered messages: none may be lost, duplicated or reordered, the pair must keep making progress,
and the broker must end alive with bounded memory and descriptors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import wire_attacks
from broker_process import running_broker
from fuzz_budget import runs

pulsar = pytest.importorskip("pulsar")

ATTACKERS = 2


@pytest.mark.fuzz
@pytest.mark.slow
def test_wire_fuzz_beside_a_good_pair(tmp_path: Path) -> None:
    seconds = runs(8, 300)
    args = ("--no-sync", "--frame-timeout-s", "3", "--topic-idle-s", "1", "--max-open-topics", "200")
    with running_broker(tmp_path / "data", *args) as broker:
        assert broker.proc is not None
        client = pulsar.Client(
            broker.url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        consumer = client.subscribe("good", "good", consumer_type=pulsar.ConsumerType.Exclusive)
        producer = client.create_producer("good", batching_enabled=False)
        attackers = [
            subprocess.Popen(
                [sys.executable, wire_attacks.__file__, "all", broker.url, str(seconds), str(seed)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for seed in range(ATTACKERS)
        ]
        received: list[int] = []
        sent = 0
        slowest = 0.0
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                started = time.monotonic()
                for _ in range(20):
                    producer.send(str(sent).encode())
                    sent += 1
                while len(received) < sent:
                    msg = consumer.receive(timeout_millis=15_000)
                    consumer.acknowledge(msg)
                    received.append(int(msg.data()))
                slowest = max(slowest, time.monotonic() - started)
            tallies = []
            for a in attackers:
                out, _ = a.communicate(timeout=seconds + 60)
                tallies.append(out.removeprefix("attacking\n"))
            assert all(a.returncode == 0 for a in attackers), tallies
        finally:
            for a in attackers:
                a.kill()
            client.close()
        assert received == list(range(sent)), "the good pair lost, duplicated or reordered messages"
        assert slowest < 15, f"a round of 20 messages took {slowest:.1f} s"
        assert broker.proc.poll() is None, "the broker died"
        rss = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        )
        assert rss < 1024 * 1024, f"broker RSS {rss} KiB after the fuzz"
        assert len(os.listdir(f"/proc/{broker.proc.pid}/fd")) < 200 * 8 + 1000
        print(f"\nwire fuzz: {sent} good messages in {seconds} s, slowest round {slowest:.2f} s; {tallies}")
