"""Fixtures for the controller tests: simulated brokers around real controllers on the embedded store.

``async def`` tests run under pytest-asyncio (tests/conftest.py) with a deadline each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from async_deadline import add_deadline
from odradek.coordination.localzk import LocalZooKeeper

ASYNC_TEST_DEADLINE_S = 60.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    add_deadline(items, Path(__file__).parent, ASYNC_TEST_DEADLINE_S)


@pytest.fixture(scope="session")
def zookeeper_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ZooKeeper (Debian's package), as the coordination tests start it; it fails, never skips."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server.hosts
    finally:
        server.stop()
