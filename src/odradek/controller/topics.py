"""Topic creation and partition additions (seed 001 sections 8.2.1 and 8.3.2, ``onNewPartitionCreation``): new
topic znodes and new partitions in existing ones become New, then Online with a first leader.

Topics removed behind the controller's back (not through ``/admin/delete_topics``) are forgotten here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.controller.context import ReplicaAssignment, TopicPartition
from odradek.controller.election import Election
from odradek.controller.events import PartitionModifications, TopicChange
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState
from odradek.coordination.store import WatchedEvent
from odradek.coordination.znodes import TopicAssignment

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState

__all__ = ["TopicManager"]


class TopicManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas

    def topic_watch(self, topic: str) -> Callable[[WatchedEvent], None]:
        return self._shared.watch(("topic", topic), lambda: PartitionModifications(topic))

    def load(self, topic: str, assignment: TopicAssignment) -> list[TopicPartition]:
        """Take a topic znode as read into the context; returns the partitions it did not know."""
        ctx = self._shared.ctx
        ctx.all_topics.add(topic)
        ctx.topic_ids[topic] = assignment.topic_id
        added = []
        for partition, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, partition)
            if tp in ctx.assignments:
                continue
            ctx.assignments[tp] = ReplicaAssignment(
                tuple(replicas),
                tuple(assignment.adding_replicas.get(partition, ())),
                tuple(assignment.removing_replicas.get(partition, ())),
            )
            added.append(tp)
        return sorted(added)

    async def on_change(self) -> None:
        """``TopicChangeListener``."""
        shared = self._shared
        ctx = shared.ctx
        names = await shared.store.topic_names(shared.watch("topics", TopicChange))
        new_topics = names - ctx.all_topics
        gone = ctx.all_topics - names
        for topic in gone:
            if not ctx.is_queued_for_deletion(topic):
                # Removed behind the controller's back (not through /admin/delete_topics): forget it.
                for tp in ctx.partitions_of(topic):
                    shared.partition_states.remove(tp)
                for replica in ctx.replicas_for(ctx.partitions_of(topic)):
                    shared.replica_states.remove(replica)
                ctx.remove_topic(topic)
        loaded = await shared.store.topics(new_topics, self.topic_watch)
        new_partitions: list[TopicPartition] = []
        for topic, lt in loaded.items():
            new_partitions.extend(self.load(topic, lt.assignment))
        if new_partitions:
            log.info("controller %d: new topics %s", shared.broker_id, sorted(loaded))
            await self._on_new_partitions(new_partitions)

    async def on_partition_modifications(self, topic: str) -> None:
        """``PartitionModificationsListener``: partitions added to an existing topic."""
        shared = self._shared
        ctx = shared.ctx
        if topic not in ctx.all_topics:
            return
        loaded = await shared.store.topics([topic], self.topic_watch)
        if topic not in loaded:
            return
        added = [TopicPartition(topic, p) for p in loaded[topic].assignment.partitions
                 if TopicPartition(topic, p) not in ctx.assignments]
        if not added:
            return
        if ctx.is_queued_for_deletion(topic):
            log.error("controller %d: not adding partitions %s of %s: it is being deleted", shared.broker_id,
                      [tp.partition for tp in added], topic)
            return
        self.load(topic, loaded[topic].assignment)
        await self._on_new_partitions(sorted(added))

    async def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        """``onNewPartitionCreation``: New, then Online with a first leader, replicas likewise."""
        replicas = self._shared.ctx.replicas_for(partitions)
        await self._partitions.to(partitions, P.NEW)
        await self._replicas.to(replicas, R.NEW)
        await self._partitions.to(partitions, P.ONLINE, Election.OFFLINE)
        await self._replicas.to(replicas, R.ONLINE)
