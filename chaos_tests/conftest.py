"""Fixtures: see duomq.dev.pytest_plugin."""

from duomq.dev.pytest_plugin import *  # noqa: F401,F403
