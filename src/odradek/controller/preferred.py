"""Preferred replica election and the auto leader rebalance (seed 001 sections 8.3.3 and 9.2): ElectLeaders,
``/admin/preferred_replica_election`` and the imbalance check that runs every
``leader.imbalance.check.interval.seconds`` on the controller's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from odradek.controller.context import TopicPartition
from odradek.controller.deletion import DeletionManager
from odradek.controller.election import Election
from odradek.controller.events import AutoRebalance, PreferredZnode
from odradek.controller.machines import PartitionStateMachine
from odradek.controller.plan import Plan
from odradek.controller.results import PREFERRED, UNCLEAN, PartitionResult
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState
from odradek.coordination.znodes import PREFERRED_REPLICA_ELECTION
from odradek.errors import ErrorCode, KafkaError
from odradek.placement import imbalanced_brokers

log = logging.getLogger("odradek.controller")

P = PartitionState

FIRST_CHECK_S = 5.0
"""Kafka schedules the first imbalance check five seconds after a failover, then every interval."""

__all__ = ["PreferredElectionManager"]


class PreferredElectionManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, deletion: DeletionManager) -> None:
        self._shared = shared
        self._partitions = partitions
        self._deletion = deletion

    async def on_znode(self) -> None:
        """``PreferredReplicaElectionListener``."""
        shared = self._shared
        ctx = shared.ctx
        requested = await shared.store.preferred_elections(shared.watch("preferred", PreferredZnode))
        if requested is None:
            return
        partitions = {tp for tp in requested - ctx.preferred_election_in_progress
                      if not ctx.is_queued_for_deletion(tp.topic)}
        await self.run(partitions, from_znode=True)

    async def run(self, partitions: set[TopicPartition], from_znode: bool = False) -> dict[TopicPartition,
                                                                                             PartitionResult]:
        """``onPreferredReplicaElection``; deletions of the topics involved wait until it is over."""
        shared = self._shared
        ctx = shared.ctx
        ctx.preferred_election_in_progress |= partitions
        topics = {tp.topic for tp in partitions}
        ctx.topics_ineligible_for_deletion |= topics & ctx.topics_to_delete
        try:
            known = [tp for tp in partitions if tp in ctx.assignments]
            results = await self._partitions.to(known, P.ONLINE, Election.PREFERRED)
            for tp in partitions:
                if tp not in ctx.assignments:
                    results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            return results
        finally:
            ctx.preferred_election_in_progress -= partitions
            if from_znode:
                await shared.applier.apply(Plan(fenced_deletes=[PREFERRED_REPLICA_ELECTION]))
            await self._deletion.resume(topics)

    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, PartitionResult]:
        """ElectLeaders: preferred, or unclean for partitions without a live leader."""
        ctx = self._shared.ctx
        wanted = sorted(ctx.assignments) if partitions is None else partitions
        if election_type == PREFERRED:
            return await self.run(set(wanted))
        if election_type != UNCLEAN:
            raise KafkaError(ErrorCode.invalid_request, f"unknown election type {election_type}")
        results: dict[TopicPartition, PartitionResult] = {}
        candidates = []
        for tp in wanted:
            state = ctx.leadership.get(tp)
            if tp not in ctx.assignments or state is None:
                results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            elif state.leader in ctx.live_broker_ids:
                results[tp] = PartitionResult(ErrorCode.election_not_needed, f"{tp} has leader {state.leader}")
            else:
                candidates.append(tp)
        results.update(await self._partitions.to(candidates, P.ONLINE, Election.OFFLINE, force_unclean=True))
        return results

    def start_timer(self) -> None:
        """The imbalance check's ticker; it only posts events, so the check runs on the event loop like any
        other, and it sleeps on the injected clock, so tests move it with a ManualClock."""
        shared = self._shared
        interval = shared.config.check_interval_s

        async def ticker() -> None:
            await shared.clock.sleep(min(FIRST_CHECK_S, interval))
            while True:
                shared.post(AutoRebalance())
                await shared.clock.sleep(interval)

        shared.start_timer(ticker(), name=f"controller-{shared.broker_id}-rebalance")

    async def on_auto_rebalance(self) -> None:
        """``checkAndTriggerAutoLeaderRebalance``: per preferred broker, strictly above the percentage."""
        shared = self._shared
        ctx = shared.ctx
        if ctx.being_reassigned or ctx.preferred_election_in_progress:
            return
        assignments: dict[object, Sequence[int]] = {
            tp: ra.replicas for tp, ra in ctx.assignments.items() if not ctx.is_queued_for_deletion(tp.topic)
        }
        leaders: dict[object, int] = {tp: s.leader for tp, s in ctx.leadership.items()}
        candidates: set[TopicPartition] = set()
        for broker, partitions in imbalanced_brokers(assignments, leaders, shared.config.imbalance_pct).items():
            if broker not in ctx.live_broker_ids:
                continue
            for tp in partitions:
                assert isinstance(tp, TopicPartition)
                state = ctx.leadership.get(tp)
                if state is not None and broker in state.isr:
                    candidates.add(tp)
        if candidates:
            log.info("controller %d: auto rebalance moves %d leaderships back to preferred replicas",
                     shared.broker_id, len(candidates))
            await self.run(candidates)
