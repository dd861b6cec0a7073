"""Fixtures: see duomq.testing.pytest_plugin."""

from duomq.testing.pytest_plugin import *  # noqa: F401,F403
