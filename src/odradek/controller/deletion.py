"""Topic deletion (seed 001 section 6, Kafka's ``TopicDeletionManager``): the queue of topics to delete, which of
them may not proceed yet, and the replica deletions that move each forward.

A topic's deletion waits while a reassignment or preferred election touches it or one of its replicas is on a dead
broker; it ends, once every replica answered its StopReplica (delete), with one plan that deletes the topic's
znodes, after which the context forgets the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from odradek.controller.context import PartitionReplica
from odradek.controller.events import StopReplicaDone, TopicDeletion
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.plan import Plan
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState

__all__ = ["DeletionManager"]


class DeletionManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas

    async def on_request(self) -> None:
        """``DeleteTopicsListener``: new entries under ``/admin/delete_topics``."""
        shared = self._shared
        ctx = shared.ctx
        requested = await shared.store.topics_to_delete(shared.watch("delete", TopicDeletion))
        missing = requested - ctx.all_topics
        if missing:
            log.warning("controller %d: ignoring deletion of unknown topics %s", shared.broker_id, sorted(missing))
            await shared.applier.apply(Plan(consumed=[f"/admin/delete_topics/{t}" for t in missing]))
        requested -= missing
        if not requested:
            return
        if not shared.config.delete_enabled:
            log.info("controller %d: delete.topic.enable is false; dropping deletion of %s", shared.broker_id,
                     sorted(requested))
            await shared.applier.apply(Plan(consumed=[f"/admin/delete_topics/{t}" for t in requested]))
            return
        new = requested - ctx.topics_to_delete
        for topic in new:
            if any(tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress):
                ctx.topics_ineligible_for_deletion.add(topic)
        ctx.topics_to_delete |= new
        if new:
            log.info("controller %d: deleting topics %s", shared.broker_id, sorted(new))
            await self.resume()

    async def resume(self, unblock: Iterable[str] = ()) -> None:
        """``resumeDeletionForTopics`` + one pass of ``DeleteTopicsThread.doWork``."""
        ctx = self._shared.ctx
        table = self._shared.replica_states
        for topic in unblock:
            if topic in ctx.topics_to_delete and not any(
                tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress
            ):
                ctx.topics_ineligible_for_deletion.discard(topic)
        for topic in sorted(ctx.topics_to_delete):
            replicas = ctx.replicas_for(ctx.partitions_of(topic))
            states = [table.get(r) for r in replicas]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                await self._complete(topic)
                continue
            if any(s is R.DELETION_STARTED for s in states):
                continue
            if any(s is R.DELETION_INELIGIBLE for s in states) and topic not in ctx.topics_ineligible_for_deletion:
                # Retry: the replicas that failed go back to Offline and deletion starts over.
                await self._replicas.to([r for r in replicas if table.get(r) is R.DELETION_INELIGIBLE], R.OFFLINE)
                ctx.topics_with_deletion_started.discard(topic)
            if topic in ctx.topics_ineligible_for_deletion:
                log.info("controller %d: deletion of %s waits (ineligible)", self._shared.broker_id, topic)
                continue
            if topic not in ctx.topics_with_deletion_started:
                await self._start(topic)

    async def _start(self, topic: str) -> None:
        shared = self._shared
        ctx = shared.ctx
        table = shared.replica_states
        ctx.topics_with_deletion_started.add(topic)
        partitions = ctx.partitions_of(topic)
        shared.batch.add_update_metadata(ctx.live_or_shutting_down, partitions)
        replicas = ctx.replicas_for(partitions)
        dead = [r for r in replicas if r.replica not in ctx.live_brokers]
        retry = [r for r in replicas
                 if r.replica in ctx.live_brokers and table.get(r) is not R.DELETION_SUCCESSFUL]
        await self._replicas.to([r for r in dead if table.get(r) in (R.NEW, R.ONLINE)], R.OFFLINE)
        await self._replicas.to([r for r in dead if table.get(r) is R.OFFLINE], R.DELETION_INELIGIBLE)
        await self._replicas.to(retry, R.OFFLINE)
        await self._replicas.to(retry, R.DELETION_STARTED)
        if dead:
            log.info("controller %d: deletion of %s is ineligible while brokers %s are down", shared.broker_id,
                     topic, sorted({r.replica for r in dead}))
            ctx.topics_ineligible_for_deletion.add(topic)

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        """Replicas of topics being deleted went offline with their broker: their deletion cannot finish now."""
        ctx = self._shared.ctx
        replicas = list(replicas)
        table = self._shared.replica_states
        await self._replicas.to([r for r in replicas if table.get(r) is R.DELETION_STARTED], R.DELETION_INELIGIBLE)
        ctx.topics_ineligible_for_deletion |= {r.topic for r in replicas} & ctx.topics_to_delete
        await self.resume()

    async def on_stop_replica_done(self, event: StopReplicaDone) -> None:
        ctx = self._shared.ctx
        table = self._shared.replica_states
        errors = {(e.topic, e.partition): e.error_code for e in event.response.partition_errors}
        failed: list[PartitionReplica] = []
        succeeded: list[PartitionReplica] = []
        for tp in event.partitions:
            if not ctx.is_queued_for_deletion(tp.topic):
                continue
            replica = PartitionReplica(tp.topic, tp.partition, event.broker)
            if table.get(replica) is not R.DELETION_STARTED:
                continue
            if event.response.error_code != 0 or errors.get((tp.topic, tp.partition), 0) != 0:
                failed.append(replica)
            else:
                succeeded.append(replica)
        if failed:
            await self._replicas.to(failed, R.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r.topic for r in failed}
        if succeeded:
            await self._replicas.to(succeeded, R.DELETION_SUCCESSFUL)
        await self.resume({r.topic for r in failed})

    async def _complete(self, topic: str) -> None:
        """``completeDeleteTopic``: states to NonExistent, then the znodes go and the context forgets the topic."""
        ctx = self._shared.ctx
        partitions = ctx.partitions_of(topic)
        await self._replicas.to(ctx.replicas_for(partitions), R.NON_EXISTENT)
        await self._partitions.to(partitions, P.OFFLINE)
        await self._partitions.to(partitions, P.NON_EXISTENT)
        await self._shared.applier.apply(Plan(deleted_topics=[topic]))
        log.info("controller %d: deletion of topic %s completed", self._shared.broker_id, topic)
