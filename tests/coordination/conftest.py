"""Fixtures for the coordination tests: a real ZooKeeper 3.8, the two backends, a cuttable TCP link.

ZooKeeper is the session's one (the ``zookeeper`` fixture of ``tests/conftest.py``, Debian's package started with
``java`` on a random loopback port). It never skips: a missing JVM or jar fails.
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
