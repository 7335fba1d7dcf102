"""The admin HTTP server beside the binary port: started by ``--http-port``, Pulsar's JSON errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from broker_process import BrokerProcess

pytest.importorskip("aiohttp")


def get(url: str) -> tuple[int, dict[str, object]]:
    """Status and JSON body of a GET (an error status too)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - a test server on 127.0.0.1
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_the_ready_line_names_the_admin_url_and_a_restart_keeps_its_port(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--http-port", "0")
    broker.start()
    try:
        assert broker.admin_url.startswith("http://127.0.0.1:")
        first = broker.admin_url
        status, body = get(f"{first}/admin/v2/no/such/path")
        assert status == 404 and isinstance(body.get("reason"), str)
        broker.stop()
        broker.start()
        assert broker.admin_url == first
    finally:
        broker.kill()


def test_without_http_port_there_is_no_admin_server(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        assert broker.admin_url == ""
    finally:
        broker.kill()
