"""Kafka's ``RoundRobinAssignor``: all partitions of all subscribed topics, sorted, dealt round-robin over the
members in ``MemberInfo`` order, skipping members not subscribed to the partition's topic (the cursor carries
over between topics)."""

from __future__ import annotations

from collections.abc import Mapping

from .assignor_base import Assignor, PartitionsPerTopic, member_sort_key, normalize_topics
from .model import Subscription, TopicPartition, partitions_of

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(Assignor):
    """Kafka's ``roundrobin`` assignor."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        counts = {meta.name: meta.count for meta in normalize_topics(partitions_per_topic)}
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))
        if not members:
            return result
        topic_sets = [subscriptions[m].topic_set for m in members]
        n = len(members)
        cursor = 0
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        for topic in topics:
            count = counts.get(topic)
            if count is None:
                continue
            for tp in partitions_of(topic, count):
                while topic not in topic_sets[cursor]:
                    cursor = (cursor + 1) % n
                result[members[cursor]].append(tp)
                cursor = (cursor + 1) % n
        return result
