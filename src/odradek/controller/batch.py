"""One round of controller-to-broker requests (seed 001 section 3), collected and then turned into requests.

The state machines and the applier add what each broker must hear as partition and replica states change;
:meth:`RequestBatch.build` groups it into at most one LeaderAndIsr, one UpdateMetadata and two StopReplica requests
(without and with delete) per broker, in that order, which is the order Kafka's ``sendRequestsToBrokers`` uses.
Building is pure: the channels (:mod:`odradek.controller.channels`) do the sending.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.controller.context import ControllerContext, LeaderIsr, ReplicaAssignment, TopicPartition
from odradek.protocol.controller_requests import (
    LEADER_AND_ISR,
    LEADER_DURING_DELETE,
    STOP_REPLICA,
    UPDATE_METADATA,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    MetadataBroker,
    MetadataEndpoint,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

__all__ = ["Outgoing", "RequestBatch"]


@dataclass(frozen=True, slots=True)
class Outgoing:
    broker_id: int
    api_key: int
    request: Any


@dataclass
class RequestBatch:
    leader_and_isr: dict[int, dict[TopicPartition, tuple[LeaderIsr, bool]]] = field(default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    metadata_brokers: set[int] = field(default_factory=set)
    metadata_partitions: set[TopicPartition] = field(default_factory=set)
    metadata_all: bool = False
    metadata_all_live: bool = False
    """Every live broker gets the metadata (resolved when building, not once per partition added)."""

    def __bool__(self) -> bool:
        return bool(self.leader_and_isr or self.stop_replica or self.metadata_brokers or self.metadata_all_live)

    def add_leader_and_isr(
        self,
        ctx: ControllerContext,
        brokers: Iterable[int],
        tp: TopicPartition,
        state: LeaderIsr,
        is_new: bool = False,
    ) -> None:
        """Tell ``brokers`` (the live ones) the partition's state; every live broker also gets its metadata."""
        for broker in brokers:
            if broker in ctx.live_brokers:
                entries = self.leader_and_isr.setdefault(broker, {})
                previous = entries.get(tp)
                entries[tp] = (state, is_new or (previous is not None and previous[1]))
        self.metadata_all_live = True
        self.metadata_partitions.add(tp)

    def add_stop_replica(self, ctx: ControllerContext, brokers: Iterable[int], tp: TopicPartition,
                         delete: bool) -> None:
        for broker in brokers:
            if broker in ctx.live_brokers:
                entries = self.stop_replica.setdefault(broker, {})
                entries[tp] = entries.get(tp, False) or delete

    def add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition] | None = None) -> None:
        """``partitions=None`` sends the state of every partition (a new broker, a new controller)."""
        self.metadata_brokers.update(brokers)
        if partitions is None:
            self.metadata_all = True
        else:
            self.metadata_partitions.update(partitions)

    def build(self, ctx: ControllerContext, controller_id: int, listener: str = "PLAINTEXT") -> list[Outgoing]:
        """``listener``: the inter-broker listener, whose endpoints LeaderAndIsr's live leaders carry."""
        out: list[Outgoing] = []
        if self.metadata_all_live:
            self.metadata_brokers |= ctx.live_or_shutting_down
        brokers = sorted(set(self.leader_and_isr) | self.metadata_brokers | set(self.stop_replica))
        metadata = self._metadata_request(ctx, controller_id) if self.metadata_brokers else None
        for broker in brokers:
            if broker not in ctx.live_brokers:
                continue
            broker_epoch = ctx.broker_epochs.get(broker, -1)
            entries = self.leader_and_isr.get(broker)
            if entries:
                out.append(Outgoing(broker, LEADER_AND_ISR,
                                    self._leader_and_isr(ctx, controller_id, broker_epoch, entries, listener)))
            if metadata is not None and broker in self.metadata_brokers:
                out.append(Outgoing(broker, UPDATE_METADATA, UpdateMetadataRequest(
                    controller_id, ctx.epoch, broker_epoch, metadata[0], metadata[1])))
            stops = self.stop_replica.get(broker)
            if stops:
                for delete in (False, True):
                    parts = [StopReplicaPartition(tp.topic, tp.partition)
                             for tp, d in sorted(stops.items()) if d is delete]
                    if parts:
                        out.append(Outgoing(broker, STOP_REPLICA, StopReplicaRequest(
                            controller_id, ctx.epoch, broker_epoch, delete, parts)))
        return out

    @staticmethod
    def _leader_and_isr(
        ctx: ControllerContext, controller_id: int, broker_epoch: int,
        entries: dict[TopicPartition, tuple[LeaderIsr, bool]], listener: str,
    ) -> LeaderAndIsrRequest:
        states = []
        leaders: set[int] = set()
        assignments = ctx.assignments
        empty = ReplicaAssignment(())
        for tp, (state, is_new) in entries.items():
            ra = assignments.get(tp, empty)
            states.append(LeaderAndIsrPartitionState(
                tp[0], tp[1], state.controller_epoch, state.leader, state.leader_epoch, list(state.isr),
                state.zk_version, list(ra.replicas), list(ra.adding), list(ra.removing), is_new,
            ))
            leaders.add(state.leader)
        live_leaders = []
        for leader in sorted(leaders):
            registration = ctx.live_brokers.get(leader)
            if registration is not None and registration.endpoints:
                endpoint = next((e for e in registration.endpoints if e.listener == listener),
                                registration.endpoints[0])
                live_leaders.append(LeaderAndIsrLiveLeader(leader, endpoint.host, endpoint.port))
        return LeaderAndIsrRequest(controller_id, ctx.epoch, broker_epoch, states, live_leaders)

    def _metadata_request(
        self, ctx: ControllerContext, controller_id: int
    ) -> tuple[list[UpdateMetadataPartitionState], list[MetadataBroker]]:
        partitions = ctx.leadership if self.metadata_all else self.metadata_partitions
        states = []
        live = ctx.live_brokers
        for tp in partitions:
            state = ctx.leadership.get(tp)
            ra = ctx.assignments.get(tp)
            if state is None or ra is None:
                continue
            leader = LEADER_DURING_DELETE if ctx.is_queued_for_deletion(tp.topic) else state.leader
            states.append(UpdateMetadataPartitionState(
                tp.topic, tp.partition, state.controller_epoch, leader, state.leader_epoch, list(state.isr),
                state.zk_version, list(ra.replicas), [r for r in ra.replicas if r not in live],
            ))
        brokers = []
        for broker_id, registration in sorted(ctx.live_brokers.items()):
            protocols = registration.listener_security_protocol_map
            brokers.append(MetadataBroker(
                broker_id,
                [MetadataEndpoint(e.port, e.host, e.listener, protocols.get(e.listener, e.listener))
                 for e in registration.endpoints],
                registration.rack,
            ))
        return states, brokers
