"""Partition reassignment (seed 001 section 7, ``onPartitionReassignment``; sections 8.3.4 and 8.3.5 for its
listeners), started through AlterPartitionReassignments or ``/admin/reassign_partitions``.

Phase one writes the union of the original and target replicas (KIP-455's adding/removing layout) and waits for
every target replica to join the ISR; phase two elects a leader among the target, retires the old replicas and
writes the target as the assignment. The context records a reassignment as in progress only together with the
write that puts it in the store, so a refused write leaves no reassignment behind that the store does not hold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from odradek.controller.context import LeaderIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from odradek.controller.deletion import DeletionManager
from odradek.controller.election import Election
from odradek.controller.events import ReassignmentIsrChange, ReassignmentZnode
from odradek.controller.machines import ROUNDS, PartitionStateMachine, ReplicaStateMachine
from odradek.controller.plan import LeaderChange, Plan
from odradek.controller.results import PartitionResult
from odradek.controller.shared import Shared
from odradek.controller.states import ReplicaState
from odradek.errors import ErrorCode

log = logging.getLogger("odradek.controller")

R = ReplicaState

__all__ = ["ReassignmentManager"]


class ReassignmentManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine,
                 deletion: DeletionManager) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas
        self._deletion = deletion

    async def on_znode(self) -> None:
        """``PartitionsReassignedListener``: start what ``/admin/reassign_partitions`` newly asks for."""
        shared = self._shared
        ctx = shared.ctx
        requested = await shared.store.reassignments(shared.watch("reassign", ReassignmentZnode))
        for tp, target in sorted(requested.items()):
            if tp in ctx.being_reassigned:
                continue
            outcome = await self.initiate(tp, target)
            if outcome.error is ErrorCode.none and tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
            elif outcome.error is not ErrorCode.none:
                log.error("controller %d: reassignment of %s to %s refused: %s", shared.broker_id, tp,
                          list(target), outcome.message)
        # Drop partitions that finished or were refused from the znode.
        remaining = {tp: t for tp, t in requested.items() if tp in ctx.reassignment_from_znode}
        if remaining != dict(requested) or not remaining:
            await shared.applier.apply(Plan(reassign_znode=remaining))

    async def alter(
        self, wanted: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        """AlterPartitionReassignments: a target starts (or replaces) a reassignment, None cancels it."""
        ctx = self._shared.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        for tp, target in sorted(wanted.items()):
            if target is None:
                if tp not in ctx.being_reassigned:
                    # Kafka's default message for the error
                    results[tp] = PartitionResult(ErrorCode.no_reassignment_in_progress,
                                                  "No partition reassignment is in progress.")
                    continue
                # Cancelling is reassigning back to the original replicas.
                await self.reassign(tp, ctx.assignments[tp].origin)
                results[tp] = PartitionResult(ErrorCode.none)
            else:
                results[tp] = await self.initiate(tp, target)
        return results

    async def initiate(self, tp: TopicPartition, target: tuple[int, ...]) -> PartitionResult:
        ctx = self._shared.ctx
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
        await self.reassign(tp, tuple(target))
        self._shared.ctx.topics_ineligible_for_deletion.add(tp.topic)
        return PartitionResult(ErrorCode.none)

    async def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Carry on with the reassignments in progress of ``partitions`` (failover, a target broker's return)."""
        for tp in partitions:
            target = self._shared.ctx.being_reassigned.get(tp)
            if target is not None:
                await self.reassign(tp, target)

    async def on_isr_change(self, tp: TopicPartition) -> None:
        """``ReassignedPartitionsIsrChangeListener``: the partition's state znode changed."""
        if tp not in self._shared.ctx.being_reassigned:
            return
        await self._watch_state(tp)
        await self.maybe_complete(tp)

    async def maybe_complete(self, tp: TopicPartition) -> None:
        ctx = self._shared.ctx
        target = ctx.being_reassigned.get(tp)
        state = ctx.leadership.get(tp)
        if target is not None and state is not None and set(target) <= set(state.isr):
            await self.reassign(tp, target)

    async def _watch_state(self, tp: TopicPartition) -> None:
        shared = self._shared
        state = await shared.store.state_with_watch(
            tp, shared.watch(("reassign-isr", tp), lambda: ReassignmentIsrChange(tp)))
        if state is not None:
            shared.ctx.leadership[tp] = state

    async def reassign(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        """Seed 001 section 7 (``onPartitionReassignment``): phase one until every target replica is in the ISR,
        phase two once they all are."""
        shared = self._shared
        ctx = shared.ctx
        ra = ctx.assignments[tp]
        origin = ra.origin
        await self._watch_state(tp)
        state = ctx.leadership.get(tp)
        if state is None:
            log.error("controller %d: cannot reassign %s: it has no leader and ISR", shared.broker_id, tp)
            return
        if not set(target) <= set(state.isr):
            union = tuple(target) + tuple(r for r in origin if r not in target)
            adding = tuple(r for r in target if r not in origin)
            removing = tuple(r for r in origin if r not in target)
            new_ra = ReplicaAssignment(union, adding, removing)
            await shared.applier.apply(Plan(assignments={tp: new_ra} if new_ra != ra else {},
                                            reassigning={tp: target}))
            # Bump the leader epoch so every replica, old and new, learns the new replica set.
            await self._bump_leader_epoch(tp, union)
            table = shared.replica_states
            await self._replicas.to(
                [PartitionReplica(tp.topic, tp.partition, r) for r in adding
                 if table.get(PartitionReplica(tp.topic, tp.partition, r)) is R.NON_EXISTENT],
                R.NEW)
            log.info("controller %d: reassignment of %s to %s waits for %s to join the ISR %s", shared.broker_id,
                     tp, list(target), [r for r in target if r not in state.isr], list(state.isr))
            return
        # Phase two: every target replica is in sync.
        await self._replicas.to([PartitionReplica(tp.topic, tp.partition, r) for r in target], R.ONLINE)
        state = ctx.leadership[tp]
        if state.leader not in target or state.leader not in ctx.live_broker_ids:
            await self._partitions.elect([tp], Election.REASSIGN, reassign_target=target)
        else:
            await self._bump_leader_epoch(tp, target)
        old = [PartitionReplica(tp.topic, tp.partition, r) for r in ra.replicas if r not in target]
        if old:
            await self._replicas.to(old, R.OFFLINE)
            await self._replicas.to(old, R.DELETION_STARTED)
            await self._replicas.to(old, R.DELETION_SUCCESSFUL)
            await self._replicas.to(old, R.NON_EXISTENT)
        plan = Plan(assignments={tp: ReplicaAssignment(tuple(target))}, reassigning={tp: None}, metadata=[tp])
        if tp in ctx.reassignment_from_znode:
            listed = await shared.store.reassignments(shared.watch("reassign", ReassignmentZnode))
            plan.reassign_znode = {p: t for p, t in listed.items() if p in ctx.reassignment_from_znode and p != tp}
            plan.left_reassign_znode = {tp}
        await shared.applier.apply(plan)
        log.info("controller %d: reassignment of %s to %s completed", shared.broker_id, tp, list(target))
        await self._deletion.resume({tp.topic})

    async def _bump_leader_epoch(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """``updateLeaderEpochAndSendRequest``: same leader and ISR, epoch + 1, told to ``recipients``."""
        shared = self._shared
        for _attempt in range(ROUNDS):
            state = shared.ctx.leadership[tp]
            bumped = LeaderIsr(state.leader, state.leader_epoch + 1, state.isr, shared.ctx.epoch, state.zk_version)
            applied = await shared.applier.apply(Plan(states={tp: LeaderChange(bumped, recipients)}))
            if tp in applied.written:
                return
