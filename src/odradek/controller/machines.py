"""The partition and replica state machines (seed 001 sections 4 and 5) as the managers drive them.

Each ``to`` checks every requested transition against the tables in :mod:`.states` (refusals go to the
state-change log and change nothing), decides the partition states to write (elections, ISR shrinks) from the
context, and hands them to the :class:`~odradek.controller.applier.Applier`; only what was written moves on.
Partitions somebody else wrote first are re-read by the applier and decided again, up to ten rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from odradek.controller.config import flag
from odradek.controller.context import LeaderIsr, PartitionReplica, TopicPartition
from odradek.controller.election import (
    Election,
    NotElected,
    elect_leader,
    needs_unclean_config,
    without_replica,
)
from odradek.controller.plan import LeaderChange, Plan
from odradek.controller.results import PartitionResult
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState, state_change_log
from odradek.errors import ErrorCode

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState

ROUNDS = 10
"""Compare-and-set rounds before a partition that keeps being written by somebody else is given up on."""

__all__ = ["PartitionStateMachine", "ReplicaStateMachine"]


class PartitionStateMachine:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    async def to(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        election: Election | None = None,
        force_unclean: bool = False,
        reassign_target: Sequence[int] | None = None,
    ) -> dict[TopicPartition, PartitionResult]:
        """``PartitionStateMachine.handleStateChanges``: refuses illegal moves, elects where it must."""
        table = self._shared.partition_states
        valid, invalid = table.split(sorted(set(partitions)), target)
        results = {
            tp: PartitionResult(ErrorCode.invalid_request,
                                f"illegal transition {table.get(tp).value} -> {target.value}")
            for tp in invalid
        }
        if target is P.NEW:
            for tp in valid:
                table.put(tp, P.NEW)
        elif target is P.OFFLINE:
            for tp in valid:
                table.put(tp, P.OFFLINE)
        elif target is P.NON_EXISTENT:
            for tp in valid:
                table.remove(tp)
        else:
            uninitialized = [tp for tp in valid if table.get(tp) is P.NEW]
            to_elect = [tp for tp in valid if table.get(tp) is not P.NEW]
            results.update(await self._initialize(uninitialized))
            if to_elect:
                results.update(await self.elect(to_elect, election or Election.OFFLINE, force_unclean,
                                                reassign_target))
            valid_set = set(valid)
            for tp, outcome in results.items():
                if outcome.error is ErrorCode.none and tp in valid_set:
                    table.put(tp, P.ONLINE)
        return results

    async def trigger_online(self) -> None:
        """New or Offline partitions of topics not being deleted -> Online (``triggerOnlinePartitionStateChange``)."""
        ctx = self._shared.ctx
        candidates = [
            tp for tp, s in self._shared.partition_states.items()
            if s in (P.NEW, P.OFFLINE) and not ctx.is_queued_for_deletion(tp.topic)
        ]
        if candidates:
            await self.to(candidates, P.ONLINE, Election.OFFLINE)

    async def _initialize(self, partitions: list[TopicPartition]) -> dict[TopicPartition, PartitionResult]:
        """New -> Online: leader = first live replica, ISR = the live replicas, leader epoch 0."""
        shared = self._shared
        ctx = shared.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        plan = Plan()
        for tp in partitions:
            replicas = ctx.replicas_of(tp)
            live = [r for r in replicas if r in ctx.live_broker_ids]
            if not live:
                msg = f"no assigned replica of {list(replicas)} is alive"
                state_change_log.error("[Controller id=%d epoch=%d] partition %s New -> Online failed: %s",
                                       shared.broker_id, ctx.epoch, tp, msg)
                results[tp] = PartitionResult(ErrorCode.eligible_leaders_not_available, msg)
                continue
            plan.created[tp] = LeaderChange(LeaderIsr(live[0], 0, tuple(live), ctx.epoch, 0),
                                            [r for r in replicas if r in ctx.live_brokers])
        if not plan.created:
            return results
        applied = await shared.applier.apply(plan)
        for tp in plan.created:
            if tp in applied.written:
                results[tp] = PartitionResult(ErrorCode.none)
            else:
                results[tp] = PartitionResult(ErrorCode.unknown_server_error,
                                              f"writing its state failed: {applied.failed.get(tp)}")
        return results

    async def _unclean_allowed(self, topics: Iterable[str]) -> dict[str, bool]:
        configs = await self._shared.store.topic_configs(topics)
        default = self._shared.config.unclean_default
        return {
            t: flag(c["unclean.leader.election.enable"]) if "unclean.leader.election.enable" in c else default
            for t, c in configs.items()
        }

    async def elect(
        self, partitions: Sequence[TopicPartition], kind: Election, force_unclean: bool = False,
        reassign_target: Sequence[int] | None = None,
    ) -> dict[TopicPartition, PartitionResult]:
        """Elect (a pure decision per partition), apply, and decide again for those somebody else wrote first."""
        shared = self._shared
        results: dict[TopicPartition, PartitionResult] = {}
        remaining = list(partitions)
        for _attempt in range(ROUNDS):
            if not remaining:
                break
            ctx = shared.ctx
            unclean: dict[str, bool] = {}
            if kind is Election.OFFLINE:
                topics = {tp.topic for tp in remaining if needs_unclean_config(ctx, tp)}
                unclean = {t: True for t in topics} if force_unclean else await self._unclean_allowed(topics)
            plan = Plan()
            changes = plan.states
            refused: list[NotElected] = []
            unclean_leaders: list[TopicPartition] = []
            for tp in remaining:
                decision = elect_leader(kind, ctx, tp, unclean.get(tp.topic, False), reassign_target)
                if isinstance(decision, NotElected):
                    refused.append(decision)
                    results[tp] = PartitionResult(decision.error, decision.reason)
                else:
                    changes[tp] = LeaderChange(decision.new, decision.recipients)
                    if decision.unclean:
                        unclean_leaders.append(tp)
            self._log_refused(kind, refused)
            if not changes:
                break
            applied = await shared.applier.apply(plan)
            written = applied.written
            for tp in unclean_leaders:
                if tp in written:
                    shared.unclean_elections += 1
                    log.warning("Unclean leader election for partition %s: broker %d leads although it was not "
                                "in the ISR; data may be lost", tp, written[tp].leader)
            ok = PartitionResult(ErrorCode.none)
            info = state_change_log.isEnabledFor(logging.INFO)
            for tp, state in written.items():
                if info:
                    state_change_log.info(
                        "[Controller id=%d epoch=%d] %s election for %s: leader %d, leader epoch %d, ISR %s",
                        shared.broker_id, ctx.epoch, kind.value, tp, state.leader, state.leader_epoch,
                        list(state.isr))
                results[tp] = ok
            for tp, error in applied.failed.items():
                results[tp] = PartitionResult(ErrorCode.unknown_server_error, str(error))
            remaining = applied.stale
        for tp in remaining:
            results.setdefault(tp, PartitionResult(ErrorCode.unknown_server_error, "kept losing the race"))
        return results

    def _log_refused(self, kind: Election, refused: list[NotElected]) -> None:
        """One state-change line per partition, as Kafka logs them, but at most ten at ERROR per round: a dead
        rack can leave thousands of partitions offline, and each broker change retries them all. A preferred
        replica that already leads is no failure (ELECTION_NOT_NEEDED; Kafka does not even try those)."""
        shared = self._shared
        refused = [nope for nope in refused if nope.error is not ErrorCode.election_not_needed]
        for index, nope in enumerate(refused):
            level = logging.ERROR if index < 10 else logging.DEBUG
            state_change_log.log(level, "[Controller id=%d epoch=%d] %s election for partition %s failed: %s",
                                 shared.broker_id, shared.ctx.epoch, kind.value, nope.tp, nope.reason)
        if len(refused) > 10:
            state_change_log.error("[Controller id=%d epoch=%d] %s election failed for %d more partitions",
                                   shared.broker_id, shared.ctx.epoch, kind.value, len(refused) - 10)


class ReplicaStateMachine:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    async def to(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        """``ReplicaStateMachine.handleStateChanges``.

        Unlike Kafka's, NewReplica -> OnlineReplica and -> NonExistentReplica leave the context's replica
        assignment alone: the assignment changes when its topic znode is written (the reassignment's plan, a
        topic's deletion), so the context never holds an assignment the store does not.
        """
        shared = self._shared
        ctx = shared.ctx
        table = shared.replica_states
        batch = shared.batch
        valid, _invalid = table.split(sorted(set(replicas)), target)
        if target is R.NEW:
            for replica in valid:
                state = ctx.leadership.get(replica.tp)
                if state is not None and state.leader == replica.replica:
                    table.log_refusal(replica, target)
                    continue
                if state is not None:
                    batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state, True)
                table.put(replica, R.NEW)
        elif target is R.ONLINE:
            for replica in valid:
                if table.get(replica) is not R.NEW:
                    state = ctx.leadership.get(replica.tp)
                    if state is not None:
                        batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
                table.put(replica, R.ONLINE)
        elif target is R.OFFLINE:
            await self._offline(valid)
        elif target is R.DELETION_STARTED:
            for replica in valid:
                table.put(replica, R.DELETION_STARTED)
                batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=True)
        elif target in (R.DELETION_INELIGIBLE, R.DELETION_SUCCESSFUL):
            for replica in valid:
                table.put(replica, target)
        else:  # NON_EXISTENT
            for replica in valid:
                table.remove(replica)

    async def _offline(self, replicas: list[PartitionReplica]) -> None:
        """StopReplica (no delete) to each, and take it out of its partition's ISR (leader epoch + 1)."""
        shared = self._shared
        ctx = shared.ctx
        table = shared.replica_states
        for replica in replicas:
            shared.batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=False)
        pending = [r for r in replicas if r.tp in ctx.leadership and not ctx.is_queued_for_deletion(r.topic)]
        pending_set = set(pending)
        for replica in replicas:
            if replica not in pending_set:
                table.put(replica, R.OFFLINE)
        for _attempt in range(ROUNDS):
            if not pending:
                break
            ctx = shared.ctx
            # One write per partition per round, even when several of its replicas go offline together.
            by_tp: dict[TopicPartition, list[PartitionReplica]] = {}
            for replica in pending:
                by_tp.setdefault(replica.tp, []).append(replica)
            plan = Plan()
            for tp, going in by_tp.items():
                start = ctx.leadership[tp]
                state = start
                for replica in going:
                    shrunk = without_replica(ctx, state, replica.replica)
                    if shrunk is not None:
                        state = shrunk
                if state is not start:
                    leaving = {x.replica for x in going}
                    plan.states[tp] = LeaderChange(
                        LeaderIsr(state.leader, start.leader_epoch + 1, state.isr, ctx.epoch, start.zk_version),
                        [r for r in ctx.replicas_of(tp) if r not in leaving])
                else:
                    for replica in going:
                        table.put(replica, R.OFFLINE)
            if not plan.states:
                break
            applied = await shared.applier.apply(plan)
            for tp in applied.written:
                for replica in by_tp[tp]:
                    table.put(replica, R.OFFLINE)
            for tp, error in applied.failed.items():
                state_change_log.error("[Controller id=%d epoch=%d] removing replicas of %s from the ISR "
                                       "failed: %s", shared.broker_id, ctx.epoch, tp, error)
            pending = [r for tp in applied.stale for r in by_tp[tp]]
