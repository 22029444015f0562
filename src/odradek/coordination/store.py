"""The coordination store's contract: ZooKeeper's data model, seen from one asyncio event loop.

Both backends (:mod:`.embedded` and :mod:`.zookeeper`) implement :class:`Backend` and :class:`Session` and
pass the same contract tests, so the controller and brokers never know which one they stand on.

Design choices that the rest of odradek relies on:

* **Sessions, not a global client.** A backend hands out sessions; ephemeral znodes belong to the session
  that made them (``Stat.ephemeral_owner == session.session_id``) and vanish when it closes or expires. A
  broker keeps one session for its registration and the controller election, as Kafka's ``KafkaZkClient``
  does.
* **Watches are callbacks invoked on the owner's event loop.** The controller serialises every event through
  one asyncio queue; a callback that runs on that loop can ``put_nowait`` into it directly, with no locks and
  no task per watch. One-shot futures would need a task per outstanding watch and would fire in an order that
  depends on task scheduling, whereas callbacks fire in the order ZooKeeper delivers the events.
* **A watch fires once.** Registering the same callback twice on the same path and kind (data or children)
  leaves one watch, as in ZooKeeper, where watchers are kept in a set. When the session expires, every
  outstanding watch of that session fires once with :attr:`EventType.SESSION` so that nobody waits forever.
* **Connection loss is not expiry.** While a session is suspended every call fails fast with
  :class:`ConnectionLossError` and its watches stay armed; when it reconnects in time nothing is lost. When it
  expires, it is dead for good (:class:`SessionExpiredError`) and the owner opens a new session, as Kafka's
  ``handleNewSession`` does.
* **Bulk calls pipeline.** ``create_many`` / ``get_many`` / ``set_many`` issue every request before awaiting
  any reply, which is what gave Kafka 1.1 its controller speed-up; they return one result or error per
  request rather than raising, because a controller acting on 10,000 partitions must handle each failure
  separately.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Self, TypeAlias

__all__ = [
    "ANY_VERSION",
    "Backend",
    "BadArgumentsError",
    "BadVersionError",
    "Check",
    "ConnectionLossError",
    "CoordinationError",
    "Create",
    "Delete",
    "EventType",
    "ForwardingSession",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "OpResult",
    "Session",
    "SessionExpiredError",
    "SessionListener",
    "SessionState",
    "SetData",
    "Stat",
    "WatchCallback",
    "WatchedEvent",
    "join_path",
    "parent_of",
    "validate_path",
]

ANY_VERSION = -1
"""``expected_version`` that matches any version, as in ZooKeeper."""


# ---------------------------------------------------------------------------------------------- errors


class CoordinationError(Exception):
    """A failure with ZooKeeper's meaning; ``path`` names the znode involved when there is one."""

    def __init__(self, path: str | None = None, message: str | None = None) -> None:
        self.path = path
        self.failed_op_index: int | None = None
        text = message or self.__class__.__name__
        super().__init__(f"{text}: {path}" if path else text)


class NoNodeError(CoordinationError):
    """The znode (or, for a create, its parent) does not exist."""


class NodeExistsError(CoordinationError):
    """A create found the znode already there."""


class BadVersionError(CoordinationError):
    """A compare-and-set found a different version than expected: somebody else wrote first."""


class NotEmptyError(CoordinationError):
    """A delete of a znode that still has children."""


class NoChildrenForEphemeralsError(CoordinationError):
    """A create under an ephemeral znode, which ZooKeeper forbids."""


class BadArgumentsError(CoordinationError):
    """An invalid path or argument."""


class SessionExpiredError(CoordinationError):
    """The session is gone: its ephemerals are deleted and it can never be used again."""


class ConnectionLossError(CoordinationError):
    """The session is (perhaps only for now) cut off; the outcome of an in-flight write is unknown."""


# ---------------------------------------------------------------------------------------------- values


class Stat(NamedTuple):
    """A znode's metadata, with ZooKeeper's field meanings (zxids are store-wide transaction ids).

    A tuple rather than a dataclass: a tuple of ints drops out of the cyclic garbage collector's sight, which
    matters when a controller holds the stats of 100,000 partitions.
    """

    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


