"""Failed log directories (Kafka's ``LogDirEventNotificationHandler`` and ``onBrokerLogDirFailure``, KIP-112).

A broker whose log directory failed leaves a ``/log_dir_event_notification/log_dir_event_*`` znode naming only
itself; the controller then sends it LeaderAndIsr for every replica it holds and learns from the answers
(KAFKA_STORAGE_ERROR) which replicas are offline. Those are recorded in the context (an offline election never
picks them) and handled as Kafka's ``onReplicasBecomeOffline`` does: partitions they led go offline and are elected
again among the online replicas, then the replicas go offline (out of the ISR). A broker that restarts starts with
no offline replica again (BrokerManager clears them).
"""

from __future__ import annotations

import logging

from odradek.controller.events import LogDirEventNotification
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.plan import Plan
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState
from odradek.placement.model import TopicPartition

log = logging.getLogger("odradek.controller")

__all__ = ["LogDirFailureManager"]


class LogDirFailureManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas

    async def arm(self) -> None:
        """Watch for notifications (failover); the first batch is handled as an event of its own."""
        shared = self._shared
        await shared.store.log_dir_event_notifications(shared.watch("log-dirs", LogDirEventNotification))

    async def on_notification(self) -> None:
        shared = self._shared
        ctx = shared.ctx
        paths, brokers = await shared.store.log_dir_event_notifications(
            shared.watch("log-dirs", LogDirEventNotification))
        try:
            live = sorted(b for b in brokers if b in ctx.live_brokers)
            if live:
                log.info("controller %d: log directory failure on brokers %s", shared.broker_id, live)
                # LeaderAndIsr for every replica they hold: the answers say which are offline
                await self._replicas.to(ctx.replicas_on(live), ReplicaState.ONLINE)
        finally:
            await shared.applier.apply(Plan(consumed=paths))

    async def on_storage_errors(self, broker: int, partitions: set[TopicPartition]) -> None:
        """``onReplicasBecomeOffline`` for the replicas ``broker`` reported on a failed log directory."""
        ctx = self._shared.ctx
        if broker not in ctx.live_brokers:
            return
        known = ctx.replicas_on_offline_dirs.setdefault(broker, set())
        new = sorted(tp for tp in partitions - known if tp in ctx.assignments)
        known.update(new)
        if not new:
            return
        log.info("controller %d: replicas of %d partitions on broker %d are offline (failed log directory)",
                 self._shared.broker_id, len(new), broker)
        led = [tp for tp in new if ctx.leadership.get(tp) is not None and ctx.leadership[tp].leader == broker
               and not ctx.is_queued_for_deletion(tp.topic)]
        await self._partitions.to(led, PartitionState.OFFLINE)
        await self._partitions.trigger_online()
        await self._replicas.to([r for r in ctx.replicas_on([broker]) if r.tp in set(new)
                                 and not ctx.is_queued_for_deletion(r.topic)], ReplicaState.OFFLINE)
        self._shared.batch.add_update_metadata(ctx.live_or_shutting_down, new)
