"""Fixtures for the coordination tests: a real ZooKeeper 3.8, the two backends, a cuttable TCP link.

ZooKeeper is the session's one (the ``zookeeper`` fixture of ``tests/conftest.py``, Debian's package started with
``java`` on a random loopback port). It never skips: a missing JVM or jar fails.
Each test gets its own chroot, so tests cannot see each other's znodes.

``async def`` tests run under pytest-asyncio (tests/conftest.py) with a deadline each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from coordination_support import CuttableProxy, unique_chroot

from async_deadline import add_deadline
from odradek.clock import ManualClock
from odradek.coordination import Backend, EmbeddedBackend, ZooKeeperBackend
from odradek.coordination.localzk import LocalZooKeeper

ASYNC_TEST_DEADLINE_S = 90.0


# ------------------------------------------------------------------------------------------- async tests


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    add_deadline(items, Path(__file__).parent, ASYNC_TEST_DEADLINE_S)


# ------------------------------------------------------------------------------------------- backends


BackendFactory = Callable[[], Backend]


@pytest.fixture(params=["embedded", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def make_backend(request: pytest.FixtureRequest) -> BackendFactory:
    """A factory of backends that all share one store: two backends from it see the same znodes.

    Tests open sessions inside ``async with make_backend() as backend`` so that teardown runs on the loop.
    """
    if request.param == "embedded":
        shared = EmbeddedBackend(ManualClock())
        return lambda: shared
    server: LocalZooKeeper = request.getfixturevalue("zookeeper")
    chroot = unique_chroot()
    return lambda: ZooKeeperBackend(server.hosts, chroot)


@pytest.fixture
def proxy(zookeeper: LocalZooKeeper) -> Iterator[CuttableProxy]:
    link = CuttableProxy(zookeeper.port)
    try:
        yield link
    finally:
        link.close()
