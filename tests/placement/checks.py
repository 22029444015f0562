"""Kafka's own test predicates (``AbstractStickyAssignorTest``, ``RackAwareTest``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from odradek.placement import Subscription, TopicPartition


def verify_validity_and_balance(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, Sequence[TopicPartition]]
) -> None:
    """``AbstractStickyAssignorTest.verifyValidityAndBalance`` (non-cooperative part)."""
    members = sorted(assignment)
    sets = {m: set(assignment[m]) for m in members}
    topics = {m: {tp.topic for tp in assignment[m]} for m in members}
    for i, a in enumerate(members):
        for tp in assignment[a]:
            assert tp.topic in subscriptions[a].topic_set, f"{a} got {tp} of a topic it does not subscribe to"
        for b in members[i + 1 :]:
            assert not (sets[a] & sets[b]), f"{a} and {b} share {sets[a] & sets[b]}"
            if abs(len(assignment[a]) - len(assignment[b])) > 1:
                common = topics[a] & topics[b]
                assert not common, f"{a} ({len(assignment[a])}) and {b} ({len(assignment[b])}) share topics {common}"


def is_fully_balanced(assignment: Mapping[str, Sequence[TopicPartition]]) -> bool:
    sizes = [len(p) for p in assignment.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def revoked_and_added(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, Sequence[TopicPartition]]
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Partitions revoked from their owner, and partitions added to a member that did not own them."""
    revoked: set[TopicPartition] = set()
    added: set[TopicPartition] = set()
    for m, sub in subscriptions.items():
        got = set(assignment.get(m, ()))
        owned = set(sub.owned_partitions)
        revoked |= owned - got
        added |= got - owned
    return revoked, added


def every_partition_once(
    partition_counts: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    assignment: Mapping[str, Sequence[TopicPartition]],
) -> None:
    """Every partition of a subscribed topic is assigned exactly once, and only to a subscriber."""
    seen = Counter(tp for parts in assignment.values() for tp in parts)
    assert all(n == 1 for n in seen.values()), [tp for tp, n in seen.items() if n > 1][:5]
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    expected = {TopicPartition(t, p) for t in subscribed if t in partition_counts for p in range(partition_counts[t])}
    assert set(seen) == expected
    for m, parts in assignment.items():
        for tp in parts:
            assert tp.topic in subscriptions[m].topic_set


def check_replica_distribution(
    assignment: Mapping[int, Sequence[int]],
    rack_of: Mapping[int, str | None],
    n_brokers: int,
    n_partitions: int,
    rf: int,
    verify_rack_aware: bool = True,
    verify_leader_distribution: bool = True,
    verify_replicas_distribution: bool = True,
) -> None:
    """``RackAwareTest.checkReplicaDistribution``."""
    for p, replicas in assignment.items():
        assert len(set(replicas)) == len(replicas), f"partition {p} repeats a broker: {replicas}"
        if verify_rack_aware:
            assert len({rack_of[b] for b in replicas}) == rf, f"partition {p} racks: {replicas}"
    if verify_leader_distribution:
        leaders = Counter(r[0] for r in assignment.values())
        assert sorted(leaders.values()) == [n_partitions // n_brokers] * n_brokers, leaders
    if verify_replicas_distribution:
        replicas_per_broker = Counter(b for r in assignment.values() for b in r)
        assert sorted(replicas_per_broker.values()) == [n_partitions * rf // n_brokers] * n_brokers
