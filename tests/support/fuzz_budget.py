"""How hard the fuzz and model tests push: a bounded count in CI, the long profile under ``make fuzz``.

``CURSORKIT_FUZZ=long`` (set by ``make fuzz``) selects the long counts; anything else, the CI ones.
"""

from __future__ import annotations

import os

LONG = os.environ.get("CURSORKIT_FUZZ") == "long"


def runs(ci: int, long: int) -> int:
    """The number of examples (or cases) for this run."""
    return long if LONG else ci
