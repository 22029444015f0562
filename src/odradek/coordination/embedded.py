"""The in-memory backend: every session in one process, time from an injected clock, faults on demand.

It keeps ZooKeeper's bookkeeping rather than an approximation of it, so code tested here behaves the same on
a real ensemble: one store-wide zxid counter (a multi is one transaction and gets one zxid), ``cversion``
bumped by every child create and delete, sequential suffixes taken from the parent's ``cversion`` and
zero-padded to ten digits, ephemeral owners equal to session ids, and one-shot watches kept in sets per path
and kind.

Sessions only expire when the owner lets them: a suspended session (the owner's link is cut) expires once the
clock shows it silent for its timeout and somebody calls :meth:`EmbeddedBackend.tick` (or runs
:meth:`EmbeddedBackend.run_expiry`), which keeps expiry deterministic under a
:class:`~odradek.clock.ManualClock`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence

from odradek.clock import Clock, SystemClock
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

__all__ = ["EmbeddedBackend", "EmbeddedSession"]

_Watcher = tuple["EmbeddedSession", WatchCallback]
_Undo = list[Callable[[], None]]
_Events = list[tuple[EventType, str]]


class _Node:
    __slots__ = (
        "children",
        "ctime",
        "cversion",
        "czxid",
        "data",
        "mtime",
        "mzxid",
        "owner",
        "pzxid",
        "version",
    )

    def __init__(self, data: bytes, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.czxid = zxid
        self.mzxid = zxid
        self.pzxid = zxid
        self.ctime = now
        self.mtime = now
        self.version = 0
        self.cversion = 0
        self.owner = owner
        self.children: dict[str, None] | None = None  # made on the first child: most znodes are leaves

    def stat(self) -> Stat:
        return Stat(
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.owner,
            len(self.data),
            len(self.children) if self.children else 0,
        )


class EmbeddedBackend(Backend):
    """The znode tree and every session on it; single-threaded, driven from one asyncio loop."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, self.clock.now_ms(), 0)}
        self._zxid = 0
        self._session_ids = itertools.count(0x1_0000_0001)
        self._sessions: dict[int, EmbeddedSession] = {}
        self._data_watches: dict[str, dict[_Watcher, None]] = {}
        self._child_watches: dict[str, dict[_Watcher, None]] = {}

    # ----------------------------------------------------------------------------- sessions and faults

    async def session(self, timeout_ms: int = 18_000) -> EmbeddedSession:
        if timeout_ms <= 0:
            raise BadArgumentsError(None, "session timeout must be positive")
        session = EmbeddedSession(self, next(self._session_ids), timeout_ms, asyncio.get_running_loop())
        self._sessions[session.session_id] = session
        return session

    async def expire_session(self, session: Session) -> None:
        self.expire(session.session_id)

    def expire(self, session_id: int) -> None:
        """Expire a session now: its ephemerals are deleted and its owner sees EXPIRED."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._end_session(session, SessionState.EXPIRED)

    def suspend(self, session_id: int) -> None:
        """Cut a session off: calls fail with connection loss; it expires unless resumed in its timeout."""
        session = self._sessions.get(session_id)
        if session is not None and session.state is SessionState.CONNECTED:
            session._suspended_at = self.clock.monotonic_ms()
            session._set_state(SessionState.SUSPENDED)

    def resume(self, session_id: int) -> None:
        """Reconnect a suspended session; watch events that happened meanwhile are delivered now, in order."""
        session = self._sessions.get(session_id)
        if session is not None and session.state is SessionState.SUSPENDED:
            session._set_state(SessionState.CONNECTED)
            pending, session._pending = session._pending, []
            for callback, event in pending:
                session._loop.call_soon(callback, event)

    def tick(self) -> list[int]:
        """Expire every suspended session silent for at least its timeout; returns the expired ids."""
        now = self.clock.monotonic_ms()
        overdue = [
            s.session_id
            for s in self._sessions.values()
            if s.state is SessionState.SUSPENDED and now - s._suspended_at >= s.timeout_ms
        ]
        for session_id in overdue:
            self.expire(session_id)
        return overdue

    async def run_expiry(self, interval_s: float = 0.1) -> None:
        """Call :meth:`tick` forever; run it as a task when the clock is a real one."""
        while True:
            self.tick()
            await asyncio.sleep(interval_s)

    async def close(self) -> None:
        for session in list(self._sessions.values()):
            self._end_session(session, SessionState.CLOSED)

    def _end_session(self, session: EmbeddedSession, final: SessionState) -> None:
        self._sessions.pop(session.session_id, None)
        was_live = session.state in (SessionState.CONNECTED, SessionState.SUSPENDED)
        session._set_state(final)
        session._pending.clear()
        if not was_live:
            return
        # The session's own outstanding watches: on expiry each fires once so nobody waits forever; on close
        # the owner asked for it, so they are dropped.
        orphaned: dict[tuple[str, WatchCallback], None] = {}
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                watchers = table[path]
                for watcher in [w for w in watchers if w[0] is session]:
                    del watchers[watcher]
                    orphaned[(path, watcher[1])] = None
                if not watchers:
                    del table[path]
        if final is SessionState.EXPIRED:
            for path, callback in orphaned:
                session._loop.call_soon(callback, WatchedEvent(EventType.SESSION, path))
        if session._ephemerals:
            self._zxid += 1
            events: _Events = []
            for path in sorted(session._ephemerals, key=len, reverse=True):
                if path in self._nodes:
                    self._delete(path, ANY_VERSION, self._zxid, None, events)
            session._ephemerals.clear()
            self._fire(events)

    # ----------------------------------------------------------- primitive writes (undo log for multi)

    def _create(
        self,
        path: str,
        data: bytes,
        ephemeral: bool,
        sequential: bool,
        session: EmbeddedSession,
        zxid: int,
        undo: _Undo | None,
        events: _Events,
    ) -> str:
        validate_path(path)
        slash = path.rfind("/")
        parent_path = path[:slash] if slash else "/"
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(path)
        if parent.owner:
            raise NoChildrenForEphemeralsError(path)
        if sequential:
            path = f"{path}{parent.cversion:010d}"
        elif path == "/":
            raise NodeExistsError(path)
        if path in self._nodes:
            raise NodeExistsError(path)
        node = _Node(data, zxid, self.clock.now_ms(), session.session_id if ephemeral else 0)
        name = path[slash + 1 :]  # a sequence suffix only lengthens the name
        self._nodes[path] = node
        if parent.children is None:
            parent.children = {}
        parent.children[name] = None
        old_cversion, old_pzxid = parent.cversion, parent.pzxid
        parent.cversion += 1
        parent.pzxid = zxid
        if ephemeral:
            session._ephemerals.add(path)
        if undo is not None:

            def revert() -> None:
                del self._nodes[path]
                del parent.children[name]  # type: ignore[union-attr]
                parent.cversion, parent.pzxid = old_cversion, old_pzxid
                session._ephemerals.discard(path)

            undo.append(revert)
        events.append((EventType.CREATED, path))
        events.append((EventType.CHILD, parent_path))
        return path

    def _set(self, path: str, data: bytes, expected: int, zxid: int, undo: _Undo | None, events: _Events) -> Stat:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if expected != ANY_VERSION and expected != node.version:
            raise BadVersionError(path)
        if undo is not None:
            saved = (node.data, node.version, node.mzxid, node.mtime)

            def revert() -> None:
                node.data, node.version, node.mzxid, node.mtime = saved

            undo.append(revert)
        node.data = data
        node.version += 1
        node.mzxid = zxid
        node.mtime = self.clock.now_ms()
        events.append((EventType.CHANGED, path))
        return node.stat()

    def _delete(self, path: str, expected: int, zxid: int, undo: _Undo | None, events: _Events) -> None:
        if path == "/":
            raise BadArgumentsError(path, "cannot delete the root")
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if expected != ANY_VERSION and expected != node.version:
            raise BadVersionError(path)
        if node.children:
            raise NotEmptyError(path)
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        name = path[len(parent_path) + (0 if parent_path == "/" else 1) :]
        del self._nodes[path]
        del parent.children[name]  # type: ignore[union-attr]
        old_cversion, old_pzxid = parent.cversion, parent.pzxid
        parent.cversion += 1
        parent.pzxid = zxid
        owner = self._sessions.get(node.owner) if node.owner else None
        if owner is not None:
            owner._ephemerals.discard(path)
        if undo is not None:

            def revert() -> None:
                self._nodes[path] = node
                parent.children[name] = None  # type: ignore[index]
                parent.cversion, parent.pzxid = old_cversion, old_pzxid
                if owner is not None:
                    owner._ephemerals.add(path)

            undo.append(revert)
        events.append((EventType.DELETED, path))
        events.append((EventType.CHILD, parent_path))

    def _check(self, path: str, expected: int) -> None:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if expected != ANY_VERSION and expected != node.version:
            raise BadVersionError(path)

    # ----------------------------------------------------------------------------------------- watches

    def _fire(self, events: _Events) -> None:
        data_watches, child_watches = self._data_watches, self._child_watches
        if not data_watches and not child_watches:
            return
        for kind, path in events:
            fired: dict[_Watcher, None] | None
            if kind is EventType.CHILD:
                fired = child_watches.pop(path, None)
            elif kind is EventType.DELETED:
                fired = data_watches.pop(path, None)
                kids = child_watches.pop(path, None)
                if kids:
                    fired = {**fired, **kids} if fired else kids
            else:
                fired = data_watches.pop(path, None)
            if fired:
                event = WatchedEvent(kind, path)
                for session, callback in fired:
                    session._deliver(callback, event)

    def _watch(self, table: dict[str, dict[_Watcher, None]], path: str, watcher: _Watcher) -> None:
        table.setdefault(path, {})[watcher] = None


class EmbeddedSession(Session):
    def __init__(
        self, backend: EmbeddedBackend, session_id: int, timeout_ms: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._backend = backend
        self._id = session_id
        self._timeout_ms = timeout_ms
        self._loop = loop
        self._state = SessionState.CONNECTED
        self._listeners: list[SessionListener] = []
        self._ephemerals: set[str] = set()
        self._pending: list[tuple[WatchCallback, WatchedEvent]] = []
        self._suspended_at = 0

    @property
    def session_id(self) -> int:
        return self._id

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
        self._state = state
        for listener in list(self._listeners):
            self._loop.call_soon(listener, state)

    def _deliver(self, callback: WatchCallback, event: WatchedEvent) -> None:
        if self._state is SessionState.SUSPENDED:
            self._pending.append((callback, event))
        elif self._state is SessionState.CONNECTED:
            self._loop.call_soon(callback, event)

    def _usable(self) -> EmbeddedBackend:
        state = self._state
        if state is SessionState.CONNECTED:
            return self._backend
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError(None, "session suspended")
        raise SessionExpiredError(None, f"session {state.value}")

    def _next_zxid(self) -> int:
        self._backend._zxid += 1
        return self._backend._zxid

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
        return self._create_now(path, data, ephemeral, sequential, make_parents)

    def _create_now(self, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool) -> str:
        backend = self._usable()
        events: _Events = []
        if make_parents:
            validate_path(path)
            missing: list[str] = []
            ancestor = parent_of(path)
            while ancestor not in backend._nodes:
                missing.append(ancestor)
                ancestor = parent_of(ancestor)
            for ancestor in reversed(missing):
                backend._create(ancestor, b"", False, False, self, self._next_zxid(), None, events)
        created = backend._create(path, data, ephemeral, sequential, self, self._next_zxid(), None, events)
        backend._fire(events)
        return created

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        backend = self._usable()
        node = backend._nodes.get(path)
        if node is None:
            validate_path(path)
            raise NoNodeError(path)
        if watch is not None:
            backend._watch(backend._data_watches, path, (self, watch))
        return node.data, node.stat()

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        return self._set_now(path, data, expected_version)

    def _set_now(self, path: str, data: bytes, expected_version: int) -> Stat:
        backend = self._usable()
        events: _Events = []
        stat = backend._set(path, data, expected_version, backend._zxid + 1, None, events)
        backend._zxid += 1
        backend._fire(events)
        return stat

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        backend = self._usable()
        events: _Events = []
        backend._delete(path, expected_version, backend._zxid + 1, None, events)
        backend._zxid += 1
        backend._fire(events)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return (await self.children_with_stat(path, watch))[0]

    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]:
        backend = self._usable()
        node = backend._nodes.get(path)
        if node is None:
            validate_path(path)
            raise NoNodeError(path)
        if watch is not None:
            backend._watch(backend._child_watches, path, (self, watch))
        return list(node.children or ()), node.stat()

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        backend = self._usable()
        validate_path(path)
        if watch is not None:
            backend._watch(backend._data_watches, path, (self, watch))
        node = backend._nodes.get(path)
        return None if node is None else node.stat()

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        backend = self._usable()
        zxid = backend._zxid + 1
        undo: _Undo = []
        events: _Events = []
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                if isinstance(op, Create):
                    results.append(
                        backend._create(op.path, op.data, op.ephemeral, op.sequential, self, zxid, undo, events)
                    )
                elif isinstance(op, SetData):
                    results.append(backend._set(op.path, op.data, op.expected_version, zxid, undo, events))
                elif isinstance(op, Delete):
                    backend._delete(op.path, op.expected_version, zxid, undo, events)
                    results.append(None)
                elif isinstance(op, Check):
                    backend._check(op.path, op.expected_version)
                    results.append(None)
                else:
                    raise BadArgumentsError(None, f"not a multi op: {op!r}")
            except CoordinationError as error:
                for revert in reversed(undo):
                    revert()
                error.failed_op_index = index
                raise
        backend._zxid = zxid
        backend._fire(events)
        return results

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        out: list[str | CoordinationError] = []
        for item in items:
            try:
                out.append(self._create_now(item.path, item.data, item.ephemeral, item.sequential, False))
            except (ConnectionLossError, SessionExpiredError):
                raise
            except CoordinationError as error:
                out.append(error)
        return out

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        nodes = self._usable()._nodes
        out: list[tuple[bytes, Stat] | CoordinationError] = []
        for path in paths:
            node = nodes.get(path)
            out.append(NoNodeError(path) if node is None else (node.data, node.stat()))
        return out

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        out: list[Stat | CoordinationError] = []
        for item in items:
            try:
                out.append(self._set_now(item.path, item.data, item.expected_version))
            except (ConnectionLossError, SessionExpiredError):
                raise
            except CoordinationError as error:
                out.append(error)
        return out

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        out: list[CoordinationError | None] = []
        for item in items:
            try:
                await self.delete(item.path, item.expected_version)
                out.append(None)
            except (ConnectionLossError, SessionExpiredError):
                raise
            except CoordinationError as error:
                out.append(error)
        return out

    async def close(self) -> None:
        if self._state in (SessionState.CONNECTED, SessionState.SUSPENDED):
            self._backend._end_session(self, SessionState.CLOSED)
