"""The pytest fixtures of :mod:`cursorkit.testing`: a broker per test, or one for the whole session."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from cursorkit.testing.local_broker import LocalBroker

__all__ = ["pulsar_broker", "pulsar_broker_args", "pulsar_broker_session"]


@pytest.fixture(scope="session")
def pulsar_broker_args() -> Sequence[str]:
    """Extra ``cursorkit broker`` arguments of both broker fixtures; override it in a conftest.py.

    For instance ``["--partitioned-topic", "orders=4"]``. Keep the session scope when overriding.
    """
    return ()


@pytest.fixture
def pulsar_broker(
    tmp_path_factory: pytest.TempPathFactory, pulsar_broker_args: Sequence[str]
) -> Iterator[LocalBroker]:
    """A broker of this test alone, over a fresh data directory, stopped after it.

    ``.service_url`` for the client, ``.admin_url`` and ``.admin`` for the admin API, ``.data``;
    ``.restart()``, ``.kill()`` (SIGKILL) and ``.start()`` keep its ports.
    """
    root = tmp_path_factory.mktemp("pulsar-broker")
    with LocalBroker(root / "data", args=pulsar_broker_args) as running:
        yield running


@pytest.fixture(scope="session")
def pulsar_broker_session(
    tmp_path_factory: pytest.TempPathFactory, pulsar_broker_args: Sequence[str]
) -> Iterator[LocalBroker]:
    """One broker for the whole session (tests share its topics: give each its own topic names)."""
    root = tmp_path_factory.mktemp("pulsar-broker-session")
    with LocalBroker(root / "data", args=pulsar_broker_args) as running:
        yield running
