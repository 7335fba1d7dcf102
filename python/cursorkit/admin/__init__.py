"""The admin side of a broker, from outside: Pulsar's admin REST v2 as a client and as ``cursorkit admin``.

:class:`AdminClient` makes the requests (the stdlib's ``http.client``, imported on first use); the
``cursorkit admin`` command (:mod:`.command`) gives them pulsar-admin's verbs and prints the answers.
It talks to ``cursorkit broker --http-port`` or to any Pulsar broker's web service port.
"""

from __future__ import annotations

from cursorkit.admin.client import DEFAULT_URL, AdminClient, AdminError, AdminUnreachable
from cursorkit.admin.names import EARLIEST, LATEST, MessageId

__all__ = ["DEFAULT_URL", "EARLIEST", "LATEST", "AdminClient", "AdminError", "AdminUnreachable", "MessageId"]
