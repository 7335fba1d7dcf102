"""A hand-driven connection to a broker on raw sockets: Pulsar commands in and out, one at a time."""

from __future__ import annotations

import socket

from cursorkit.broker.protocol.frames import FrameDecoder, encode_command
from cursorkit.proto import pulsar_api_pb2 as api


class Raw:
    """A hand-driven client connection to ``url`` (``pulsar://host:port``)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.decoder = FrameDecoder()

    def send(self, cmd: api.BaseCommand) -> None:
        self.sock.sendall(encode_command(cmd))

    def receive(self) -> api.BaseCommand:
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            frames = self.decoder.feed(data)
            if frames:
                return frames[0].command

    def closed(self) -> bool:
        try:
            while self.sock.recv(65536):
                pass
        except (ConnectionError, TimeoutError, OSError):
            return True
        return True

    def connect(self) -> api.BaseCommand:
        self.send(
            api.BaseCommand(
                type=api.BaseCommand.CONNECT,
                connect=api.CommandConnect(client_version="raw", protocol_version=20),
            )
        )
        return self.receive()

    def close(self) -> None:
        self.sock.close()
