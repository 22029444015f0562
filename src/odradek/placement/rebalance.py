"""Auto leader rebalance: which partitions should move their leadership back to the preferred replica.

The ZooKeeper-era controller (``checkAndTriggerAutoLeaderRebalance``) acts per broker once the share of partitions
it prefers but does not lead is strictly above ``leader.imbalance.per.broker.percentage``; the KRaft controller
ignores the percentage and re-elects every partition not led by ``replicas[0]``, at most 1,000 per pass.  Kept apart
from the controllers so the arithmetic (and its strict comparison) is tested once and shared.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence

from .election import preferred_leader

__all__ = [
    "DEFAULT_AUTO_LEADER_REBALANCE_ENABLE",
    "DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS",
    "DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE",
    "KRAFT_MAX_ELECTIONS_PER_IMBALANCE",
    "imbalanced_brokers",
    "kraft_imbalanced_partitions",
    "leader_imbalance_ratio",
    "should_trigger_rebalance",
]

DEFAULT_AUTO_LEADER_REBALANCE_ENABLE = True
DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = 300
DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10
#: ``ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE``: KRaft reschedules after 10 ms when a pass hit it.
KRAFT_MAX_ELECTIONS_PER_IMBALANCE = 1000


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
    assignments: Mapping[Hashable, Sequence[int]],
    leaders: Mapping[Hashable, int],
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    excluded: Iterable[Hashable] = (),
    isr: Mapping[Hashable, Collection[int]] | None = None,
    live: Collection[int] | None = None,
) -> dict[int, list[Hashable]]:
    """ZooKeeper-era rebalance: brokers whose ratio triggers, each with the partitions to re-elect.

    Partitions are grouped by preferred replica (``assignment[0]``); ``excluded`` partitions (topics being
    deleted) are ignored and partitions without leadership information count in the denominator only.  With
    ``isr`` and ``live`` given, only partitions whose preferred replica would win the preferred election are
    returned, as Kafka filters them before electing.
    """
    skip = set(excluded)
    by_preferred: dict[int, list[Hashable]] = {}
    for partition, replicas in assignments.items():
        if partition in skip or not replicas:
            continue
        by_preferred.setdefault(replicas[0], []).append(partition)
    result: dict[int, list[Hashable]] = {}
    for broker, partitions in by_preferred.items():
        off = [p for p in partitions if p in leaders and leaders[p] != broker]
        if not should_trigger_rebalance(leader_imbalance_ratio(len(partitions), len(off)), imbalance_percentage):
            continue
        if isr is not None and live is not None:
            off = [p for p in off if preferred_leader(assignments[p], isr.get(p, ()), live) == broker]
        result[broker] = off
    return result


def kraft_imbalanced_partitions(
    assignments: Mapping[Hashable, Sequence[int]],
    leaders: Mapping[Hashable, int],
    limit: int = KRAFT_MAX_ELECTIONS_PER_IMBALANCE,
) -> tuple[list[Hashable], bool]:
    """KRaft rebalance pass: up to ``limit`` partitions not led by ``replicas[0]``, and whether more remain (then
    Kafka runs the next pass after 10 ms instead of the check interval)."""
    imbalanced = [p for p, replicas in assignments.items() if replicas and leaders.get(p) != replicas[0]]
    return imbalanced[:limit], len(imbalanced) > limit
