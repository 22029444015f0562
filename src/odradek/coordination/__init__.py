"""The ZooKeeper data model that the controller and brokers stand on, embedded or on a real ZooKeeper.

Start from :class:`~odradek.coordination.store.Backend`: ``EmbeddedBackend()`` for one-process clusters and
tests, ``ZooKeeperBackend("host:2181", "/chroot")`` for brokers on several machines. :mod:`.znodes` holds
Kafka's paths and JSON codecs.
"""

from odradek.coordination.embedded import EmbeddedBackend, EmbeddedSession
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
    ForwardingSession,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    Session,
    SessionExpiredError,
    SessionState,
    SetData,
    Stat,
    WatchedEvent,
)
from odradek.coordination.zookeeper import ZooKeeperBackend, ZooKeeperSession

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
    "EmbeddedBackend",
    "EmbeddedSession",
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
    "SessionState",
    "SetData",
    "Stat",
    "WatchedEvent",
    "ZooKeeperBackend",
    "ZooKeeperSession",
]
