"""Fixtures for the controller tests: simulated brokers around real controllers on the embedded store.

``async def`` tests run under ``asyncio.run`` with a deadline (no plugin needed).
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

ASYNC_TEST_DEADLINE_S = 60.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), ASYNC_TEST_DEADLINE_S))
    return True
