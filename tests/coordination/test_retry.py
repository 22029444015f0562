"""A :class:`RetryingSession` waits out a connection loss and sends the request again, or raises once the session
expires (``KafkaZkClient.retryRequestsUntilConnected``), on the embedded store and on a real ZooKeeper."""

from __future__ import annotations

import asyncio

import pytest
from coordination_support import CuttableProxy, unique_chroot

from odradek.clock import ManualClock
from odradek.coordination import (
    EmbeddedBackend,
    NoNodeError,
    SessionExpiredError,
    SessionState,
    ZooKeeperBackend,
)
from odradek.coordination.retry import RetryingSession


async def turns(n: int = 20) -> None:
    """Let the loop run ``n`` turns (no time passes: nothing here can finish by waiting)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_request_made_while_cut_off_waits_and_goes_through_once_reconnected() -> None:
    backend = EmbeddedBackend(ManualClock())
    session = await backend.session()
    retrying = RetryingSession(session)
    await retrying.create("/a", b"1")
    backend.suspend(session.session_id)
    read = asyncio.create_task(retrying.get("/a"))
    written = asyncio.create_task(retrying.create_many([]))
    many = asyncio.create_task(retrying.get_many(["/a", "/missing"]))
    await turns()
    assert not read.done() and not many.done(), "answered while the session was cut off"
    assert written.done()  # nothing to send
    backend.resume(session.session_id)
    data, _stat = await read
    assert data == b"1"
    found, missing = await many
    assert not isinstance(found, BaseException) and found[0] == b"1"
    assert isinstance(missing, NoNodeError)
    await backend.close()


async def test_a_session_that_expires_while_a_request_waits_raises_session_expired() -> None:
    backend = EmbeddedBackend(ManualClock())
    session = await backend.session()
    retrying = RetryingSession(session)
    backend.suspend(session.session_id)
    waiting = [asyncio.create_task(retrying.exists("/x")), asyncio.create_task(retrying.children("/"))]
    await turns()
    backend.expire(session.session_id)
    for task in waiting:
        with pytest.raises(SessionExpiredError):
            await task
    with pytest.raises(SessionExpiredError):
        await retrying.get("/")
    await backend.close()


@pytest.mark.zookeeper
async def test_a_request_through_a_cut_link_to_zookeeper_goes_through_once_the_link_is_back(
    proxy: CuttableProxy,
) -> None:
    backend = ZooKeeperBackend(proxy.hosts, unique_chroot())
    session = await backend.session(timeout_ms=10_000)
    retrying = RetryingSession(session)
    try:
        suspended = asyncio.Event()
        session.add_listener(lambda state: state is SessionState.SUSPENDED and suspended.set())
        proxy.cut()
        await asyncio.wait_for(suspended.wait(), 30)
        created = asyncio.create_task(retrying.create("/made-while-cut", b"x"))
        await turns()
        assert not created.done()
        proxy.restore()
        assert await asyncio.wait_for(created, 30) == "/made-while-cut"
        assert (await retrying.get("/made-while-cut"))[0] == b"x"
    finally:
        proxy.restore()
        await backend.close()
