"""The store contract, run unchanged against the embedded backend and a real ZooKeeper 3.8.

Where a test must show that something did *not* happen (a watch firing twice), it fences: it arms a second
watch, triggers it after the first, and waits for it. Both backends deliver a session's events in order, so
once the fence has fired, any duplicate would already have arrived. No sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from coordination_support import Recorder

from odradek.coordination import (
    Backend,
    BadVersionError,
    Check,
    ConnectionLossError,
    Create,
    Delete,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Session,
    SessionExpiredError,
    SessionState,
    SetData,
    Stat,
    WatchedEvent,
)

BackendFactory = Callable[[], Backend]


async def fence(session: Session, path: str = "/fence") -> None:
    """Wait until every event this session was owed before now has been delivered."""
    marker = Recorder()
    if await session.exists(path) is None:
        await session.create(path, b"")
    await session.get(path, watch=marker)
    await session.set(path, b"x")
    await marker.wait(1)


async def test_create_get_set_delete_and_stat(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        assert await s.create("/a", b"one") == "/a"
        data, stat = await s.get("/a")
        assert data == b"one"
        assert (stat.version, stat.cversion, stat.data_length, stat.num_children) == (0, 0, 3, 0)
        assert stat.ephemeral_owner == 0
        assert stat.czxid == stat.mzxid > 0

        new = await s.set("/a", b"two", expected_version=0)
        assert new.version == 1 and new.mzxid > stat.mzxid and new.czxid == stat.czxid
        assert (await s.get("/a"))[0] == b"two"

        await s.create("/a/b")
        await s.create("/a/c", b"")
        kids, parent = await s.children_with_stat("/a")
        assert sorted(kids) == ["b", "c"]
        assert parent.cversion == 2 and parent.num_children == 2 and parent.pzxid > new.mzxid
        await s.delete("/a/b")
        assert (await s.exists("/a")).cversion == 3  # type: ignore[union-attr]
        assert await s.exists("/a/b") is None
        assert await s.children("/a") == ["c"]


async def test_errors_carry_zookeeper_meaning(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        await s.create("/x", b"")
        with pytest.raises(NodeExistsError) as exists:
            await s.create("/x")
        assert exists.value.path == "/x"
        with pytest.raises(NoNodeError):
            await s.create("/missing/child")
        with pytest.raises(NoNodeError):
            await s.get("/nope")
        with pytest.raises(NoNodeError):
            await s.set("/nope", b"")
        with pytest.raises(NoNodeError):
            await s.delete("/nope")
        with pytest.raises(NoNodeError):
            await s.children("/nope")
        with pytest.raises(BadVersionError):
            await s.set("/x", b"", expected_version=7)
        await s.create("/x/y")
        with pytest.raises(NotEmptyError):
            await s.delete("/x")
        with pytest.raises(BadVersionError):
            await s.delete("/x/y", expected_version=3)
        await s.create("/eph", ephemeral=True)
        with pytest.raises(NoChildrenForEphemeralsError):
            await s.create("/eph/child")


async def test_make_parents_and_recursive_delete(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        assert await s.create("/p/q/r", b"leaf", make_parents=True) == "/p/q/r"
        assert (await s.get("/p/q/r"))[0] == b"leaf"
        assert (await s.get("/p/q"))[0] == b""
        await s.ensure_path("/p/q")
        await s.ensure_path("/p/z/w")
        await s.delete_recursive("/p")
        assert await s.exists("/p") is None
        await s.delete_recursive("/p")  # already gone: fine


async def test_two_writers_racing_on_one_version_exactly_one_wins(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        a = await backend.session()
        b = await backend.session()
        await a.create("/state", b"v0")
        _, stat = await b.get("/state")

        async def attempt(session: Session, data: bytes) -> Stat | BadVersionError:
            try:
                return await session.set("/state", data, expected_version=stat.version)
            except BadVersionError as error:
                return error

        outcomes = await asyncio.gather(*(attempt(s, f"w{i}".encode()) for i, s in enumerate([a, b, a, b])))
        winners = [o for o in outcomes if isinstance(o, Stat)]
        assert len(winners) == 1 and winners[0].version == stat.version + 1
        data, final = await a.get("/state")
        assert final.version == stat.version + 1
        assert data == f"w{outcomes.index(winners[0])}".encode()


async def test_multi_is_all_or_nothing(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        await s.create("/epoch", b"1")
        await s.create("/doomed", b"")
        await s.create("/kept", b"old")

        with pytest.raises(BadVersionError) as failed:
            await s.multi(
                [
                    Create("/new", b"n"),
                    SetData("/kept", b"new"),
                    Delete("/doomed"),
                    Check("/epoch", expected_version=5),
                ]
            )
        assert failed.value.failed_op_index == 3
        assert await s.exists("/new") is None
        assert (await s.get("/kept"))[0] == b"old"
        assert await s.exists("/doomed") is not None
        assert await s.exists("/")  # the root is still there

        results = await s.multi(
            [
                Check("/epoch", expected_version=0),
                Create("/new", b"n"),
                SetData("/kept", b"new", expected_version=0),
                Delete("/doomed"),
                Create("/seq-", b"", sequential=True),
            ]
        )
        assert results[0] is None and results[1] == "/new" and results[3] is None
        assert isinstance(results[2], Stat) and results[2].version == 1
        assert isinstance(results[4], str) and results[4].startswith("/seq-")
        created = await s.exists("/new")
        kept = await s.exists("/kept")
        assert created is not None and kept is not None and created.czxid == kept.mzxid  # one transaction

        with pytest.raises(NodeExistsError) as again:
            await s.multi([Create("/fresh"), Create("/new")])
        assert again.value.failed_op_index == 1
        assert await s.exists("/fresh") is None


async def test_sequential_nodes_are_unique_and_ordered_under_concurrency(
    make_backend: BackendFactory,
) -> None:
    async with make_backend() as backend:
        sessions = [await backend.session() for _ in range(3)]
        await sessions[0].create("/isr_change_notification")

        async def burst(session: Session) -> list[str]:
            return [
                await session.create("/isr_change_notification/isr_change_", b"{}", sequential=True) for _ in range(15)
            ]

        bursts = await asyncio.gather(*(burst(s) for s in sessions))
        created = [path for b in bursts for path in b]
        assert len(set(created)) == 45
        for path in created:
            suffix = path.rsplit("isr_change_", 1)[1]
            assert len(suffix) == 10 and suffix.isdigit()
        for one in bursts:
            assert one == sorted(one)  # each creator sees its own sequence increase
        kids = await sessions[0].children("/isr_change_notification")
        assert sorted(kids) == sorted(p.rsplit("/", 1)[1] for p in created)
        assert sorted(int(k[-10:]) for k in kids) == list(range(45))


async def test_ephemeral_owned_by_session_and_gone_on_close(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        owner = await backend.session()
        watcher = await backend.session()
        await owner.create("/brokers/ids", make_parents=True)
        await owner.create("/brokers/ids/1", b"{}", ephemeral=True)
        _, stat = await watcher.get("/brokers/ids/1")
        assert stat.ephemeral_owner == owner.session_id != 0
        deleted, kids = Recorder(), Recorder()
        await watcher.exists("/brokers/ids/1", watch=deleted)
        await watcher.children("/brokers/ids", watch=kids)
        await owner.close()
        assert owner.state is SessionState.CLOSED
        assert (await deleted.wait(1))[0] == WatchedEvent(EventType.DELETED, "/brokers/ids/1")
        assert (await kids.wait(1))[0] == WatchedEvent(EventType.CHILD, "/brokers/ids")
        assert await watcher.exists("/brokers/ids/1") is None
        with pytest.raises(SessionExpiredError):
            await owner.get("/brokers/ids")


async def test_session_expiry_removes_ephemerals_and_fires_watches(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        doomed = await backend.session(timeout_ms=6000)
        other = await backend.session()
        states: list[SessionState] = []
        doomed.add_listener(states.append)
        await doomed.create("/controller", b'{"version":1,"brokerid":1,"timestamp":"1"}', ephemeral=True)
        await doomed.create("/plain", b"")

        gone = Recorder()
        await other.exists("/controller", watch=gone)
        own = Recorder()
        await doomed.get("/plain", watch=own)

        await backend.expire_session(doomed)

        assert (await gone.wait(1))[0] == WatchedEvent(EventType.DELETED, "/controller")
        assert await other.exists("/controller") is None
        assert await other.exists("/plain") is not None  # persistent nodes stay
        assert (await own.wait(1))[0].type is EventType.SESSION
        assert doomed.state is SessionState.EXPIRED
        assert SessionState.EXPIRED in states
        with pytest.raises(SessionExpiredError):
            await doomed.create("/anything")
        # The winner of the next election is whoever creates /controller first.
        await other.create("/controller", b"{}", ephemeral=True)


async def test_a_watch_fires_once_not_twice(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        writer = await backend.session()
        await s.create("/w", b"0")
        seen = Recorder()
        await s.get("/w", watch=seen)
        await s.get("/w", watch=seen)  # same callback, same path and kind: one watch
        await s.exists("/w", watch=seen)
        await writer.set("/w", b"1")
        await writer.set("/w", b"2")  # the watch was used up by the first change
        await seen.wait(1)
        await fence(s)
        assert seen.events == [WatchedEvent(EventType.CHANGED, "/w")]

        # A callback armed as both data and child watch on the same node fires once on deletion.
        both = Recorder()
        await s.get("/w", watch=both)
        await s.children("/w", watch=both)
        await writer.delete("/w")
        await both.wait(1)
        await fence(s)
        assert both.events == [WatchedEvent(EventType.DELETED, "/w")]


async def test_watch_kinds(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        writer = await backend.session()
        created, changed, child = Recorder(), Recorder(), Recorder()
        assert await s.exists("/topic", watch=created) is None
        await writer.create("/topic", b"a")
        assert (await created.wait(1)) == [WatchedEvent(EventType.CREATED, "/topic")]

        await s.get("/topic", watch=changed)
        await s.children("/topic", watch=child)
        await writer.set("/topic", b"b")
        assert (await changed.wait(1)) == [WatchedEvent(EventType.CHANGED, "/topic")]
        await writer.create("/topic/partitions")
        assert (await child.wait(1)) == [WatchedEvent(EventType.CHILD, "/topic")]

        # A child's data change is not a child change of the parent.
        child2 = Recorder()
        await s.children("/topic", watch=child2)
        await writer.set("/topic/partitions", b"x")
        await fence(s)
        assert child2.events == []

        # No watch is left behind by a read of a missing node.
        missing = Recorder()
        with pytest.raises(NoNodeError):
            await s.get("/absent", watch=missing)
        await writer.create("/absent")
        await fence(s)
        assert missing.events == []


async def test_registration_watches_as_the_controller_arms_them(make_backend: BackendFactory) -> None:
    """The controller's pattern for broker registrations (Kafka's BrokerChangeHandler and
    BrokerModificationsHandler): a child watch on the parent and, on each child, an exists watch and a data watch
    from different callbacks. An in-place rewrite fires each data-side callback of that child once and nothing
    else; a deletion fires the child's callbacks and the parent's; and the session keeps answering throughout."""
    async with make_backend() as backend:
        s = await backend.session()
        broker = await backend.session()
        await s.create("/ids", b"")
        for i in (1, 2):
            await broker.create(f"/ids/{i}", b"v1", ephemeral=True)
        members = Recorder()
        assert sorted(await s.children("/ids", watch=members)) == ["1", "2"]
        modified = {i: (Recorder(), Recorder()) for i in (1, 2)}
        for i, (by_exists, by_get) in modified.items():
            assert await s.exists(f"/ids/{i}", watch=by_exists) is not None
            assert (await s.get(f"/ids/{i}", watch=by_get))[0] == b"v1"

        await broker.set("/ids/1", b"v2")
        for recorder in modified[1]:
            assert await recorder.wait(1) == [WatchedEvent(EventType.CHANGED, "/ids/1")]
        assert (await s.get("/ids/1"))[0] == b"v2"  # answered after the events, on the same session
        await fence(s)
        assert members.events == [] and all(r.events == [] for r in modified[2])

        await broker.close()  # its ephemerals go: a deletion for each child, one child change for the parent
        for recorder in modified[2]:
            assert await recorder.wait(1) == [WatchedEvent(EventType.DELETED, "/ids/2")]
        assert await members.wait(1) == [WatchedEvent(EventType.CHILD, "/ids")]
        assert await s.children("/ids") == []
        await fence(s)
        assert [len(r.events) for r in modified[1]] == [1, 1]  # used up by the rewrite, not fired again


async def test_callbacks_run_on_the_owners_loop_thread(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        states: list[tuple[SessionState, int]] = []
        s.add_listener(lambda st: states.append((st, threading.get_ident())))
        seen = Recorder()
        await s.exists("/t", watch=seen)
        await s.create("/t")
        await seen.wait(1)
        assert seen.threads == {threading.get_ident()}
        await s.close()
        await asyncio.sleep(0)  # listeners are scheduled with call_soon
        assert states == [(SessionState.CLOSED, threading.get_ident())]


async def test_bulk_calls_return_one_result_or_error_each(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        await s.create("/bulk")
        paths = [f"/bulk/{i}" for i in range(50)]
        created = await s.create_many([Create(p, str(i).encode()) for i, p in enumerate(paths)] + [Create("/no/p")])
        assert created[:50] == paths and isinstance(created[50], NoNodeError)
        again = await s.create_many([Create(paths[0])])
        assert isinstance(again[0], NodeExistsError) and again[0].path == paths[0]

        read = await s.get_many([*paths, "/bulk/missing"])
        assert [r[0] for r in read[:50]] == [str(i).encode() for i in range(50)]  # type: ignore[index]
        assert isinstance(read[50], NoNodeError) and read[50].path == "/bulk/missing"

        writes = [SetData(p, b"new", expected_version=0) for p in paths]
        writes[7] = SetData(paths[7], b"new", expected_version=9)
        stats = await s.set_many(writes)
        assert isinstance(stats[7], BadVersionError)
        assert all(isinstance(st, Stat) and st.version == 1 for i, st in enumerate(stats) if i != 7)

        gone = await s.delete_many([Delete(p) for p in paths[:10]] + [Delete("/bulk/missing")])
        assert gone[:10] == [None] * 10 and isinstance(gone[10], NoNodeError)
        assert sorted(await s.children("/bulk"), key=int) == [str(i) for i in range(10, 50)]


async def test_closed_backend_sessions_fail_cleanly(make_backend: BackendFactory) -> None:
    async with make_backend() as backend:
        s = await backend.session()
        await s.create("/c")
    with pytest.raises((SessionExpiredError, ConnectionLossError)):
        await s.get("/c")