class EventType(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"
    SESSION = "session"
    """The watch can no longer fire for a node event because its session expired."""


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    type: EventType
    path: str | None


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    CLOSED = "closed"


WatchCallback: TypeAlias = Callable[[WatchedEvent], None]
SessionListener: TypeAlias = Callable[[SessionState], None]


# ------------------------------------------------------------------------------------------- multi ops


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    expected_version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    expected_version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """Fails the whole transaction unless ``path`` is at ``expected_version`` (Kafka fences on
    /controller_epoch)."""

    path: str
    expected_version: int


Op: TypeAlias = Create | SetData | Delete | Check
OpResult: TypeAlias = str | Stat | None
"""Per op: the created path, the new stat of a set, or ``None`` for delete and check."""


# ----------------------------------------------------------------------------------------------- paths


def validate_path(path: str) -> str:
    """Reject what ZooKeeper rejects, so a path that works embedded also works on a real ensemble."""
    if not path or path[0] != "/":
        raise BadArgumentsError(path, "path must start with /")
    if path == "/":
        return path
    if path[-1] == "/" or "//" in path or "\x00" in path:
        raise BadArgumentsError(path, "invalid path")
    if "/." in path and any(part in (".", "..") for part in path.split("/")):
        raise BadArgumentsError(path, "relative path element")
    return path


def parent_of(path: str) -> str:
    idx = path.rfind("/")
    return "/" if idx == 0 else path[:idx]


def join_path(parent: str, child: str) -> str:
    return parent + child if parent.endswith("/") else f"{parent}/{child}"


# ------------------------------------------------------------------------------------------- interface


class Session(abc.ABC):
    """One ZooKeeper session, used from the event loop that created it."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The ephemeral owner id of every ephemeral znode this session creates."""

    @property
    @abc.abstractmethod
    def timeout_ms(self) -> int:
        """The negotiated session timeout."""

    @property
    @abc.abstractmethod
    def state(self) -> SessionState: ...

    @abc.abstractmethod
    def add_listener(self, listener: SessionListener) -> None:
        """Call ``listener`` on the owner's loop at every state change (suspended, connected, expired,
        closed)."""

    @abc.abstractmethod
    def remove_listener(self, listener: SessionListener) -> None: ...

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode and return its path (with the sequence suffix when ``sequential``).

        ``make_parents`` creates missing ancestors as empty persistent znodes; an ancestor created
        concurrently by someone else is fine.
        """

    @abc.abstractmethod
    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """Data and stat; ``watch`` fires on the next change or deletion (not set if the node is missing)."""

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        """Compare-and-set on the znode's version; returns the new stat."""

    @abc.abstractmethod
    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None: ...

    @abc.abstractmethod
    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Child names (unordered, as in ZooKeeper); ``watch`` fires on a child change or the node's
        deletion."""

    @abc.abstractmethod
    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]: ...

    @abc.abstractmethod
    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        """Stat or ``None``; ``watch`` is set either way and fires on creation, change or deletion."""

    @abc.abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically or not at all.

        On failure raises the first failing op's error, with ``failed_op_index`` set, and nothing has changed.
        """

    @abc.abstractmethod
    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        """Pipelined creates (no parents made): each created path, or that create's error."""

    @abc.abstractmethod
    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        """Pipelined reads: each (data, stat), or that read's error."""

    @abc.abstractmethod
    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        """Pipelined compare-and-sets: each new stat, or that write's error."""

    @abc.abstractmethod
    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        """Pipelined deletes: ``None`` for each deleted znode, or that delete's error."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session now: its ephemerals go, its watches are dropped without firing."""

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it; a missing node is fine (someone else deleted it first)."""
        try:
            kids = await self.children(path)
        except NoNodeError:
            return
        for kid in kids:
            await self.delete_recursive(join_path(path, kid))
        try:
            await self.delete(path)
        except NoNodeError:
            pass

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its ancestors as empty persistent znodes if missing."""
        validate_path(path)
        if path == "/":
            return
        try:
            await self.create(path, b"", make_parents=True)
        except NodeExistsError:
            pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Backend(abc.ABC):
    """Where sessions come from; fault hooks are part of the contract so fault tests run on either backend."""

    @abc.abstractmethod
    async def session(self, timeout_ms: int = 18_000) -> Session:
        """Open a connected session (Kafka's default ``zookeeper.session.timeout.ms`` is 18 s)."""

    @abc.abstractmethod
    async def expire_session(self, session: Session) -> None:
        """Make the store expire ``session`` now, as if its owner had been silent past its timeout."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every session this backend opened."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class ForwardingSession(Session):
    """A session that hands every call to ``inner``: the base of wrappers that change a few of them (the
    controller's :class:`~odradek.coordination.retry.RetryingSession`, tests' fault injectors)."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner

    @property
    def session_id(self) -> int:
        return self.inner.session_id

    @property
    def timeout_ms(self) -> int:
        return self.inner.timeout_ms

    @property
    def state(self) -> SessionState:
        return self.inner.state

    def add_listener(self, listener: SessionListener) -> None:
        self.inner.add_listener(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self.inner.remove_listener(listener)

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
                     make_parents: bool = False) -> str:
        return await self.inner.create(path, data, ephemeral=ephemeral, sequential=sequential,
                                       make_parents=make_parents)

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        return await self.inner.get(path, watch)

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        return await self.inner.set(path, data, expected_version)

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        await self.inner.delete(path, expected_version)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return await self.inner.children(path, watch)

    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]:
        return await self.inner.children_with_stat(path, watch)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        return await self.inner.exists(path, watch)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return await self.inner.multi(ops)

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        return await self.inner.create_many(items)

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        return await self.inner.get_many(paths)

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        return await self.inner.set_many(items)

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        return await self.inner.delete_many(items)

    async def close(self) -> None:
        await self.inner.close()
