"""Fixtures for the controller tests: simulated brokers around real controllers on the embedded store.

``async def`` tests run under pytest-asyncio (tests/conftest.py) with a deadline each.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.coordination.localzk import LocalZooKeeper

ASYNC_TEST_DEADLINE_S = 60.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each ``async def`` test here without a deadline of its own fails after ASYNC_TEST_DEADLINE_S of its run (its
    fixtures' setup not counted)."""
    here = Path(__file__).parent
    for item in items:
        if (item.path.is_relative_to(here) and inspect.iscoroutinefunction(getattr(item, "obj", None))
                and item.get_closest_marker("timeout") is None):
            item.add_marker(pytest.mark.timeout(ASYNC_TEST_DEADLINE_S, func_only=True))


@pytest.fixture(scope="session")
def zookeeper_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ZooKeeper (Debian's package), as the coordination tests start it; it fails, never skips."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server.hosts
    finally:
        server.stop()
