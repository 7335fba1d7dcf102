"""Test against a real broker: pytest fixtures (``pytest -p cursorkit.testing``) and a context manager.

``pulsar_broker`` starts ``cursorkit broker`` for one test (a fresh data directory, free ports on
127.0.0.1), ``pulsar_broker_session`` one for the whole session; both yield a :class:`LocalBroker`
(``.service_url``, ``.admin_url``, ``.admin``, ``.data``, ``.restart()``, ``.kill()``, ``.start()``).
Outside pytest, ``with cursorkit.testing.broker() as b:`` does the same. Installed with cursorkit,
the plugin is registered as a ``pytest11`` entry point, so the fixtures need no ``-p`` either.

Bring your own client: nothing here imports one. Without pytest installed, only the context manager
and :class:`LocalBroker` are defined.
"""

from __future__ import annotations

from cursorkit.testing.local_broker import BrokerDidNotStart, LocalBroker, broker

__all__ = ["BrokerDidNotStart", "LocalBroker", "broker"]

try:
    import pytest  # noqa: F401 - only to know whether the fixtures can be defined
except ImportError:  # pragma: no cover - a script without pytest
    pass
else:
    from cursorkit.testing.fixtures import pulsar_broker, pulsar_broker_args, pulsar_broker_session

    __all__ += ["pulsar_broker", "pulsar_broker_args", "pulsar_broker_session"]
