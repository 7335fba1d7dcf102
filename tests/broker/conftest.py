"""Fixtures of the broker tests: a broker process on 127.0.0.1 over a fresh data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_process import BrokerProcess, running_broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A running broker, stopped after the test."""
    with running_broker(tmp_path / "data") as b:
        yield b
