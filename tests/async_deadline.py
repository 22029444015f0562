"""A deadline for every ``async def`` test of a directory, for that directory's conftest to set (as pytest-timeout's
marker, on the test's own run: its fixtures' setup is not counted)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest


def add_deadline(items: list[pytest.Item], directory: Path, seconds: float) -> None:
    """Mark the ``async def`` tests under ``directory`` that have no deadline of their own to fail after ``seconds``."""
    for item in items:
        if (item.path.is_relative_to(directory) and inspect.iscoroutinefunction(getattr(item, "obj", None))
                and item.get_closest_marker("timeout") is None):
            item.add_marker(pytest.mark.timeout(seconds, func_only=True))
