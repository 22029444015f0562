"""The partition and replica state machines (seed 001 sections 4 and 5) as the controller drives them.

Each ``*_to`` method checks every requested transition against the tables in :mod:`.states` (refusals go to the
state-change log and change nothing), elects where a partition goes online, writes leader-and-ISR with
compare-and-set (re-reading and retrying what somebody else wrote first), and adds to the round's request batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from odradek.controller.base import ControllerBase, PartitionResult, flag
from odradek.controller.context import LeaderIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from odradek.controller.election import (
    Elected,
    Election,
    NotElected,
    elect_leader,
    needs_unclean_config,
    without_replica,
)
from odradek.controller.states import PartitionState, ReplicaState, state_change_log
from odradek.coordination.store import BadVersionError, NodeExistsError
from odradek.errors import ErrorCode

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState


__all__ = ["StateMachines"]


class StateMachines(ControllerBase):
    async def _partitions_to(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        election: Election | None = None,
        force_unclean: bool = False,
    ) -> dict[TopicPartition, PartitionResult]:
        """``PartitionStateMachine.handleStateChanges``: refuses illegal moves, elects where it must."""
        valid, invalid = self.partition_states.split(sorted(set(partitions)), target)
        results = {
            tp: PartitionResult(ErrorCode.invalid_request,
                                f"illegal transition {self.partition_states.get(tp).value} -> {target.value}")
            for tp in invalid
        }
        if target is P.NEW:
            for tp in valid:
                self.partition_states.put(tp, P.NEW)
        elif target is P.OFFLINE:
            for tp in valid:
                self.partition_states.put(tp, P.OFFLINE)
        elif target is P.NON_EXISTENT:
            for tp in valid:
                self.partition_states.remove(tp)
        else:
            uninitialized = [tp for tp in valid if self.partition_states.get(tp) is P.NEW]
            to_elect = [tp for tp in valid if self.partition_states.get(tp) is not P.NEW]
            results.update(await self._initialize_partitions(uninitialized))
            if to_elect:
                results.update(await self._elect(to_elect, election or Election.OFFLINE, force_unclean))
            valid_set = set(valid)
            for tp, outcome in results.items():
                if outcome.error is ErrorCode.none and tp in valid_set:
                    self.partition_states.put(tp, P.ONLINE)
        return results

    async def _initialize_partitions(self, partitions: list[TopicPartition]) -> dict[TopicPartition,
                                                                                     PartitionResult]:
        """New -> Online: leader = first live replica, ISR = the live replicas, leader epoch 0."""
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        wanted: dict[TopicPartition, LeaderIsr] = {}
        for tp in partitions:
            live = [r for r in ctx.replicas_of(tp) if r in ctx.live_broker_ids]
            if not live:
                msg = f"no assigned replica of {list(ctx.replicas_of(tp))} is alive"
                state_change_log.error("[Controller id=%d epoch=%d] partition %s New -> Online failed: %s",
                                       self.broker_id, ctx.epoch, tp, msg)
                results[tp] = PartitionResult(ErrorCode.eligible_leaders_not_available, msg)
                continue
            wanted[tp] = LeaderIsr(live[0], 0, tuple(live), ctx.epoch, 0)
        if not wanted:
            return results
        created, failed = await self.store.create_states(wanted)
        if failed:
            existing = await self.store.states([tp for tp, e in failed.items() if isinstance(e, NodeExistsError)])
            created.update(existing)  # another controller initialised it first: adopt what it wrote
        for tp in wanted:
            state = created.get(tp)
            if state is None:
                results[tp] = PartitionResult(ErrorCode.unknown_server_error, f"writing its state failed: "
                                                                              f"{failed.get(tp)}")
                continue
            ctx.leadership[tp] = state
            live = [r for r in ctx.replicas_of(tp) if r in ctx.live_brokers]
            self._batch.add_leader_and_isr(ctx, live, tp, state, is_new=True)
            results[tp] = PartitionResult(ErrorCode.none)
        return results

    async def _unclean_allowed(self, topics: Iterable[str]) -> dict[str, bool]:
        configs = await self.store.topic_configs(topics)
        return {
            t: flag(c["unclean.leader.election.enable"]) if "unclean.leader.election.enable" in c
            else self._unclean_default
            for t, c in configs.items()
        }

    async def _elect(
        self, partitions: Sequence[TopicPartition], kind: Election, force_unclean: bool = False
    ) -> dict[TopicPartition, PartitionResult]:
        """Elect, write with compare-and-set, re-read and retry the partitions somebody else wrote first."""
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        remaining = list(partitions)
        for _attempt in range(10):
            if not remaining:
                break
            unclean: dict[str, bool] = {}
            if kind is Election.OFFLINE:
                topics = {tp.topic for tp in remaining if needs_unclean_config(ctx, tp)}
                unclean = {t: True for t in topics} if force_unclean else await self._unclean_allowed(topics)
            decisions: dict[TopicPartition, Elected] = {}
            refused: list[NotElected] = []
            for tp in remaining:
                decision = elect_leader(kind, ctx, tp, unclean.get(tp.topic, False))
                if isinstance(decision, NotElected):
                    refused.append(decision)
                    results[tp] = PartitionResult(decision.error, decision.reason)
                else:
                    decisions[tp] = decision
            self._log_refused(kind, refused)
            if not decisions:
                break
            written, failed = await self.store.write_states({tp: d.new for tp, d in decisions.items()})
            for tp, state in written.items():
                decision = decisions[tp]
                ctx.leadership[tp] = state
                if decision.unclean:
                    log.warning(
                        "Unclean leader election for partition %s: broker %d leads although it was not in the "
                        "ISR; data may be lost", tp, state.leader)
                state_change_log.info(
                    "[Controller id=%d epoch=%d] %s election for %s: leader %d, leader epoch %d, ISR %s",
                    self.broker_id, ctx.epoch, kind.value, tp, state.leader, state.leader_epoch, list(state.isr))
                self._batch.add_leader_and_isr(ctx, decision.recipients, tp, state)
                results[tp] = PartitionResult(ErrorCode.none)
            stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
            for tp, error in failed.items():
                if tp not in stale:
                    results[tp] = PartitionResult(ErrorCode.unknown_server_error, str(error))
            if stale:
                ctx.leadership.update(await self.store.states(stale))
            remaining = stale
        for tp in remaining:
            results.setdefault(tp, PartitionResult(ErrorCode.unknown_server_error, "kept losing the race"))
        return results

    def _log_refused(self, kind: Election, refused: list[NotElected]) -> None:
        """One state-change line per partition, as Kafka logs them, but at most ten at ERROR per round: a dead
        rack can leave thousands of partitions offline, and each broker change retries them all."""
        for index, nope in enumerate(refused):
            level = logging.ERROR if index < 10 else logging.DEBUG
            state_change_log.log(level, "[Controller id=%d epoch=%d] %s election for partition %s failed: %s",
                                 self.broker_id, self.ctx.epoch, kind.value, nope.tp, nope.reason)
        if len(refused) > 10:
            state_change_log.error("[Controller id=%d epoch=%d] %s election failed for %d more partitions",
                                   self.broker_id, self.ctx.epoch, kind.value, len(refused) - 10)

    async def _trigger_online_partitions(self) -> None:
        """New or Offline partitions of topics not being deleted -> Online (``triggerOnlinePartitionStateChange``)."""
        ctx = self.ctx
        candidates = [
            tp for tp, s in self.partition_states.items()
            if s in (P.NEW, P.OFFLINE) and not ctx.is_queued_for_deletion(tp.topic)
        ]
        if candidates:
            await self._partitions_to(candidates, P.ONLINE, Election.OFFLINE)

    async def _write_states(self, updates: dict[TopicPartition, LeaderIsr]) -> dict[TopicPartition, LeaderIsr]:
        """Compare-and-set ``updates``; the partitions somebody else wrote first are re-read into the context
        and left out of the result, for the caller to rebuild and retry."""
        written, failed = await self.store.write_states(updates)
        stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
        if stale:
            self.ctx.leadership.update(await self.store.states(stale))
        self.ctx.leadership.update(written)
        return written

    async def _replicas_to(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        ctx = self.ctx
        table = self.replica_states
        valid, _invalid = table.split(sorted(set(replicas)), target)
        if target is R.NEW:
            for replica in valid:
                state = ctx.leadership.get(replica.tp)
                if state is not None and state.leader == replica.replica:
                    table.log_refusal(replica, target)
                    continue
                if state is not None:
                    self._batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
                table.put(replica, R.NEW)
        elif target is R.ONLINE:
            for replica in valid:
                if table.get(replica) is R.NEW:
                    ra = ctx.assignments.get(replica.tp)
                    if ra is not None and replica.replica not in ra.replicas:
                        ctx.assignments[replica.tp] = ReplicaAssignment((*ra.replicas, replica.replica),
                                                                         ra.adding, ra.removing)
                else:
                    state = ctx.leadership.get(replica.tp)
                    if state is not None:
                        self._batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
                table.put(replica, R.ONLINE)
        elif target is R.OFFLINE:
            await self._replicas_offline(valid)
        elif target is R.DELETION_STARTED:
            for replica in valid:
                table.put(replica, R.DELETION_STARTED)
                self._batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=True)
        elif target in (R.DELETION_INELIGIBLE, R.DELETION_SUCCESSFUL):
            for replica in valid:
                table.put(replica, target)
        else:  # NON_EXISTENT
            for replica in valid:
                ra = ctx.assignments.get(replica.tp)
                if ra is not None:
                    ctx.assignments[replica.tp] = ReplicaAssignment(
                        tuple(r for r in ra.replicas if r != replica.replica), ra.adding, ra.removing)
                table.remove(replica)

    async def _replicas_offline(self, replicas: list[PartitionReplica]) -> None:
        """StopReplica (no delete) to each, and take it out of its partition's ISR (leader epoch + 1)."""
        ctx = self.ctx
        for replica in replicas:
            self._batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=False)
        pending = [r for r in replicas if r.tp in ctx.leadership and not ctx.is_queued_for_deletion(r.topic)]
        pending_set = set(pending)
        for replica in replicas:
            if replica not in pending_set:
                self.replica_states.put(replica, R.OFFLINE)
        for _attempt in range(10):
            if not pending:
                break
            # One write per partition per round, even when several of its replicas go offline together.
            by_tp: dict[TopicPartition, list[PartitionReplica]] = {}
            for replica in pending:
                by_tp.setdefault(replica.tp, []).append(replica)
            updates: dict[TopicPartition, LeaderIsr] = {}
            for tp, going in by_tp.items():
                start = ctx.leadership[tp]
                state = start
                for replica in going:
                    shrunk = without_replica(ctx, state, replica.replica)
                    if shrunk is not None:
                        state = shrunk
                if state is not start:
                    updates[tp] = LeaderIsr(state.leader, start.leader_epoch + 1, state.isr, ctx.epoch,
                                            start.zk_version)
                else:
                    for replica in going:
                        self.replica_states.put(replica, R.OFFLINE)
            if not updates:
                break
            written, failed = await self.store.write_states(updates)
            for tp, state in written.items():
                ctx.leadership[tp] = state
                others = [r for r in ctx.replicas_of(tp) if r not in {x.replica for x in by_tp[tp]}]
                self._batch.add_leader_and_isr(ctx, others, tp, state)
                for replica in by_tp[tp]:
                    self.replica_states.put(replica, R.OFFLINE)
            stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
            for tp, error in failed.items():
                if tp not in stale:
                    state_change_log.error("[Controller id=%d epoch=%d] removing replicas of %s from the ISR "
                                           "failed: %s", self.broker_id, ctx.epoch, tp, error)
            if stale:
                ctx.leadership.update(await self.store.states(stale))
            pending = [r for tp in stale for r in by_tp[tp]]
