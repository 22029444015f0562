"""Fixtures for the controller tests: simulated brokers around real controllers on the embedded store.

``async def`` tests run under ``asyncio.run`` with a deadline (no plugin needed).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest

from odradek.coordination.localzk import LocalZooKeeper

ASYNC_TEST_DEADLINE_S = 60.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), ASYNC_TEST_DEADLINE_S))
    return True


@pytest.fixture(scope="session")
def zookeeper_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ZooKeeper (Debian's package), as the coordination tests start it; it fails, never skips."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server.hosts
    finally:
        server.stop()
