"""Kafka's ``RangeAssignor``, including KIP-881's rack-aware pass.

Per topic, consumers (in ``MemberInfo`` order) take contiguous ranges; the first ``P % C`` consumers take one
extra. With racks, a first pass hands each consumer only partitions with a replica on its rack (co-partitioned
topics together), and the plain pass fills the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from .assignor_base import (
    Assignor,
    PartitionsPerTopic,
    member_sort_key,
    normalize_topics,
    use_rack_aware_assignment,
)
from .java import hashmap_order, string_hash
from .model import Subscription, TopicPartition

__all__ = ["RangeAssignor"]


class _TopicState:
    """Per-topic bookkeeping of Kafka's ``TopicAssignmentState``."""

    __slots__ = (
        "consumer_racks",
        "consumers",
        "extra",
        "needs_rack_aware",
        "num_assigned",
        "partition_racks",
        "per_consumer",
        "topic",
        "unassigned",
    )

    def __init__(
        self,
        topic: str,
        count: int,
        racks: list[frozenset[str]] | None,
        consumers: list[str],
        consumer_racks: dict[str, str],
        prefer: bool,
    ) -> None:
        self.topic = topic
        self.consumers = consumers
        self.consumer_racks = {c: consumer_racks.get(c) for c in consumers}
        self.unassigned: dict[int, None] = dict.fromkeys(range(count))
        self.num_assigned = dict.fromkeys(consumers, 0)
        self.per_consumer = count // len(consumers) if consumers else 0
        self.extra = count % len(consumers) if consumers else 0
        all_consumer_racks = {consumer_racks[c] for c in consumers if c in consumer_racks}
        all_partition_racks: set[str] = set()
        if all_consumer_racks:
            self.partition_racks = racks if racks is not None else [frozenset()] * count
            for r in self.partition_racks:
                all_partition_racks |= r
        else:
            self.partition_racks = []
        self.needs_rack_aware = use_rack_aware_assignment(
            all_consumer_racks, all_partition_racks, self.partition_racks, prefer
        )

    def racks_match(self, consumer: str, p: int) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return True
        return p < len(self.partition_racks) and rack in self.partition_racks[p]

    def max_assignable(self, consumer: str) -> int:
        return max(0, self.per_consumer + (1 if self.extra > 0 else 0) - self.num_assigned[consumer])

    def on_assigned(self, consumer: str, partitions: list[int]) -> None:
        n = self.num_assigned[consumer] + len(partitions)
        self.num_assigned[consumer] = n
        if n > self.per_consumer:
            self.extra -= 1
        for p in partitions:
            self.unassigned.pop(p, None)


class RangeAssignor(Assignor):
    """Kafka's ``range`` assignor."""

    name = "range"

    def assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        consumers_per_topic: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append(member)
        consumer_racks = {m: s.rack for m, s in subscriptions.items() if s.rack}
        states: list[_TopicState] = []
        for meta in normalize_topics(partitions_per_topic):
            if meta.count == 0:
                continue
            members = sorted(consumers_per_topic.get(meta.name, []), key=lambda m: member_sort_key(m, subscriptions[m]))
            states.append(
                _TopicState(meta.name, meta.count, meta.racks, members, consumer_racks, self.prefer_rack_aware_logic)
            )
        result: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
        use_rack_aware = any(s.needs_rack_aware for s in states)
        if use_rack_aware:
            self._assign_with_rack_matching(states, result)
        for state in states:
            self._assign_ranges(state, False, result)
        if use_rack_aware:
            for lst in result.values():
                lst.sort()
        return {m: [TopicPartition(t, p) for t, p in lst] for m, lst in result.items()}

    @staticmethod
    def _assign_ranges(state: _TopicState, rack_match: bool, result: dict[str, list[tuple[str, int]]]) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            take: list[int] = []
            if limit > 0:
                for p in state.unassigned:
                    if not rack_match or state.racks_match(consumer, p):
                        take.append(p)
                        if len(take) == limit:
                            break
            if not take:
                continue
            result[consumer].extend((state.topic, p) for p in take)
            state.on_assigned(consumer, take)

    def _assign_with_rack_matching(self, states: list[_TopicState], result: dict[str, list[tuple[str, int]]]) -> None:
        # Kafka groups topics by their consumer->rack map in a HashMap, then by partition count in another
        # HashMap; both iteration orders are reproduced so shared consumers see the same capacity sequence.
        groups: dict[tuple[tuple[str, str | None], ...], list[_TopicState]] = {}
        for state in states:
            groups.setdefault(tuple(state.consumer_racks.items()), []).append(state)
        keys = list(groups)
        hashes = [
            sum(string_hash(c) ^ (string_hash(r) if r is not None else 0) for c, r in key) & 0xFFFFFFFF for key in keys
        ]
        for gi in hashmap_order(hashes):
            by_count: dict[int, list[_TopicState]] = {}
            for state in groups[keys[gi]]:
                by_count.setdefault(len(state.partition_racks), []).append(state)
            counts = list(by_count)
            for ci in hashmap_order([c & 0xFFFFFFFF for c in counts]):
                co_partitioned = by_count[counts[ci]]
                if len(co_partitioned) > 1:
                    self._assign_co_partitioned(list(keys[gi]), counts[ci], co_partitioned, result)
                elif co_partitioned[0].needs_rack_aware:
                    self._assign_ranges(co_partitioned[0], True, result)

    @staticmethod
    def _assign_co_partitioned(
        consumers: list[tuple[str, str | None]],
        num_partitions: int,
        states: list[_TopicState],
        result: dict[str, list[tuple[str, int]]],
    ) -> None:
        remaining = [c for c, _ in consumers]
        for p in range(num_partitions):
            match = next(
                (c for c in remaining if all(t.racks_match(c, p) and t.max_assignable(c) > 0 for t in states)),
                None,
            )
            if match is None:
                continue
            for t in states:
                result[match].append((t.topic, p))
                t.on_assigned(match, [p])
            if not any(t.max_assignable(match) > 0 for t in states):
                remaining.remove(match)
                if not remaining:
                    break
