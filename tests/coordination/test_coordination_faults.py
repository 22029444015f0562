"""Connection loss versus session expiry: embedded fault hooks, and real ZooKeeper behind a cuttable link."""

from __future__ import annotations

import asyncio

import pytest
from coordination_support import CuttableProxy, Recorder, unique_chroot, wait_until

from odradek.clock import ManualClock
from odradek.coordination import (
    ConnectionLossError,
    EmbeddedBackend,
    EventType,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
    ZooKeeperBackend,
)
from odradek.coordination.localzk import LocalZooKeeper
from odradek.coordination.store import Session
from odradek.coordination.zkwire import parse_hosts

# ------------------------------------------------------------------------------------------- embedded


async def test_embedded_suspended_session_resumes_with_its_ephemerals_and_missed_events() -> None:
    clock = ManualClock()
    async with EmbeddedBackend(clock) as backend:
        broker = await backend.session(timeout_ms=6000)
        other = await backend.session()
        states: list[SessionState] = []
        broker.add_listener(states.append)
        await broker.create("/brokers/ids/1", b"{}", ephemeral=True, make_parents=True)
        await broker.create("/topics")
        missed = Recorder()
        await broker.children("/topics", watch=missed)

        backend.suspend(broker.session_id)
        with pytest.raises(ConnectionLossError):
            await broker.get("/brokers/ids/1")
        await other.create("/topics/t")  # happens while the broker is cut off
        clock.advance(5999)
        assert backend.tick() == []
        assert missed.events == []  # held back until the session is reachable again

        backend.resume(broker.session_id)
        assert (await missed.wait(1)) == [WatchedEvent(EventType.CHILD, "/topics")]
        assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
        _, stat = await other.get("/brokers/ids/1")
        assert stat.ephemeral_owner == broker.session_id


async def test_embedded_suspended_session_expires_after_its_timeout() -> None:
    clock = ManualClock()
    async with EmbeddedBackend(clock) as backend:
        broker = await backend.session(timeout_ms=6000)
        other = await backend.session()
        states: list[SessionState] = []
        broker.add_listener(states.append)
        await broker.create("/controller", b"{}", ephemeral=True)
        gone = Recorder()
        await other.exists("/controller", watch=gone)

        backend.suspend(broker.session_id)
        clock.advance(6000)
        assert backend.tick() == [broker.session_id]
        assert (await gone.wait(1)) == [WatchedEvent(EventType.DELETED, "/controller")]
        backend.resume(broker.session_id)  # too late: stays expired
        assert broker.state is SessionState.EXPIRED
        with pytest.raises(SessionExpiredError):
            await broker.get("/controller")
        assert states[-1] is SessionState.EXPIRED


async def test_embedded_connected_sessions_never_expire_on_their_own() -> None:
    clock = ManualClock()
    async with EmbeddedBackend(clock) as backend:
        s = await backend.session(timeout_ms=1000)
        await s.create("/e", ephemeral=True)
        clock.advance(1_000_000)
        assert backend.tick() == []
        assert await s.exists("/e") is not None


# ------------------------------------------------------------------------------------------- ZooKeeper


async def _partitioned_session(
    zookeeper: LocalZooKeeper, proxy: CuttableProxy, chroot: str, timeout_ms: int
) -> tuple[ZooKeeperBackend, ZooKeeperBackend, Session, Session]:
    direct = ZooKeeperBackend(zookeeper.hosts, chroot)
    via_proxy = ZooKeeperBackend(proxy.hosts, chroot)
    observer = await direct.session()
    cut_off = await via_proxy.session(timeout_ms=timeout_ms)
    return direct, via_proxy, observer, cut_off


