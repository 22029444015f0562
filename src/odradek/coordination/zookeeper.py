"""The real-ZooKeeper backend, on kazoo, bridged onto the owner's asyncio loop.

kazoo runs its own threads: a connection thread that reads replies and watch events, and a completion thread
that runs callbacks. Every reply and event is handed to the owner's loop with ``call_soon_threadsafe``, so
user callbacks and listeners run on the loop, as they do on the embedded backend.

Where kazoo and ZooKeeper's own Java client differ, this module follows ZooKeeper's semantics, because that is
what Kafka's controller was written against and what the contract tests check:

* **Watches survive a reconnect.** kazoo fires and forgets every watch when the connection drops. This module
  keeps its own registry of callbacks per path and, after reconnecting with the session intact, re-arms each
  path and compares the zxids it had seen with the current ones, firing the events missed meanwhile (what
  ZooKeeper's ``SetWatches`` does for the Java client).
* **Calls fail fast while disconnected** with :class:`ConnectionLossError` instead of queueing until
  reconnect, and a kazoo "session expired" while merely disconnected is reported as connection loss: expiry
  is only claimed once ZooKeeper has said so.
* **An expired session stays dead.** kazoo would silently open a new session; here the client is stopped and
  the owner opens a new one, as Kafka's ``handleNewSession`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.protocol.states import WatchedEvent as KzWatchedEvent
from kazoo.retry import KazooRetry

from odradek.coordination.store import (
    ANY_VERSION,
    Backend,
    BadArgumentsError,
    BadVersionError,
    Check,
    ConnectionLossError,
    CoordinationError,
    Create,
    Delete,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    Session,
    SessionExpiredError,
    SessionListener,
    SessionState,
    SetData,
    Stat,
    WatchCallback,
    WatchedEvent,
    validate_path,
)

__all__ = ["ZooKeeperBackend", "ZooKeeperSession"]

PIPELINE_WINDOW = 4096
"""Requests in flight per bulk call: enough to keep ZooKeeper busy, few enough to bound client memory."""

_ERRORS: dict[type[Exception], type[CoordinationError]] = {
    kz.NoNodeError: NoNodeError,
    kz.NodeExistsError: NodeExistsError,
    kz.BadVersionError: BadVersionError,
    kz.NotEmptyError: NotEmptyError,
    kz.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    kz.BadArgumentsError: BadArgumentsError,
    kz.ConnectionLoss: ConnectionLossError,
    kz.OperationTimeoutError: ConnectionLossError,
}

_EVENT_TYPES = {
    KzEventType.CREATED: EventType.CREATED,
    KzEventType.DELETED: EventType.DELETED,
    KzEventType.CHANGED: EventType.CHANGED,
    KzEventType.CHILD: EventType.CHILD,
}


def _stat(zs: ZnodeStat) -> Stat:
    return Stat(
        zs.czxid,
        zs.mzxid,
        zs.pzxid,
        zs.ctime,
        zs.mtime,
        zs.version,
        zs.cversion,
        zs.ephemeralOwner,
        zs.dataLength,
        zs.numChildren,
    )


class ZooKeeperBackend(Backend):
    """Sessions on a ZooKeeper ensemble, all under ``chroot`` (created on first use, as Kafka does)."""

    def __init__(self, hosts: str, chroot: str = "", *, connect_timeout_s: float = 15.0) -> None:
        if chroot:
            validate_path(chroot)
        self.hosts = hosts
        self.chroot = "" if chroot == "/" else chroot
        self.connect_timeout_s = connect_timeout_s
        self._chroot_ready = not self.chroot
        self._sessions: list[ZooKeeperSession] = []

    def _ensure_chroot(self) -> None:
        client = KazooClient(hosts=self.hosts)
        client.start(timeout=self.connect_timeout_s)
        try:
            client.ensure_path(self.chroot)
        finally:
            client.stop()
            client.close()

    async def session(self, timeout_ms: int = 18_000) -> ZooKeeperSession:
        if not self._chroot_ready:
            await asyncio.to_thread(self._ensure_chroot)
            self._chroot_ready = True
        client = KazooClient(
            hosts=self.hosts + self.chroot,
            timeout=timeout_ms / 1000.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
        )
        session = ZooKeeperSession(client, asyncio.get_running_loop())
        await asyncio.to_thread(client.start, self.connect_timeout_s)
        session._started()
        self._sessions.append(session)
        return session

    async def expire_session(self, session: Session) -> None:
        """Expire by the documented trick: attach a second client to the session and close it there.

        Returns once the session's owner has seen EXPIRED (ZooKeeper tells the old connection on its next
        contact).
        """
        if not isinstance(session, ZooKeeperSession):
            raise BadArgumentsError(None, "not a ZooKeeper session")
        if session.state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        client_id = session._client.client_id

        def attach_and_close() -> None:
            other = KazooClient(
                hosts=self.hosts + self.chroot, client_id=client_id, timeout=session.timeout_ms / 1000
            )
            other.start(timeout=self.connect_timeout_s)
            other.stop()
            other.close()

        expired = asyncio.get_running_loop().create_future()

        def on_state(state: SessionState) -> None:
            if state in (SessionState.EXPIRED, SessionState.CLOSED) and not expired.done():
                expired.set_result(None)

        session.add_listener(on_state)
        try:
            await asyncio.to_thread(attach_and_close)
            # The old connection learns on its next request or ping, at most a third of the timeout away.
            await asyncio.wait_for(expired, session.timeout_ms / 1000 + self.connect_timeout_s)
        finally:
            session.remove_listener(on_state)

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, []
        for session in sessions:
            await session.close()


class ZooKeeperSession(Session):
    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop
        self._state = SessionState.CONNECTED
        self._listeners: list[SessionListener] = []
        # Flags read by kazoo's threads; plain attribute writes are atomic under the GIL.
        self._suspended = False
        self._expired = False
        self._closing = False
        self._session_id = 0
        self._timeout_ms = int(client._session_timeout)
        self._data_watchers: dict[str, dict[WatchCallback, None]] = {}
        self._child_watchers: dict[str, dict[WatchCallback, None]] = {}
        self._data_seen: dict[str, int] = {}  # path -> mzxid seen at registration, 0 when absent
        self._child_seen: dict[str, int] = {}  # path -> pzxid seen at registration
        client.add_listener(self._on_kazoo_state)

    def _started(self) -> None:
        self._session_id = self._client.client_id[0]
        self._timeout_ms = int(self._client._session_timeout)

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms

    @property
    def state(self) -> SessionState:
        return self._state

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _set_state(self, state: SessionState) -> None:
        if state is self._state or self._state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        self._state = state
        for listener in list(self._listeners):
            self._loop.call_soon(listener, state)

    # --------------------------------------------------------------------------- kazoo threads -> loop

    def _on_kazoo_state(self, state: str) -> bool:
        """Runs on kazoo's connection thread; must not block."""
        if self._closing or self._expired:
            return False
        if state == KazooState.LOST:
            self._expired = True
            self._post(self._on_expired)
        elif state == KazooState.SUSPENDED:
            self._suspended = True
            self._post(self._set_state, SessionState.SUSPENDED)
        elif state == KazooState.CONNECTED and self._suspended:
            self._suspended = False
            self._post(self._on_reconnected)
        return False

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to tell
            self._loop.call_soon_threadsafe(fn, *args)

    def _on_kazoo_watch(self, event: KzWatchedEvent) -> None:
        """kazoo calls this once per path and kind; our registry decides which callbacks fire."""
        kind = _EVENT_TYPES.get(event.type)
        if kind is not None and event.path is not None:
            self._post(self._fire, kind, event.path)

    def _fire(self, kind: EventType, path: str) -> None:
        if self._state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        if kind is EventType.CHILD:
            fired = self._child_watchers.pop(path, {})
        elif kind is EventType.DELETED:
            fired = self._data_watchers.pop(path, {})
            fired.update(self._child_watchers.pop(path, {}))
        else:
            fired = self._data_watchers.pop(path, {})
        event = WatchedEvent(kind, path)
        for callback in fired:
            self._loop.call_soon(callback, event)

    def _on_expired(self) -> None:
        if self._state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        orphaned: dict[tuple[str, WatchCallback], None] = {}
        for table in (self._data_watchers, self._child_watchers):
            for path, callbacks in table.items():
                for callback in callbacks:
                    orphaned[(path, callback)] = None
            table.clear()
        self._set_state(SessionState.EXPIRED)
        for path, callback in orphaned:
            self._loop.call_soon(callback, WatchedEvent(EventType.SESSION, path))
        # Stop kazoo from opening a fresh session behind our back.
        self._loop.run_in_executor(None, self._shutdown_client)

    def _shutdown_client(self) -> None:
        with contextlib.suppress(Exception):
            self._client.stop()
            self._client.close()

    def _on_reconnected(self) -> None:
        if self._state is not SessionState.SUSPENDED:
            return
        self._set_state(SessionState.CONNECTED)
        self._loop.create_task(self._rearm_watches())

    async def _rearm_watches(self) -> None:
        """Re-register every watch kazoo dropped, firing the events that happened while we were away."""
        data_paths = list(self._data_watchers)
        child_paths = list(self._child_watchers)
        watch = self._on_kazoo_watch
        data = await self._pipeline([partial(self._client.exists_async, p, watch) for p in data_paths])
        kids = await self._pipeline(
            [partial(self._client.get_children_async, p, watch, include_data=True) for p in child_paths]
        )
        for path, result in zip(data_paths, data, strict=True):
            if isinstance(result, BaseException):
                continue
            seen = self._data_seen.get(path, 0)
            if result is None:
                if seen:
                    self._fire(EventType.DELETED, path)
            elif not seen:
                self._fire(EventType.CREATED, path)
            elif result.mzxid != seen:
                self._fire(EventType.CHANGED, path)
        for path, result in zip(child_paths, kids, strict=True):
            if isinstance(result, kz.NoNodeError):
                self._fire(EventType.DELETED, path)
            elif not isinstance(result, BaseException) and result[1].pzxid != self._child_seen.get(path):
                self._fire(EventType.CHILD, path)

    # ---------------------------------------------------------------------------------- bridging calls

    def _usable(self) -> KazooClient:
        if self._state is SessionState.CONNECTED and not self._suspended:
            return self._client
        if self._state is SessionState.SUSPENDED or (self._suspended and not self._expired):
            raise ConnectionLossError(None, "session suspended")
        raise SessionExpiredError(None, f"session {self._state.value}")

    def _translate(self, exc: BaseException, path: str | None) -> CoordinationError:
        if isinstance(exc, CoordinationError):
            return exc
        if isinstance(exc, kz.SessionExpiredError | kz.ConnectionClosedError):
            if self._expired or self._closing:
                return SessionExpiredError(path)
            return ConnectionLossError(path)
        for kz_type, ours in _ERRORS.items():
            if isinstance(exc, kz_type):
                return ours(path)
        return CoordinationError(path, f"{type(exc).__name__}: {exc}")

    async def _call(self, start: Callable[[KazooClient], Any], path: str | None) -> Any:
        client = self._usable()
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle(result: Any) -> None:
            if future.done():
                return
            if result.exception is not None:
                future.set_exception(self._translate(result.exception, path))
            else:
                future.set_result(result.value)

        try:
            start(client).rawlink(lambda result: self._post(settle, result))
        except Exception as exc:
            raise self._translate(exc, path) from exc
        return await future

    def _settler(
        self, results: list[Any], count: int, done: asyncio.Future[None]
    ) -> Callable[[int, Any], None]:
        """A kazoo-thread callback that files each reply and wakes the loop once, after the last one."""
        remaining = [count]
        lock = threading.Lock()

        def settle_one(index: int, result: Any) -> None:
            results[index] = result.value if result.exception is None else result.exception
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._post(_wake, done)

        return settle_one

    async def _pipeline(self, starts: Sequence[Callable[[], Any]]) -> list[Any]:
        """Issue every request before awaiting; each slot holds the value or the kazoo exception."""
        results: list[Any] = [None] * len(starts)
        for base in range(0, len(starts), PIPELINE_WINDOW):
            end = min(len(starts), base + PIPELINE_WINDOW)
            done: asyncio.Future[None] = self._loop.create_future()
            settle_one = self._settler(results, end - base, done)

            for index in range(base, end):
                try:
                    starts[index]().rawlink(partial(settle_one, index))
                except Exception as exc:
                    settle_one(index, _Failed(exc))
            await done
        return results

    def _add_watch(
        self, table: dict[str, dict[WatchCallback, None]], path: str, callback: WatchCallback
    ) -> bool:
        callbacks = table.setdefault(path, {})
        added = callback not in callbacks
        callbacks[callback] = None
        return added

    def _drop_watch(
        self, table: dict[str, dict[WatchCallback, None]], path: str, callback: WatchCallback
    ) -> None:
        callbacks = table.get(path)
        if callbacks is not None:
            callbacks.pop(callback, None)
            if not callbacks:
                del table[path]

    # -------------------------------------------------------------------------------------- operations

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        validate_path(path)
        result: str = await self._call(
            lambda c: c.create_async(
                path, data, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
            ),
            path,
        )
        return result

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        added = watch is not None and self._add_watch(self._data_watchers, path, watch)
        try:
            data, zs = await self._call(
                lambda c: c.get_async(path, self._on_kazoo_watch if watch is not None else None), path
            )
        except CoordinationError:
            if added and watch is not None:
                self._drop_watch(self._data_watchers, path, watch)
            raise
        if watch is not None:
            self._data_seen[path] = zs.mzxid
        return data, _stat(zs)

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        validate_path(path)
        return _stat(await self._call(lambda c: c.set_async(path, data, expected_version), path))

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        validate_path(path)
        await self._call(lambda c: c.delete_async(path, expected_version), path)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return (await self.children_with_stat(path, watch))[0]

    async def children_with_stat(
        self, path: str, watch: WatchCallback | None = None
    ) -> tuple[list[str], Stat]:
        validate_path(path)
        added = watch is not None and self._add_watch(self._child_watchers, path, watch)
        try:
            kids, zs = await self._call(
                lambda c: c.get_children_async(
                    path, self._on_kazoo_watch if watch is not None else None, include_data=True
                ),
                path,
            )
        except CoordinationError:
            if added and watch is not None:
                self._drop_watch(self._child_watchers, path, watch)
            raise
        if watch is not None:
            self._child_seen[path] = zs.pzxid
        return list(kids), _stat(zs)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        validate_path(path)
        if watch is not None:
            self._add_watch(self._data_watchers, path, watch)
        zs = await self._call(
            lambda c: c.exists_async(path, self._on_kazoo_watch if watch is not None else None), path
        )
        if watch is not None:
            self._data_seen[path] = 0 if zs is None else zs.mzxid
        return None if zs is None else _stat(zs)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        client = self._usable()
        transaction = client.transaction()
        for op in ops:
            validate_path(op.path)
            if isinstance(op, Create):
                transaction.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetData):
                transaction.set_data(op.path, op.data, op.expected_version)
            elif isinstance(op, Delete):
                transaction.delete(op.path, op.expected_version)
            elif isinstance(op, Check):
                transaction.check(op.path, op.expected_version)
            else:
                raise BadArgumentsError(None, f"not a multi op: {op!r}")
        raw = await self._call(lambda c: transaction.commit_async(), None)
        for index, (op, outcome) in enumerate(zip(ops, raw, strict=True)):
            if isinstance(outcome, Exception) and not isinstance(outcome, kz.RolledBackError):
                error = self._translate(outcome, op.path)
                error.failed_op_index = index
                raise error
        results: list[OpResult] = []
        for op, outcome in zip(ops, raw, strict=True):
            if isinstance(op, Create):
                results.append(outcome)
            elif isinstance(op, SetData):
                results.append(_stat(outcome))
            else:
                results.append(None)
        return results

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        client = self._usable()
        raw = await self._pipeline(
            [
                partial(client.create_async, it.path, it.data, ephemeral=it.ephemeral, sequence=it.sequential)
                for it in items
            ]
        )
        return [
            self._translate(r, it.path) if isinstance(r, BaseException) else r
            for it, r in zip(items, raw, strict=True)
        ]

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        client = self._usable()
        raw = await self._pipeline([partial(client.get_async, p) for p in paths])
        return [
            self._translate(r, p) if isinstance(r, BaseException) else (r[0], _stat(r[1]))
            for p, r in zip(paths, raw, strict=True)
        ]

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        client = self._usable()
        raw = await self._pipeline(
            [partial(client.set_async, it.path, it.data, it.expected_version) for it in items]
        )
        return [
            self._translate(r, it.path) if isinstance(r, BaseException) else _stat(r)
            for it, r in zip(items, raw, strict=True)
        ]

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        client = self._usable()
        raw = await self._pipeline(
            [partial(client.delete_async, it.path, it.expected_version) for it in items]
        )
        return [
            self._translate(r, it.path) if isinstance(r, BaseException) else None
            for it, r in zip(items, raw, strict=True)
        ]

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._data_watchers.clear()
        self._child_watchers.clear()
        if self._state is not SessionState.EXPIRED:
            self._state = SessionState.CLOSED
            for listener in list(self._listeners):
                self._loop.call_soon(listener, SessionState.CLOSED)
        await asyncio.to_thread(self._shutdown_client)


def _wake(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class _Failed:
    """A request that kazoo refused before it was sent, shaped like a finished kazoo result."""

    def __init__(self, exc: Exception) -> None:
        self.value = None
        self.exception = exc
