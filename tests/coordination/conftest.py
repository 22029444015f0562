"""Fixtures for the coordination tests: a real ZooKeeper 3.8, the two backends, a cuttable TCP link.

ZooKeeper is Debian's package (``/usr/share/java/zookeeper.jar``), started once per test session with ``java``
directly on a random loopback port and a temporary data directory. It never skips: a missing JVM or jar fails.
Each test gets its own chroot, so tests cannot see each other's znodes.

``async def`` tests are run here with ``asyncio.run`` (no plugin needed) under a deadline.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator

import pytest
from coordination_support import CuttableProxy, unique_chroot

from odradek.clock import ManualClock
from odradek.coordination import Backend, EmbeddedBackend, ZooKeeperBackend
from odradek.coordination.localzk import LocalZooKeeper

ASYNC_TEST_DEADLINE_S = 90.0


# ------------------------------------------------------------------------------------------- async tests


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), ASYNC_TEST_DEADLINE_S))
    return True


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One real ZooKeeper for the whole test session; it fails (never skips) when it cannot start."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


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
