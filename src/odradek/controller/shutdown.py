"""Controlled shutdown (seed 001 section 10): a broker about to stop asks the controller to move its leaderships
away and take it out of the ISRs it follows in, so clients see a leader change rather than an outage.
"""

from __future__ import annotations

import logging

from odradek.controller.context import PartitionReplica, TopicPartition
from odradek.controller.election import Election
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.controller")

__all__ = ["ControlledShutdownManager"]


class ControlledShutdownManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas

    async def shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """``doControlledShutdown``: returns the partitions the broker still leads."""
        shared = self._shared
        ctx = shared.ctx
        if broker_id not in ctx.live_or_shutting_down:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not registered")
        current_epoch = ctx.broker_epochs.get(broker_id, -1)
        if broker_epoch != -1 and broker_epoch < current_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch,
                             f"broker epoch {broker_epoch} is older than {current_epoch}")
        ctx.shutting_down.add(broker_id)
        log.info("controller %d: controlled shutdown of broker %d", shared.broker_id, broker_id)
        leading: list[TopicPartition] = []
        following: list[PartitionReplica] = []
        for tp in ctx.partitions_on(broker_id):
            state = ctx.leadership.get(tp)
            if state is None or len(ctx.replicas_of(tp)) <= 1:
                continue
            if state.leader == broker_id:
                leading.append(tp)
            else:
                following.append(PartitionReplica(tp.topic, tp.partition, broker_id))
        if leading:
            await self._partitions.to(leading, PartitionState.ONLINE, Election.CONTROLLED_SHUTDOWN)
        if following:
            await self._replicas.to(following, ReplicaState.OFFLINE)
        return {
            tp for tp, s in ctx.leadership.items()
            if s.leader == broker_id and len(ctx.replicas_of(tp)) > 1
        }
