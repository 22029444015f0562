"""The ``h`` fixture of the group coordinator's state-machine tests (test_coordinator.py and the files using its
Harness)."""

from __future__ import annotations

import pytest

from .test_coordinator import Harness


@pytest.fixture
async def h() -> Harness:
    """A coordinator that has loaded its (empty) partition of ``__consumer_offsets``."""
    harness = Harness()
    await harness.load()
    return harness
