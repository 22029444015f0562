"""Value types shared by the placement algorithms: brokers, partitions and consumer subscriptions.

``TopicPartition`` is a tuple so that it is cheap to create by the million (the largest groups Kafka tests
hold a million partitions) and orders by topic then partition for free.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import NamedTuple

__all__ = ["BrokerMetadata", "PartitionInfo", "Subscription", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable and ordered by ``(topic, partition)``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse Kafka's ``topic-3`` notation (split at the last ``-``)."""
        topic, _, partition = text.rpartition("-")
        return cls(topic, int(partition))


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as replica placement sees it: its id and optional rack."""

    id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition with the racks of its replicas, the input of rack-aware consumer assignment (KIP-881).

    ``None`` racks are replicas on brokers without a rack, as in Kafka's ``Node.rack()``.
    """

    topic: str
    partition: int
    replica_racks: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Subscription:
    """One group member's subscription, as Kafka's ``ConsumerPartitionAssignor.Subscription``.

    ``topics`` keeps subscription order; ``owned_partitions`` is what a cooperative member still owns;
    ``generation_id`` is the (KIP-792) generation sent beside it; ``user_data`` is assignor-specific bytes.
    """

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int | None = None
    rack: str | None = None
    group_instance_id: str | None = None
    _topic_set: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", tuple(self.owned_partitions))
        object.__setattr__(self, "_topic_set", frozenset(self.topics))

    @property
    def topic_set(self) -> frozenset[str]:
        """The subscribed topics as a set (membership tests are hot in the assignors)."""
        return self._topic_set


_new_topic_partition = partial(tuple.__new__, TopicPartition)


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    """``[topic-0, ..., topic-(count-1)]`` built at C speed (no Python-level ``__new__`` per partition)."""
    return list(map(_new_topic_partition, zip(repeat(topic, count), range(count), strict=True)))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Every 700 allocations CPython would otherwise run a collection that walks the young objects, and the older
    generations get walked repeatedly as they grow; for a million ``TopicPartition`` tuples that is over half of
    the time of a from-scratch assignment.  Tuples and lists of ints and strings create no cycles, so nothing is
    lost by deferring collection to the end.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_topic_partitions(pairs: Iterable[tuple[str, int]]) -> list[TopicPartition]:
    """Wrap ``(topic, partition)`` pairs as ``TopicPartition``s."""
    return list(map(TopicPartition._make, pairs))
