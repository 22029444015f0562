"""What every part of the controller shares: its configuration, context, state tables, store and watches.

:class:`ControllerBase` only holds state and the two helpers everything uses (posting an event, arming a watch
that posts one); the state machines (:mod:`.machines`), the operations (:mod:`.operations`) and the event loop with
election and failover (:mod:`.controller`) build on it, each in its own module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.clock import Clock
from odradek.controller.batch import RequestBatch
from odradek.controller.channels import ChannelManager, Transport
from odradek.controller.context import ControllerContext, PartitionReplica, TopicPartition
from odradek.controller.events import Event
from odradek.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
    StateTable,
)
from odradek.controller.zkstore import ControllerStore
from odradek.coordination.store import EventType, Session, WatchedEvent
from odradek.errors import ErrorCode

P = PartitionState
R = ReplicaState

__all__ = ["PREFERRED", "UNCLEAN", "ControllerBase", "PartitionResult", "ReassignmentState", "SessionSource", "flag"]

PREFERRED = 0
"""ElectLeaders ``election_type`` values, as in Kafka's ``ElectionType``."""
UNCLEAN = 1

SessionSource = Session | Callable[[], Awaitable[Session]]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's answer to ElectLeaders or AlterPartitionReassignments: a Kafka error code and message."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentState:
    """ListPartitionReassignments' answer for one partition."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def flag(value: Any) -> bool:
    """A boolean config value as Kafka reads it (``"true"`` in any case; anything else is false)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class ControllerBase:
    """Configuration and state; see :class:`odradek.controller.Controller` for the public surface."""

    def __init__(
        self,
        broker_id: int,
        session: SessionSource,
        clock: Clock,
        transport: Transport,
        config: Mapping[str, Any] | None = None,
        gate: asyncio.Event | None = None,
    ) -> None:
        """``gate``, when given, is waited on before each event: cleared, the controller stands still (a paused
        broker process) with its events queued."""
        self.broker_id = broker_id
        self._gate = gate
        self._session_source = session
        self._clock = clock
        self._transport = transport
        cfg = dict(config or {})
        self._unclean_default = flag(cfg.get("unclean.leader.election.enable", False))
        self._delete_enabled = flag(cfg.get("delete.topic.enable", True))
        self._auto_rebalance = flag(cfg.get("auto.leader.rebalance.enable", True))
        self._imbalance_pct = int(cfg.get("leader.imbalance.per.broker.percentage", 10))
        self._check_interval_s = float(cfg.get("leader.imbalance.check.interval.seconds", 300))
        self._request_timeout_ms = int(cfg.get("controller.socket.timeout.ms", 30_000))
        self._retry_backoff_ms = int(cfg.get("retry.backoff.ms", 100))
        self._listener = str(cfg.get("inter.broker.listener.name", "PLAINTEXT"))

        self._session: Session | None = None
        self._store: ControllerStore | None = None
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop_task: asyncio.Task[None] | None = None
        self._timer_tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

        self._active = False
        self._active_id: int | None = None
        self._generation = 0
        self._watchers: dict[object, Callable[[WatchedEvent], None]] = {}
        self.ctx = ControllerContext()
        self.partition_states: StateTable[TopicPartition, PartitionState] = StateTable(
            "Partition", PARTITION_VALID_PREVIOUS, P.NON_EXISTENT)
        self.replica_states: StateTable[PartitionReplica, ReplicaState] = StateTable(
            "Replica", REPLICA_VALID_PREVIOUS, R.NON_EXISTENT)
        self._channels: ChannelManager | None = None
        self._batch = RequestBatch()
        self.events_processed = 0

    @property
    def store(self) -> ControllerStore:
        assert self._store is not None
        return self._store

    def _post(self, event: Event) -> None:
        if not self._stopped:
            self._queue.put_nowait(event)

    def _watch(self, key: object, make: Callable[[], Event]) -> Callable[[WatchedEvent], None]:
        """A watch callback that posts ``make()`` while this controller generation lasts (one per key, so
        re-arming a watch does not stack callbacks)."""
        callback = self._watchers.get(key)
        if callback is None:
            generation = self._generation

            def callback(event: WatchedEvent) -> None:
                if event.type is not EventType.SESSION and generation == self._generation and self._active:
                    self._post(make())

            self._watchers[key] = callback
        return callback
