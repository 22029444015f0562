"""The real-ZooKeeper backend: sessions on a ZooKeeper ensemble, under a chroot, with pipelined bulk calls.

Each session is one :class:`~odradek.coordination.zkwire.ZkWire` connection running on the owner's loop (kazoo
frames the requests; see that module for why kazoo's threaded client is not used for the connection). This module
adds what the store contract asks for on top of the wire:

* **chroot**: every path is prefixed on the way out and stripped from created paths and events on the way in,
  and the chroot itself is created on first use, as Kafka does with ``zookeeper.connect=host:port/chroot``;
* **the watch registry**: one-shot callbacks per path, kept in sets (data, exist and child watches, as in
  ZooKeeper's client), registered when the reply arrives (so no event can slip between reply and registration)
  and re-armed by the wire with ``SetWatches`` after a reconnect;
* **errors with ZooKeeper's meaning**, and fail-fast :class:`ConnectionLossError` while reconnecting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.protocol import serialization as ser
from kazoo.protocol.states import ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE

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
    parent_of,
    validate_path,
)
from odradek.coordination.zkwire import ZkWire

__all__ = ["ZooKeeperBackend", "ZooKeeperSession"]

_ERRORS: dict[type[Exception], type[CoordinationError]] = {
    kz.NoNodeError: NoNodeError,
    kz.NodeExistsError: NodeExistsError,
    kz.BadVersionError: BadVersionError,
    kz.NotEmptyError: NotEmptyError,
    kz.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    kz.BadArgumentsError: BadArgumentsError,
    kz.ConnectionLoss: ConnectionLossError,
    kz.OperationTimeoutError: ConnectionLossError,
    kz.SessionExpiredError: SessionExpiredError,
}

# ZooKeeper's event type codes (Watcher.Event.EventType).
_EVENT_TYPES = {1: EventType.CREATED, 2: EventType.DELETED, 3: EventType.CHANGED, 4: EventType.CHILD}

_Table = dict[str, dict[WatchCallback, None]]
_Outcome = tuple[Any, BaseException | None]


def _stat(zs: ZnodeStat) -> Stat:
    return Stat(
        zs.czxid, zs.mzxid, zs.pzxid, zs.ctime, zs.mtime, zs.version, zs.cversion, zs.ephemeralOwner,
        zs.dataLength, zs.numChildren,
    )  # fmt: skip


def _translate(exc: BaseException, path: str | None) -> CoordinationError:
    if isinstance(exc, CoordinationError):
        if exc.path is None and path is not None:
            return type(exc)(path)
        return exc
    for kz_type, ours in _ERRORS.items():
        if isinstance(exc, kz_type):
            return ours(path)
    return CoordinationError(path, f"{type(exc).__name__}: {exc}")


class ZooKeeperBackend(Backend):
    """Sessions on the ensemble at ``hosts`` (``host:port[,host:port...]``), all under ``chroot``."""

    def __init__(self, hosts: str, chroot: str = "", *, connect_timeout_s: float = 15.0) -> None:
        if "/" in hosts:
            hosts, _, tail = hosts.partition("/")
            chroot = chroot or "/" + tail
        if chroot:
            validate_path(chroot)
        self.hosts = hosts
        self.chroot = "" if chroot in ("", "/") else chroot
        self.connect_timeout_s = connect_timeout_s
        self._chroot_ready = not self.chroot
        self._sessions: list[ZooKeeperSession] = []

    async def session(self, timeout_ms: int = 18_000) -> ZooKeeperSession:
        if not self._chroot_ready:
            bootstrap = await ZooKeeperSession.open(self.hosts, "", timeout_ms, self.connect_timeout_s)
            try:
                await bootstrap.ensure_path(self.chroot)
            finally:
                await bootstrap.close()
            self._chroot_ready = True
        session = await ZooKeeperSession.open(self.hosts, self.chroot, timeout_ms, self.connect_timeout_s)
        live = (SessionState.CONNECTED, SessionState.SUSPENDED)
        self._sessions = [s for s in self._sessions if s.state in live]
        self._sessions.append(session)
        return session

    async def expire_session(self, session: Session) -> None:
        """Expire by the documented trick: attach a second connection to the session and close it there.

        Returns once the session's owner has seen EXPIRED, which it learns when it reconnects.
        """
        if not isinstance(session, ZooKeeperSession):
            raise BadArgumentsError(None, "not a ZooKeeper session")
        if session.state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        expired = asyncio.get_running_loop().create_future()

        def on_state(state: SessionState) -> None:
            if state in (SessionState.EXPIRED, SessionState.CLOSED) and not expired.done():
                expired.set_result(None)

        session.add_listener(on_state)
        # Taking the session over closes the owner's connection; keep the owner from taking it back until
        # the twin has closed the session, or the two would trade it back and forth.
        session._wire.hold_reconnect(True)
        try:
            twin = ZkWire(self.hosts, session.timeout_ms, lambda _s: None, lambda _t, _p: None, _no_watches)
            twin.session_id, twin.passwd = session._wire.session_id, session._wire.passwd
            await twin.start(self.connect_timeout_s)
            await twin.close()
            session._wire.hold_reconnect(False)
            await asyncio.wait_for(expired, session.timeout_ms / 1000 + self.connect_timeout_s)
        finally:
            session._wire.hold_reconnect(False)
            session.remove_listener(on_state)

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, []
        for session in sessions:
            await session.close()


def _no_watches() -> tuple[list[str], list[str], list[str]]:
    return [], [], []


class ZooKeeperSession(Session):
    def __init__(self, hosts: str, chroot: str, timeout_ms: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._chroot = chroot
        self._listeners: list[SessionListener] = []
        self._data: _Table = {}
        self._exist: _Table = {}
        self._child: _Table = {}
        self._wire = ZkWire(hosts, timeout_ms, self._on_state, self._on_event, self._watched_paths)

    @classmethod
    async def open(cls, hosts: str, chroot: str, timeout_ms: int, deadline_s: float) -> ZooKeeperSession:
        session = cls(hosts, chroot, timeout_ms)
        await session._wire.start(deadline_s)
        return session

    @property
    def session_id(self) -> int:
        return self._wire.session_id

    @property
    def timeout_ms(self) -> int:
        return self._wire.timeout_ms

    @property
    def state(self) -> SessionState:
        return self._wire.state

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ------------------------------------------------------------------------------------- wire callbacks

    def _on_state(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            orphaned: dict[tuple[str, WatchCallback], None] = {}
            for table in (self._data, self._exist, self._child):
                for path, callbacks in table.items():
                    for callback in callbacks:
                        orphaned[(path, callback)] = None
                table.clear()
            for path, callback in orphaned:
                self._loop.call_soon(callback, WatchedEvent(EventType.SESSION, path))
        elif state is SessionState.CLOSED:
            for table in (self._data, self._exist, self._child):
                table.clear()
        for listener in list(self._listeners):
            self._loop.call_soon(listener, state)

    def _on_event(self, code: int, server_path: str) -> None:
        kind = _EVENT_TYPES.get(code)
        if kind is None:
            return
        path = self._unchroot(server_path)
        if kind is EventType.CHILD:
            fired = self._child.pop(path, {})
        else:
            fired = self._data.pop(path, {})
            fired.update(self._exist.pop(path, {}))
            if kind is EventType.DELETED:
                fired.update(self._child.pop(path, {}))
        event = WatchedEvent(kind, path)
        for callback in fired:
            self._loop.call_soon(callback, event)

    def _watched_paths(self) -> tuple[list[str], list[str], list[str]]:
        return (
            [self._full(p) for p in self._data],
            [self._full(p) for p in self._exist],
            [self._full(p) for p in self._child],
        )

    # ------------------------------------------------------------------------------------- plumbing

    def _full(self, path: str) -> str:
        if not self._chroot:
            return path
        return self._chroot if path == "/" else self._chroot + path

    def _unchroot(self, path: str) -> str:
        chroot = self._chroot
        if not chroot or not (path == chroot or path.startswith(chroot + "/")):
            return path
        return path[len(chroot) :] or "/"

    async def _call(self, request: Any, path: str | None, on_success: Callable[[Any], None] | None = None) -> Any:
        future: asyncio.Future[_Outcome] = self._loop.create_future()

        def reply(response: Any, error: BaseException | None) -> None:
            if error is None and on_success is not None:
                on_success(response)  # runs before any later event on this connection is processed
            if not future.done():
                future.set_result((response, error))

        self._wire.send(request, reply)
        response, error = await future
        if error is not None:
            raise _translate(error, path)
        return response

    async def _pipeline(self, requests: Sequence[Any]) -> list[_Outcome]:
        """Every request handed to the wire at once; it keeps at most MAX_IN_FLIGHT of them on the connection."""
        outcomes: list[_Outcome] = [(None, None)] * len(requests)
        if not requests:
            return outcomes
        done: asyncio.Future[None] = self._loop.create_future()
        end = len(requests)
        self._wire.send_many(
            (request, self._settler(outcomes, index, end, done)) for index, request in enumerate(requests)
        )
        await done
        return outcomes

    @staticmethod
    def _settler(
        outcomes: list[_Outcome], index: int, end: int, done: asyncio.Future[None]
    ) -> Callable[[Any, BaseException | None], None]:
        def settle(response: Any, error: BaseException | None) -> None:
            outcomes[index] = (response, error)
            if index == end - 1 and not done.done():  # replies arrive in request order
                done.set_result(None)

        return settle

    def _watch(self, table: _Table, path: str, callback: WatchCallback) -> None:
        table.setdefault(path, {})[callback] = None

    # ------------------------------------------------------------------------------------- operations

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
        make_parents: bool = False,
    ) -> str:  # fmt: skip
        validate_path(path)
        flags = (1 if ephemeral else 0) | (2 if sequential else 0)
        request = ser.Create(self._full(path), data, OPEN_ACL_UNSAFE, flags)
        try:
            created: str = await self._call(request, path)
        except NoNodeError:
            if not make_parents or parent_of(path) == "/":
                raise
            await self.ensure_path(parent_of(path))
            created = await self._call(request, path)
        return self._unchroot(created)

    async def ensure_path(self, path: str) -> None:
        """One request when the path exists; more only for the ancestors that are missing."""
        validate_path(path)
        if path == "/":
            return
        request = ser.Create(self._full(path), b"", OPEN_ACL_UNSAFE, 0)
        try:
            await self._call(request, path)
        except NodeExistsError:
            return
        except NoNodeError:
            await self.ensure_path(parent_of(path))
            with contextlib.suppress(NodeExistsError):
                await self._call(request, path)

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        register = None if watch is None else lambda _r: self._watch(self._data, path, watch)
        data, zs = await self._call(ser.GetData(self._full(path), watch is not None), path, register)
        return data or b"", _stat(zs)

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        validate_path(path)
        return _stat(await self._call(ser.SetData(self._full(path), data, expected_version), path))

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        validate_path(path)
        await self._call(ser.Delete(self._full(path), expected_version), path)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return (await self.children_with_stat(path, watch))[0]

    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]:
        validate_path(path)
        register = None if watch is None else lambda _r: self._watch(self._child, path, watch)
        kids, zs = await self._call(ser.GetChildren2(self._full(path), watch is not None), path, register)
        return list(kids), _stat(zs)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        validate_path(path)

        def register(zs: ZnodeStat | None) -> None:
            if watch is not None:
                self._watch(self._exist if zs is None else self._data, path, watch)

        zs = await self._call(ser.Exists(self._full(path), watch is not None), path, register)
        return None if zs is None else _stat(zs)

    def _op(self, op: Op) -> Any:
        validate_path(op.path)
        full = self._full(op.path)
        if isinstance(op, Create):
            flags = (1 if op.ephemeral else 0) | (2 if op.sequential else 0)
            return ser.Create(full, op.data, OPEN_ACL_UNSAFE, flags)
        if isinstance(op, SetData):
            return ser.SetData(full, op.data, op.expected_version)
        if isinstance(op, Delete):
            return ser.Delete(full, op.expected_version)
        if isinstance(op, Check):
            return ser.CheckVersion(full, op.expected_version)
        raise BadArgumentsError(None, f"not a multi op: {op!r}")

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        raw = await self._call(ser.Transaction([self._op(op) for op in ops]), None)
        for index, (op, outcome) in enumerate(zip(ops, raw, strict=True)):
            if isinstance(outcome, Exception) and not isinstance(outcome, kz.RolledBackError):
                error = _translate(outcome, op.path)
                error.failed_op_index = index
                raise error
        results: list[OpResult] = []
        for op, outcome in zip(ops, raw, strict=True):
            if isinstance(op, Create):
                results.append(self._unchroot(outcome))
            elif isinstance(op, SetData):
                results.append(_stat(outcome))
            else:
                results.append(None)
        return results

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        outcomes = await self._pipeline([self._op(item) for item in items])
        return [
            _translate(e, it.path) if e is not None else self._unchroot(r)
            for it, (r, e) in zip(items, outcomes, strict=True)
        ]

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        for path in paths:
            validate_path(path)
        outcomes = await self._pipeline([ser.GetData(self._full(p), False) for p in paths])
        return [
            _translate(e, p) if e is not None else (r[0] or b"", _stat(r[1]))
            for p, (r, e) in zip(paths, outcomes, strict=True)
        ]

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        outcomes = await self._pipeline([self._op(item) for item in items])
        return [
            _translate(e, it.path) if e is not None else _stat(r) for it, (r, e) in zip(items, outcomes, strict=True)
        ]

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        outcomes = await self._pipeline([self._op(item) for item in items])
        return [None if e is None else _translate(e, it.path) for it, (_r, e) in zip(items, outcomes, strict=True)]

    async def close(self) -> None:
        if self._wire.state in (SessionState.CONNECTED, SessionState.SUSPENDED):
            await self._wire.close()
