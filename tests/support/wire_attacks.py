"""Hostile clients on raw sockets, for the wire fuzzer and the hostile-client bench.

Each attack loops until its deadline, at most ``rate`` attempts a second, every socket call bounded by
a short timeout: random bytes, bit flips of a valid conversation, lying size fields, half frames,
many connections, many topics, misuse of a live consumer. Run by path
(``python wire_attacks.py NAME URL SECONDS [SEED]``) it attacks from a process of its own: it prints
``attacking`` once started, then its tally as one JSON line.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable

from cursorkit.broker.protocol.frames import encode_command, encode_payload_command, pack_stored
from cursorkit.proto import pulsar_api_pb2 as api

_T = api.BaseCommand
_TIMEOUT = 0.05


def _frames(topic: str, seed: int) -> list[bytes]:
    """A valid conversation's frames: connect, produce three messages, subscribe, flow, ack, close."""
    rng = random.Random(seed)
    out = [
        encode_command(
            _T(type=_T.CONNECT, connect=api.CommandConnect(client_version="fuzz", protocol_version=20))
        ),
        encode_command(
            _T(type=_T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1))
        ),
    ]
    for i in range(3):
        meta = api.MessageMetadata(producer_name="fuzz", sequence_id=i, publish_time=1, partition_key=f"k{i}")
        send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=i))
        out.append(encode_payload_command(send, pack_stored(meta, rng.randbytes(rng.randrange(1, 64)))))
    sub = api.CommandSubscribe(
        topic=topic, subscription="fz", subType=rng.randrange(4), consumer_id=1, request_id=2
    )
    out.append(encode_command(_T(type=_T.SUBSCRIBE, subscribe=sub)))
    out.append(encode_command(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=10))))
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual)
    ack.message_id.add(ledgerId=rng.choice([0, 1, 2**63 - 1]), entryId=rng.randrange(5))
    out.append(encode_command(_T(type=_T.ACK, ack=ack)))
    out.append(
        encode_command(
            _T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=1, request_id=3))
        )
    )
    return out


class Attacker:
    """One attack against the broker at ``host:port``; counts what the broker did with each attempt."""

    def __init__(self, url: str, seed: int) -> None:
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        self.address = (host, int(port))
        self.rng = random.Random(seed)
        self.tally: Counter[str] = Counter()
        self.held: list[socket.socket] = []

    def _open(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(self.address, timeout=_TIMEOUT)
        except OSError:
            self.tally["connect-failed"] += 1
            return None
        sock.settimeout(_TIMEOUT)
        return sock

    def _exchange(self, data: bytes, *, keep: bool = False) -> None:
        """Sends ``data`` on a new connection, reads answers briefly; closes it unless ``keep``."""
        sock = self._open()
        if sock is None:
            return
        try:
            sock.sendall(data)
            while sock.recv(65536):
                self.tally["answered"] += 1
            self.tally["closed-by-broker"] += 1
        except TimeoutError:
            self.tally["left-open"] += 1
        except OSError:
            self.tally["reset"] += 1
        if keep:
            self.held.append(sock)
        else:
            sock.close()

    def _connect_frame(self) -> bytes:
        return _frames("fz", 0)[0]

    def random_bytes(self) -> None:
        self._exchange(self.rng.randbytes(self.rng.randrange(1, 4096)))

    def bit_flips(self) -> None:
        data = bytearray(b"".join(_frames(f"fz-{self.rng.randrange(8)}", self.rng.randrange(1 << 30))))
        for _ in range(self.rng.randrange(1, 9)):
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        self._exchange(bytes(data))

    def size_fields(self) -> None:
        total = self.rng.choice([0, 1, 3, 4, 5, 8, 5 * 1024 * 1024 + 10 * 1024, 2**31, 2**32 - 1])
        command = min(self.rng.choice([0, 1, total, total + 1, 2**32 - 1]), 2**32 - 1)
        body = self.rng.randbytes(self.rng.randrange(0, 64))
        self._exchange(self._connect_frame() + struct.pack(">II", total, command) + body)

    def half_frames(self) -> None:
        frame = self.rng.choice(_frames(f"fz-{self.rng.randrange(8)}", self.rng.randrange(1 << 30)))
        self._exchange(self._connect_frame() + frame[: self.rng.randrange(1, len(frame))], keep=True)
        self._trim(200)

    def many_connections(self) -> None:
        self._exchange(self._connect_frame(), keep=True)
        self._trim(500)

    def many_topics(self) -> None:
        sock = self.held[0] if self.held else None
        if sock is None:
            sock = self._open()
            if sock is None:
                return
            sock.sendall(self._connect_frame())
            self.held.append(sock)
        n = self.rng.randrange(1 << 40)
        sub = api.CommandSubscribe(
            topic=f"fz-topic-{n}", subscription="s", subType=0, consumer_id=n, request_id=n
        )
        try:
            sock.sendall(encode_command(_T(type=_T.SUBSCRIBE, subscribe=sub)))
            sock.recv(65536)
            self.tally["answered"] += 1
        except TimeoutError:
            self.tally["left-open"] += 1
        except OSError:
            self.tally["reset"] += 1
            self.held.remove(sock)
            sock.close()

    def misuse(self) -> None:
        frames = _frames("fz-misuse", self.rng.randrange(1 << 30))
        bad = api.CommandAck(consumer_id=1, ack_type=self.rng.randrange(2))
        bad.message_id.add(ledgerId=2**64 - 1, entryId=2**64 - 1)
        flow = api.CommandFlow(consumer_id=99, messagePermits=2**32 - 1)
        extra = [encode_command(_T(type=_T.ACK, ack=bad)), encode_command(_T(type=_T.FLOW, flow=flow))]
        self._exchange(b"".join(frames[:-1] + extra * 20))

    def _trim(self, keep: int) -> None:
        while len(self.held) > keep:
            self.held.pop(0).close()

    def close(self) -> None:
        """Closes every connection still held."""
        self._trim(0)


ATTACKS: dict[str, Callable[[Attacker], None]] = {
    "random-bytes": Attacker.random_bytes,
    "bit-flips": Attacker.bit_flips,
    "size-fields": Attacker.size_fields,
    "half-frames": Attacker.half_frames,
    "many-connections": Attacker.many_connections,
    "many-topics": Attacker.many_topics,
    "misuse": Attacker.misuse,
}
"""Every attack by name."""


def attack(name: str, url: str, seconds: float, *, seed: int = 0, rate: float = 200.0) -> Counter[str]:
    """Runs attack ``name`` (``all``: each in turn) for ``seconds``, at most ``rate`` attempts a second."""
    attacker = Attacker(url, seed)
    names = list(ATTACKS) if name == "all" else [name]
    deadline = time.monotonic() + seconds
    try:
        i = 0
        while (now := time.monotonic()) < deadline:
            ATTACKS[names[i % len(names)]](attacker)
            attacker.tally["attempts"] += 1
            i += 1
            pause = 1.0 / rate - (time.monotonic() - now)
            if pause > 0:
                time.sleep(pause)
    finally:
        attacker.close()
    return attacker.tally


if __name__ == "__main__":
    name, url, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    print("attacking", flush=True)  # imports done: what follows is the attack alone
    print(json.dumps(attack(name, url, seconds, seed=seed)), flush=True)
