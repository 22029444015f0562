"""The journaled embedded store keeps persistent znodes (data, versions) across restarts and forgets sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.coordination import BadVersionError, NoNodeError
from odradek.coordination.durable import JOURNAL, DurableEmbeddedBackend


async def test_persistent_nodes_survive_a_restart_and_ephemerals_do_not(tmp_path: Path) -> None:
    async def first() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        await s.create("/brokers/topics/t", b'{"v":1}', make_parents=True)
        await s.set("/brokers/topics/t", b'{"v":2}')
        await s.create("/gone", b"x")
        await s.delete("/gone")
        await s.ensure_path("/isr_change_notification")
        seq = await s.create("/isr_change_notification/isr_change_", b"n", sequential=True)
        assert seq == "/isr_change_notification/isr_change_0000000000"
        await s.create("/brokers/ids", b"", make_parents=True)
        await s.create("/brokers/ids/1", b"me", ephemeral=True)
        await store.close()

    async def second() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        data, stat = await s.get("/brokers/topics/t")
        assert data == b'{"v":2}' and stat.version == 1
        with pytest.raises(NoNodeError):
            await s.get("/gone")
        assert await s.exists("/brokers/ids/1") is None, "an ephemeral belongs to a session that is gone"
        assert await s.children("/brokers/ids") == []
        nxt = await s.create("/isr_change_notification/isr_change_", b"n", sequential=True)
        assert nxt == "/isr_change_notification/isr_change_0000000001", "sequence numbers continue, as ZooKeeper's"
        with pytest.raises(BadVersionError):
            await s.set("/brokers/topics/t", b"x", expected_version=0)  # the version survived too
        await store.close()

    await first()
    await second()


async def test_a_torn_journal_line_is_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    async def write() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        await s.create("/a", b"1")
        await s.create("/b", b"2")
        await store.close()

    await write()
    with open(tmp_path / JOURNAL, "a") as f:
        f.write('{"p": "/c", "d": "Mw')  # a crash mid-line

    async def read() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        assert (await s.get("/a"))[0] == b"1"
        assert (await s.get("/b"))[0] == b"2"
        assert await s.exists("/c") is None
        await store.close()

    await read()


async def test_compaction_folds_the_journal_into_a_snapshot(tmp_path: Path) -> None:
    async def write() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        await s.create("/n", b"0")
        for i in range(50):
            await s.set("/n", str(i).encode())
        store.compact()
        assert (tmp_path / JOURNAL).stat().st_size == 0
        await s.set("/n", b"last")
        await store.close()

    async def read() -> None:
        store = DurableEmbeddedBackend(tmp_path)
        s = await store.session(10_000)
        data, stat = await s.get("/n")
        assert data == b"last" and stat.version == 51
        await store.close()

    await write()
    await read()
