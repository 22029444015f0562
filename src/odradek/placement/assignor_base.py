"""What every consumer assignor shares: input normalisation, Kafka's member order and the rack-awareness test.

Inputs are iterated in the order the caller gives them (Kafka's results depend on its HashMap iteration order;
the caller, like the recorded vectors, supplies that order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .java import java_key
from .model import PartitionInfo, Subscription, TopicPartition

__all__ = [
    "Assignor",
    "PartitionsPerTopic",
    "TopicMeta",
    "member_sort_key",
    "normalize_topics",
    "use_rack_aware_assignment",
]

PartitionsPerTopic = Mapping[str, int | Sequence[PartitionInfo]]


@dataclass(slots=True)
class TopicMeta:
    """A topic's partition count and, when known, the set of replica racks of each partition."""

    name: str
    count: int
    racks: list[frozenset[str]] | None


def normalize_topics(partitions_per_topic: PartitionsPerTopic) -> list[TopicMeta]:
    """Turn counts or ``PartitionInfo`` lists into :class:`TopicMeta`, keeping the caller's topic order."""
    metas: list[TopicMeta] = []
    for topic, value in partitions_per_topic.items():
        if isinstance(value, int):
            metas.append(TopicMeta(topic, value, None))
            continue
        infos = sorted(value, key=lambda p: p.partition)
        for i, info in enumerate(infos):
            if info.partition != i:
                raise ValueError(f"partitions of {topic} must be numbered 0..n-1, got {info.partition} at {i}")
        racks = [frozenset(r for r in info.replica_racks if r is not None) for info in infos]
        metas.append(TopicMeta(topic, len(infos), racks))
    return metas


def member_sort_key(member_id: str, subscription: Subscription) -> tuple[int, str]:
    """Kafka's ``MemberInfo`` order: static members first (by ``group.instance.id``), then by member id."""
    if subscription.group_instance_id is not None:
        return (0, java_key(subscription.group_instance_id))
    return (1, java_key(member_id))


def use_rack_aware_assignment(
    consumer_racks: set[str],
    partition_racks: set[str],
    racks_per_partition: Sequence[frozenset[str]],
    prefer_rack_aware_logic: bool,
) -> bool:
    """KIP-881's test: rack-aware only if some consumer rack hosts replicas, and (unless preferred) only if
    some partition is missing a rack that others have, i.e. racks actually matter."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    if prefer_rack_aware_logic:
        return True
    return any(r != partition_racks for r in racks_per_partition)


class Assignor:
    """Common surface of the four assignors; ``prefer_rack_aware_logic`` is Kafka's test knob."""

    name: str = ""

    def __init__(self, prefer_rack_aware_logic: bool = False) -> None:
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    def assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError
