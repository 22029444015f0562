"""The controller's operations: reassignment, preferred election and auto rebalance, controlled shutdown, deletion.

Seed 001 sections 6, 7, 8.3, 9.2 and 10, each as methods that run inside one event and drive the state machines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from odradek.controller.base import PREFERRED, UNCLEAN, PartitionResult
from odradek.controller.context import LeaderIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from odradek.controller.election import Election
from odradek.controller.events import (
    PreferredZnode,
    ReassignmentIsrChange,
    ReassignmentZnode,
    StopReplicaDone,
    TopicDeletion,
)
from odradek.controller.machines import StateMachines
from odradek.controller.states import PartitionState, ReplicaState
from odradek.coordination.znodes import PREFERRED_REPLICA_ELECTION
from odradek.errors import ErrorCode, KafkaError
from odradek.placement import imbalanced_brokers

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState


__all__ = ["Operations"]


class Operations(StateMachines):
    async def _on_reassignment_znode(self) -> None:
        ctx = self.ctx
        requested = await self.store.reassignments(self._watch("reassign", ReassignmentZnode))
        for tp, target in sorted(requested.items()):
            if tp in ctx.being_reassigned:
                continue
            outcome = await self._initiate_reassignment(tp, target)
            if outcome.error is ErrorCode.none and tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
            elif outcome.error is not ErrorCode.none:
                log.error("controller %d: reassignment of %s to %s refused: %s", self.broker_id, tp,
                          list(target), outcome.message)
        await self._rewrite_reassignment_znode(requested)

    async def _rewrite_reassignment_znode(self, requested: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Drop partitions that finished or were refused from ``/admin/reassign_partitions``."""
        ctx = self.ctx
        remaining = {tp: t for tp, t in requested.items() if tp in ctx.reassignment_from_znode}
        if remaining != dict(requested) or not remaining:
            await self.store.write_reassignments(remaining)

    async def _alter_reassignments(
        self, wanted: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        for tp, target in sorted(wanted.items()):
            if target is None:
                if tp not in ctx.being_reassigned:
                    results[tp] = PartitionResult(ErrorCode.no_reassignment_in_progress,
                                                  f"no reassignment of {tp} in progress")
                    continue
                origin = ctx.assignments[tp].origin
                ctx.being_reassigned[tp] = origin
                await self._on_partition_reassignment(tp)
                results[tp] = PartitionResult(ErrorCode.none)
            else:
                results[tp] = await self._initiate_reassignment(tp, target)
        return results

    async def _initiate_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> PartitionResult:
        ctx = self.ctx
        ra = ctx.assignments.get(tp)
        if ra is None:
            return PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
        if ctx.is_queued_for_deletion(tp.topic):
            return PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp.topic} is being deleted")
        if not target or len(set(target)) != len(target):
            return PartitionResult(ErrorCode.invalid_replica_assignment, f"invalid replica list {list(target)}")
        unknown = [b for b in target if b not in ctx.live_brokers]
        if unknown:
            return PartitionResult(ErrorCode.invalid_replica_assignment,
                                   f"brokers {unknown} are not registered")
        if tuple(target) == ra.replicas and not ra.is_reassigning:
            return PartitionResult(ErrorCode.none, "already assigned")
        ctx.being_reassigned[tp] = tuple(target)
        ctx.topics_ineligible_for_deletion.add(tp.topic)
        await self._on_partition_reassignment(tp)
        return PartitionResult(ErrorCode.none)

    async def _watch_reassigning_state(self, tp: TopicPartition) -> None:
        state = await self.store.state_with_watch(
            tp, self._watch(("reassign-isr", tp), lambda: ReassignmentIsrChange(tp)))
        if state is not None:
            self.ctx.leadership[tp] = state

    async def _on_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if tp not in self.ctx.being_reassigned:
            return
        await self._watch_reassigning_state(tp)
        await self._maybe_complete_reassignment(tp)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        target = self.ctx.being_reassigned.get(tp)
        state = self.ctx.leadership.get(tp)
        if target is not None and state is not None and set(target) <= set(state.isr):
            await self._on_partition_reassignment(tp)

    async def _on_partition_reassignment(self, tp: TopicPartition) -> None:
        """Seed 001 section 7 (``onPartitionReassignment``): phase one until every RAR replica is in the ISR,
        phase two once they all are."""
        ctx = self.ctx
        target = ctx.being_reassigned[tp]
        ra = ctx.assignments[tp]
        origin = ra.origin
        await self._watch_reassigning_state(tp)
        state = ctx.leadership.get(tp)
        if state is None:
            log.error("controller %d: cannot reassign %s: it has no leader and ISR", self.broker_id, tp)
            return
        if not set(target) <= set(state.isr):
            union = tuple(target) + tuple(r for r in origin if r not in target)
            adding = tuple(r for r in target if r not in origin)
            removing = tuple(r for r in origin if r not in target)
            new_ra = ReplicaAssignment(union, adding, removing)
            if new_ra != ra:
                await self._write_assignment(tp, new_ra)
            # Bump the leader epoch so every replica, old and new, learns the new replica set.
            await self._bump_leader_epoch(tp, union)
            await self._replicas_to(
                [PartitionReplica(tp.topic, tp.partition, r) for r in adding
                 if self.replica_states.get(PartitionReplica(tp.topic, tp.partition, r)) is R.NON_EXISTENT],
                R.NEW)
            log.info("controller %d: reassignment of %s to %s waits for %s to join the ISR %s", self.broker_id,
                     tp, list(target), [r for r in target if r not in state.isr], list(state.isr))
            return
        # Phase two: every target replica is in sync.
        await self._replicas_to([PartitionReplica(tp.topic, tp.partition, r) for r in target], R.ONLINE)
        ctx.assignments[tp] = ReplicaAssignment(tuple(target))
        state = ctx.leadership[tp]
        if state.leader not in target or state.leader not in ctx.live_broker_ids:
            await self._elect([tp], Election.REASSIGN)
        else:
            await self._bump_leader_epoch(tp, target)
        old = [PartitionReplica(tp.topic, tp.partition, r) for r in ra.replicas if r not in target]
        if old:
            await self._replicas_to(old, R.OFFLINE)
            await self._replicas_to(old, R.DELETION_STARTED)
            await self._replicas_to(old, R.DELETION_SUCCESSFUL)
            await self._replicas_to(old, R.NON_EXISTENT)
        ctx.assignments[tp] = ReplicaAssignment(tuple(target))
        await self._write_assignment(tp, ctx.assignments[tp])
        del ctx.being_reassigned[tp]
        if tp in ctx.reassignment_from_znode:
            ctx.reassignment_from_znode.discard(tp)
            remaining = await self.store.reassignments(self._watch("reassign", ReassignmentZnode))
            remaining.pop(tp, None)
            await self.store.write_reassignments(
                {p: t for p, t in remaining.items() if p in ctx.reassignment_from_znode})
        self._batch.add_update_metadata(ctx.live_or_shutting_down, [tp])
        log.info("controller %d: reassignment of %s to %s completed", self.broker_id, tp, list(target))
        await self._resume_deletion({tp.topic})

    async def _write_assignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        ctx = self.ctx
        ctx.assignments[tp] = ra
        topic_assignments = {p.partition: ctx.assignments[p] for p in ctx.partitions_of(tp.topic)}
        await self.store.write_topic(tp.topic, topic_assignments, ctx.topic_ids.get(tp.topic))

    async def _bump_leader_epoch(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """``updateLeaderEpochAndSendRequest``: same leader and ISR, epoch + 1, told to ``recipients``."""
        for _attempt in range(10):
            state = self.ctx.leadership[tp]
            bumped = LeaderIsr(state.leader, state.leader_epoch + 1, state.isr, self.ctx.epoch, state.zk_version)
            written = await self._write_states({tp: bumped})
            if tp in written:
                self._batch.add_leader_and_isr(self.ctx, recipients, tp, written[tp])
                return

    async def _on_preferred_znode(self) -> None:
        ctx = self.ctx
        requested = await self.store.preferred_elections(self._watch("preferred", PreferredZnode))
        if requested is None:
            return
        partitions = {tp for tp in requested - ctx.preferred_election_in_progress
                      if not ctx.is_queued_for_deletion(tp.topic)}
        await self._preferred_election(partitions, from_znode=True)

    async def _preferred_election(
        self, partitions: set[TopicPartition], from_znode: bool = False
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        ctx.preferred_election_in_progress |= partitions
        topics = {tp.topic for tp in partitions}
        ctx.topics_ineligible_for_deletion |= topics & ctx.topics_to_delete
        try:
            known = [tp for tp in partitions if tp in ctx.assignments]
            results = await self._partitions_to(known, P.ONLINE, Election.PREFERRED)
            for tp in partitions:
                if tp not in ctx.assignments:
                    results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            return results
        finally:
            ctx.preferred_election_in_progress -= partitions
            if from_znode:
                await self.store.delete_fenced(PREFERRED_REPLICA_ELECTION)
            await self._resume_deletion(topics)

    async def _elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        wanted = sorted(ctx.assignments) if partitions is None else partitions
        if election_type == PREFERRED:
            return await self._preferred_election(set(wanted))
        if election_type != UNCLEAN:
            raise KafkaError(ErrorCode.invalid_request, f"unknown election type {election_type}")
        results: dict[TopicPartition, PartitionResult] = {}
        candidates = []
        for tp in wanted:
            state = ctx.leadership.get(tp)
            if tp not in ctx.assignments or state is None:
                results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            elif state.leader in ctx.live_broker_ids:
                results[tp] = PartitionResult(ErrorCode.election_not_needed, f"{tp} has leader {state.leader}")
            else:
                candidates.append(tp)
        results.update(await self._partitions_to(candidates, P.ONLINE, Election.OFFLINE, force_unclean=True))
        return results

    async def _on_auto_rebalance(self) -> None:
        """``checkAndTriggerAutoLeaderRebalance``: per preferred broker, strictly above the percentage."""
        ctx = self.ctx
        if ctx.being_reassigned or ctx.preferred_election_in_progress:
            return
        assignments: dict[object, Sequence[int]] = {
            tp: ra.replicas for tp, ra in ctx.assignments.items() if not ctx.is_queued_for_deletion(tp.topic)
        }
        leaders: dict[object, int] = {tp: s.leader for tp, s in ctx.leadership.items()}
        candidates: set[TopicPartition] = set()
        for broker, partitions in imbalanced_brokers(assignments, leaders, self._imbalance_pct).items():
            if broker not in ctx.live_broker_ids:
                continue
            for tp in partitions:
                assert isinstance(tp, TopicPartition)
                state = ctx.leadership.get(tp)
                if state is not None and broker in state.isr:
                    candidates.add(tp)
        if candidates:
            log.info("controller %d: auto rebalance moves %d leaderships back to preferred replicas",
                     self.broker_id, len(candidates))
            await self._preferred_election(candidates)

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not registered")
        current_epoch = ctx.broker_epochs.get(broker_id, -1)
        if broker_epoch != -1 and broker_epoch < current_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch,
                             f"broker epoch {broker_epoch} is older than {current_epoch}")
        ctx.shutting_down.add(broker_id)
        log.info("controller %d: controlled shutdown of broker %d", self.broker_id, broker_id)
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
            await self._partitions_to(leading, P.ONLINE, Election.CONTROLLED_SHUTDOWN)
        if following:
            await self._replicas_to(following, R.OFFLINE)
        return {
            tp for tp, s in ctx.leadership.items()
            if s.leader == broker_id and len(ctx.replicas_of(tp)) > 1
        }

    async def _on_topic_deletion_request(self) -> None:
        ctx = self.ctx
        requested = await self.store.topics_to_delete(self._watch("delete", TopicDeletion))
        missing = requested - ctx.all_topics
        if missing:
            log.warning("controller %d: ignoring deletion of unknown topics %s", self.broker_id, sorted(missing))
            await self.store.delete_paths(f"/admin/delete_topics/{t}" for t in missing)
        requested -= missing
        if not requested:
            return
        if not self._delete_enabled:
            log.info("controller %d: delete.topic.enable is false; dropping deletion of %s", self.broker_id,
                     sorted(requested))
            await self.store.delete_paths(f"/admin/delete_topics/{t}" for t in requested)
            return
        new = requested - ctx.topics_to_delete
        for topic in new:
            if any(tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress):
                ctx.topics_ineligible_for_deletion.add(topic)
        ctx.topics_to_delete |= new
        if new:
            log.info("controller %d: deleting topics %s", self.broker_id, sorted(new))
            await self._resume_deletion()

    async def _resume_deletion(self, unblock: Iterable[str] = ()) -> None:
        """``resumeDeletionForTopics`` + one pass of ``DeleteTopicsThread.doWork``."""
        ctx = self.ctx
        for topic in unblock:
            if topic in ctx.topics_to_delete and not any(
                tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress
            ):
                ctx.topics_ineligible_for_deletion.discard(topic)
        for topic in sorted(ctx.topics_to_delete):
            replicas = ctx.replicas_for(ctx.partitions_of(topic))
            states = [self.replica_states.get(r) for r in replicas]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                await self._complete_deletion(topic)
                continue
            if any(s is R.DELETION_STARTED for s in states):
                continue
            if any(s is R.DELETION_INELIGIBLE for s in states) and topic not in ctx.topics_ineligible_for_deletion:
                # Retry: the replicas that failed go back to Offline and deletion starts over.
                await self._replicas_to([r for r in replicas
                                         if self.replica_states.get(r) is R.DELETION_INELIGIBLE], R.OFFLINE)
                ctx.topics_with_deletion_started.discard(topic)
            if topic in ctx.topics_ineligible_for_deletion:
                log.info("controller %d: deletion of %s waits (ineligible)", self.broker_id, topic)
                continue
            if topic not in ctx.topics_with_deletion_started:
                await self._start_topic_deletion(topic)

    async def _start_topic_deletion(self, topic: str) -> None:
        ctx = self.ctx
        ctx.topics_with_deletion_started.add(topic)
        partitions = ctx.partitions_of(topic)
        self._batch.add_update_metadata(ctx.live_or_shutting_down, partitions)
        replicas = ctx.replicas_for(partitions)
        dead = [r for r in replicas if r.replica not in ctx.live_brokers]
        retry = [r for r in replicas
                 if r.replica in ctx.live_brokers and self.replica_states.get(r) is not R.DELETION_SUCCESSFUL]
        await self._replicas_to([r for r in dead if self.replica_states.get(r) in (R.NEW, R.ONLINE)], R.OFFLINE)
        await self._replicas_to([r for r in dead if self.replica_states.get(r) is R.OFFLINE],
                                R.DELETION_INELIGIBLE)
        await self._replicas_to(retry, R.OFFLINE)
        await self._replicas_to(retry, R.DELETION_STARTED)
        if dead:
            log.info("controller %d: deletion of %s is ineligible while brokers %s are down", self.broker_id,
                     topic, sorted({r.replica for r in dead}))
            ctx.topics_ineligible_for_deletion.add(topic)

    async def _fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        ctx = self.ctx
        replicas = list(replicas)
        started = [r for r in replicas if self.replica_states.get(r) is R.DELETION_STARTED]
        await self._replicas_to(started, R.DELETION_INELIGIBLE)
        topics = {r.topic for r in replicas}
        ctx.topics_ineligible_for_deletion |= topics & ctx.topics_to_delete
        await self._resume_deletion()

    async def _on_stop_replica_done(self, event: StopReplicaDone) -> None:
        ctx = self.ctx
        errors = {(e.topic, e.partition): e.error_code for e in event.response.partition_errors}
        failed: list[PartitionReplica] = []
        succeeded: list[PartitionReplica] = []
        for tp in event.partitions:
            if not ctx.is_queued_for_deletion(tp.topic):
                continue
            replica = PartitionReplica(tp.topic, tp.partition, event.broker)
            if self.replica_states.get(replica) is not R.DELETION_STARTED:
                continue
            if event.response.error_code != 0 or errors.get((tp.topic, tp.partition), 0) != 0:
                failed.append(replica)
            else:
                succeeded.append(replica)
        if failed:
            await self._replicas_to(failed, R.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r.topic for r in failed}
        if succeeded:
            await self._replicas_to(succeeded, R.DELETION_SUCCESSFUL)
        await self._resume_deletion({r.topic for r in failed})

    async def _complete_deletion(self, topic: str) -> None:
        """``completeDeleteTopic``: states to NonExistent, znodes removed, context forgotten."""
        ctx = self.ctx
        partitions = ctx.partitions_of(topic)
        await self._replicas_to(ctx.replicas_for(partitions), R.NON_EXISTENT)
        await self._partitions_to(partitions, P.OFFLINE)
        await self._partitions_to(partitions, P.NON_EXISTENT)
        ctx.topics_to_delete.discard(topic)
        ctx.topics_ineligible_for_deletion.discard(topic)
        ctx.topics_with_deletion_started.discard(topic)
        self._watchers.pop(("topic", topic), None)
        await self.store.delete_topic_znodes(topic)
        ctx.remove_topic(topic)
        log.info("controller %d: deletion of topic %s completed", self.broker_id, topic)
