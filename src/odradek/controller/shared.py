"""What the controller's managers share, passed to each explicitly: the context, the state tables, the applier,
the request batch, the store, the broker channels, the event poster, watches and timers.

Seed 001 section 1 lists the same parts as ``KafkaController``'s fields; here they are one small object the
:class:`~odradek.controller.Controller` owns and the managers (:mod:`.brokers`, :mod:`.topics`, :mod:`.deletion`,
:mod:`.reassignment`, :mod:`.preferred`, :mod:`.shutdown`, :mod:`.isr`) hold, instead of a base class they all
inherit. Only the event loop's task touches it, one event at a time, so nothing here locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from odradek.clock import Clock
from odradek.controller.applier import Applier
from odradek.controller.batch import RequestBatch
from odradek.controller.channels import ChannelManager
from odradek.controller.config import ControllerConfig
from odradek.controller.context import ControllerContext, PartitionReplica, TopicPartition
from odradek.controller.events import Event
from odradek.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
    StateTable,
)
from odradek.controller.transitions import TransitionLog
from odradek.controller.zkstore import ControllerStore
from odradek.coordination.store import EventType, WatchedEvent

__all__ = ["Shared"]


async def _nothing_to_send() -> None:
    """A Shared outside a controller (a test's) sends nothing."""


class Shared:
    def __init__(self, broker_id: int, config: ControllerConfig, clock: Clock,
                 post: Callable[[Event], None]) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.post = post
        self.ctx = ControllerContext()
        self.partition_states: StateTable[TopicPartition, PartitionState] = StateTable(
            "Partition", PARTITION_VALID_PREVIOUS, PartitionState.NON_EXISTENT)
        self.replica_states: StateTable[PartitionReplica, ReplicaState] = StateTable(
            "Replica", REPLICA_VALID_PREVIOUS, ReplicaState.NON_EXISTENT)
        self.transitions = TransitionLog(broker_id)
        """The recent state changes, for the web console (outlives resignations)."""
        self.partition_states.on_change = self._partition_changed
        self.replica_states.on_change = self._replica_changed
        self.unclean_elections = 0
        """Leaders elected from outside the ISR while this broker was controller (Kafka's UncleanLeaderElections)."""
        self.batch = RequestBatch()
        self.send_batch: Callable[[], Awaitable[None]] = _nothing_to_send
        """Sends what :attr:`batch` holds now, before the event ends (the controller sets it): Kafka's managers
        call ``sendRequestsToBrokers`` mid-event where a request must reach a broker before the next ones."""
        self.applier = Applier(self)
        self.store_or_none: ControllerStore | None = None
        self.channels: ChannelManager | None = None
        """The connections to the brokers, while active."""
        self.active = False
        self.generation = 0
        """Bumped on every failover and resignation: watches and timers of an older generation do nothing."""
        self.watchers: dict[object, Callable[[WatchedEvent], None]] = {}
        self._timers: set[asyncio.Task[None]] = set()

    def _partition_changed(self, tp: TopicPartition, old: PartitionState, new: PartitionState) -> None:
        # the applier has already committed an election's outcome to the context when the machine moves the state
        leader = self.ctx.leadership.get(tp) if new is PartitionState.ONLINE else None
        self.transitions.record(self.clock.now_ms(), self.ctx.epoch, "Partition", tp, old, new, leader)

    def _replica_changed(self, replica: PartitionReplica, old: ReplicaState, new: ReplicaState) -> None:
        self.transitions.record(self.clock.now_ms(), self.ctx.epoch, "Replica", replica, old, new)

    def note(self, subject: str, source: str, target: str, detail: str = "") -> None:
        """A controller-level change for the console's ring (elected, resigned)."""
        self.transitions.record(self.clock.now_ms(), self.ctx.epoch, "Controller", subject, source, target, detail)

    @property
    def store(self) -> ControllerStore:
        assert self.store_or_none is not None
        return self.store_or_none

    def watch(self, key: object, make: Callable[[], Event]) -> Callable[[WatchedEvent], None]:
        """A watch callback that posts ``make()`` while this controller generation lasts (one per key, so
        re-arming a watch does not stack callbacks)."""
        callback = self.watchers.get(key)
        if callback is None:
            generation = self.generation

            def callback(event: WatchedEvent) -> None:
                if event.type is not EventType.SESSION and generation == self.generation and self.active:
                    self.post(make())

            self.watchers[key] = callback
        return callback

    def start_timer(self, timer: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``timer`` (which sleeps on ``self.clock``) until it ends or the controller resigns."""
        task = asyncio.get_running_loop().create_task(timer, name=name)
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def cancel_timers(self) -> None:
        for task in list(self._timers):
            task.cancel()
        self._timers.clear()

    def reset(self, ctx: ControllerContext) -> None:
        """A new term (failover) or none (resignation): fresh context, tables and batch; old watches disarmed."""
        self.generation += 1
        self.watchers.clear()
        self.ctx = ctx
        self.batch = RequestBatch()
        for table in (self.partition_states, self.replica_states):
            table.clear()
            table.controller_id = self.broker_id
            table.epoch = ctx.epoch
