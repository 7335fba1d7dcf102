"""Shared pytest configuration: Hypothesis profiles sized so the whole suite stays fast."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# "default" keeps each property file well under a minute; "thorough" is for local soak runs:
#   HYPOTHESIS_PROFILE=thorough pytest tests
settings.register_profile(
    "cursorkit",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "cursorkit"))