@pytest.mark.zookeeper
async def test_zookeeper_short_partition_keeps_the_session_and_its_watches(
    zookeeper: LocalZooKeeper, proxy: CuttableProxy
) -> None:
    direct, via_proxy, observer, broker = await _partitioned_session(zookeeper, proxy, unique_chroot(), 8000)
    try:
        states: list[SessionState] = []
        broker.add_listener(states.append)
        session_id = broker.session_id
        await broker.create("/brokers/ids/1", b"{}", ephemeral=True, make_parents=True)
        await broker.create("/topics")
        await broker.create("/config", b"a")
        kids, data = Recorder(), Recorder()
        await broker.children("/topics", watch=kids)
        await broker.get("/config", watch=data)

        proxy.cut()
        await wait_until(lambda: broker.state is SessionState.SUSPENDED, what="SUSPENDED")
        with pytest.raises(ConnectionLossError):
            await broker.get("/config")
        await observer.create("/topics/t")  # changes the broker misses while cut off
        await observer.set("/config", b"b")
        proxy.restore()

        await wait_until(lambda: broker.state is SessionState.CONNECTED, what="reconnect")
        assert broker.session_id == session_id
        assert (await kids.wait(1)) == [WatchedEvent(EventType.CHILD, "/topics")]
        assert (await data.wait(1)) == [WatchedEvent(EventType.CHANGED, "/config")]
        _, stat = await observer.get("/brokers/ids/1")
        assert stat.ephemeral_owner == session_id
        assert (await broker.get("/config"))[0] == b"b"
        assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
    finally:
        await via_proxy.close()
        await direct.close()


@pytest.mark.zookeeper
async def test_zookeeper_long_partition_expires_the_session(zookeeper: LocalZooKeeper, proxy: CuttableProxy) -> None:
    direct, via_proxy, observer, broker = await _partitioned_session(zookeeper, proxy, unique_chroot(), 2000)
    try:
        await broker.create("/controller", b"{}", ephemeral=True)
        own = Recorder()
        await broker.exists("/elsewhere", watch=own)
        gone = Recorder()
        await observer.exists("/controller", watch=gone)

        proxy.cut()
        await wait_until(lambda: broker.state is SessionState.SUSPENDED, what="SUSPENDED")
        # ZooKeeper expires the silent session; the observer sees its ephemeral go.
        assert (await gone.wait(1)) == [WatchedEvent(EventType.DELETED, "/controller")]
        with pytest.raises(ConnectionLossError):  # the cut-off side cannot know yet
            await broker.exists("/controller")
        proxy.restore()

        await wait_until(lambda: broker.state is SessionState.EXPIRED, what="EXPIRED")
        assert (await own.wait(1))[0].type is EventType.SESSION
        with pytest.raises(SessionExpiredError):
            await broker.exists("/controller")
        replacement = await via_proxy.session()
        assert replacement.session_id != broker.session_id
        await replacement.create("/controller", b"{}", ephemeral=True)
    finally:
        await via_proxy.close()
        await direct.close()


@pytest.mark.zookeeper
async def test_zookeeper_chroot_is_created_and_isolates(zookeeper: LocalZooKeeper) -> None:
    chroot = unique_chroot()
    async with ZooKeeperBackend(zookeeper.hosts, chroot) as inside, ZooKeeperBackend(zookeeper.hosts) as root:
        s = await inside.session()
        assert await s.create("/brokers/seqid", make_parents=True) == "/brokers/seqid"
        assert await s.children("/") == ["brokers"]
        r = await root.session()
        assert await r.exists(f"{chroot}/brokers/seqid") is not None


async def test_embedded_run_expiry_expires_overdue_sessions_on_its_own() -> None:
    clock = ManualClock()
    async with EmbeddedBackend(clock) as backend:
        s = await backend.session(timeout_ms=1000)
        ticker = asyncio.create_task(backend.run_expiry(interval_s=0.01))
        try:
            backend.suspend(s.session_id)
            clock.advance(1000)
            await wait_until(lambda: s.state is SessionState.EXPIRED, what="expiry by the ticker")
        finally:
            ticker.cancel()


def test_zookeeper_connect_strings() -> None:
    backend = ZooKeeperBackend("zk1:2181,[::1]:2182/kafka")
    assert (backend.hosts, backend.chroot) == ("zk1:2181,[::1]:2182", "/kafka")
    assert parse_hosts(backend.hosts) == [("zk1", 2181), ("::1", 2182)]
    assert ZooKeeperBackend("zk1:2181", "/").chroot == ""
