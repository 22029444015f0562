"""Auto leader rebalance arithmetic of the ZooKeeper-era controller (``checkAndTriggerAutoLeaderRebalance``).

Kept apart from the controller so the threshold comparison (strictly greater than the configured percentage)
is tested once and shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE",
    "imbalanced_brokers",
    "leader_imbalance_ratio",
    "should_trigger_rebalance",
]

DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10


def leader_imbalance_ratio(preferred_count: int, not_led_by_preferred: int) -> float:
    """Share of the partitions preferring a broker that it does not lead (0.0 when it prefers none)."""
    if preferred_count <= 0:
        return 0.0
    return not_led_by_preferred / preferred_count


def should_trigger_rebalance(
    ratio: float, imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE
) -> bool:
    """Kafka triggers a preferred election only when the ratio is strictly above the percentage."""
    return ratio > imbalance_percentage / 100


def imbalanced_brokers(
    assignments: Mapping[object, Sequence[int]],
    leaders: Mapping[object, int],
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    excluded: Iterable[object] = (),
) -> dict[int, list[object]]:
    """Brokers whose imbalance ratio triggers a rebalance, each with its partitions led by someone else.

    Partitions are grouped by preferred replica (``assignment[0]``); partitions without leadership information
    count in the denominator only, and ``excluded`` partitions (topics being deleted) are ignored.
    """
    skip = set(excluded)
    by_preferred: dict[int, list[object]] = {}
    for partition, replicas in assignments.items():
        if partition in skip or not replicas:
            continue
        by_preferred.setdefault(replicas[0], []).append(partition)
    result: dict[int, list[object]] = {}
    for broker, partitions in by_preferred.items():
        off = [p for p in partitions if p in leaders and leaders[p] != broker]
        if should_trigger_rebalance(leader_imbalance_ratio(len(partitions), len(off)), imbalance_percentage):
            result[broker] = off
    return result
