"""What the active controller knows about the cluster (seed 001 section 2), as plain data.

Only the controller's event loop touches a :class:`ControllerContext`, one event at a time, so nothing here locks.
Everything is rebuilt from the store on each failover (:mod:`odradek.controller.zkstore`), and nothing survives a
resignation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.coordination.znodes import BrokerRegistration, TopicPartition

__all__ = ["ControllerContext", "LeaderIsr", "PartitionReplica", "ReplicaAssignment", "TopicPartition"]


class PartitionReplica(NamedTuple):
    topic: str
    partition: int
    replica: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's state znode with its version (Kafka's ``LeaderIsrAndControllerEpoch`` + ``zkVersion``)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas in the topic znode; during a reassignment ``replicas`` is the union of the target
    and the original replicas, and ``adding``/``removing`` say which is which (KIP-455's layout)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    """broker id -> czxid of its registration znode: tells a restarted broker from its previous life."""
    shutting_down: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str | None] = field(default_factory=dict)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    being_reassigned: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """partition -> target replicas (RAR) of a reassignment in progress."""
    reassignment_from_znode: set[TopicPartition] = field(default_factory=set)
    """Reassignments requested through /admin/reassign_partitions, which is rewritten as they finish."""
    preferred_election_in_progress: set[TopicPartition] = field(default_factory=set)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """broker id -> partitions whose replica there sits on a failed log directory (Kafka's same-named map)."""

    # ----------------------------------------------------------------------------------- brokers

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that can lead: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    @property
    def live_or_shutting_down(self) -> set[int]:
        return set(self.live_brokers)

    # ----------------------------------------------------------------------------------- topics

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        ra = self.assignments.get(tp)
        return ra.replicas if ra else ()

    def replicas_for(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp.topic, tp.partition, r) for tp in partitions for r in self.replicas_of(tp)]

    def partitions_on(self, broker: int) -> list[TopicPartition]:
        return sorted(tp for tp, ra in self.assignments.items() if broker in ra.replicas)

    def replicas_on(self, brokers: Iterable[int]) -> list[PartitionReplica]:
        wanted = set(brokers)
        return [
            PartitionReplica(tp.topic, tp.partition, r)
            for tp, ra in sorted(self.assignments.items())
            for r in ra.replicas
            if r in wanted
        ]

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
            self.being_reassigned.pop(tp, None)
            self.reassignment_from_znode.discard(tp)
            self.preferred_election_in_progress.discard(tp)

    def is_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas_of(tp) if not self.is_replica_online(r, tp)]

    def is_replica_online(self, broker: int, tp: TopicPartition | None = None) -> bool:
        """Kafka's ``isReplicaOnline``: its broker is registered and its log directory has not failed."""
        return broker in self.live_brokers and (tp is None or tp not in self.replicas_on_offline_dirs.get(broker, ()))
