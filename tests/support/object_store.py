"""moto's standalone S3 server on 127.0.0.1, for the object-store tests (a real HTTP S3 API)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cursorkit.stores import ObjectStore

SETTINGS = {
    "AWS_ACCESS_KEY_ID": "cursorkit-test",
    "AWS_SECRET_ACCESS_KEY": "cursorkit-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    """A TCP port nothing listens on now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 60.0) -> None:
    """Returns once 127.0.0.1:``port`` accepts connections; raises if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


@contextmanager
def s3_server() -> Iterator[dict[str, str]]:
    """Runs the server; yields the AWS settings (endpoint included) that reach it."""
    with s3_server_process() as (settings, _proc):
        yield settings


@contextmanager
def s3_server_process() -> Iterator[tuple[dict[str, str], subprocess.Popen[bytes]]]:
    """Runs the server; yields its settings and its process (to pause it with SIGSTOP)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, **SETTINGS),
    )
    try:
        wait_for_port(port, proc, "moto_server")
        yield SETTINGS | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def s3_prefix(
    settings: dict[str, str], prefix: str = "state", *, bucket: str | None = None, **options: Any
) -> ObjectStore:
    """A prefix in a new bucket (``bucket``, or a fresh name) of the server ``settings`` reach.

    ``options``: more ObjectStore settings.
    """
    from cursorkit.stores import ObjectStore

    bucket = bucket or f"ck-{uuid.uuid4().hex[:10]}"
    store = ObjectStore(
        f"s3://{bucket}/{prefix}",
        endpoint=settings["AWS_ENDPOINT_URL"],
        access_key=settings["AWS_ACCESS_KEY_ID"],
        secret_key=settings["AWS_SECRET_ACCESS_KEY"],
        **options,
    )
    store.filesystem.create_dir(bucket)
    return store
