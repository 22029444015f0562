"""Auto leader rebalance selection and the configuration defaults it runs with."""

from __future__ import annotations

import pytest

from odradek.placement import (
    DEFAULT_AUTO_LEADER_REBALANCE_ENABLE,
    DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE,
    KRAFT_MAX_ELECTIONS_PER_IMBALANCE,
    imbalanced_brokers,
    kraft_imbalanced_partitions,
)

from .vectors import cases

OURS: dict[str, object] = {
    "leader.imbalance.per.broker.percentage": DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    "leader.imbalance.check.interval.seconds": DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    "auto.leader.rebalance.enable": DEFAULT_AUTO_LEADER_REBALANCE_ENABLE,
    "unclean.leader.election.enable": DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE,
}
OURS["ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE (KRaft, not configurable)"] = (
    KRAFT_MAX_ELECTIONS_PER_IMBALANCE
)


@pytest.mark.parametrize("case", [c for c in cases("config_default") if c["name"] in OURS], ids=lambda c: c["name"])
def test_defaults_are_kafkas(case: dict) -> None:
    assert OURS[case["name"]] == case["expected"]["default"]


def test_zk_rebalance_picks_brokers_strictly_above_the_percentage() -> None:
    # broker 1 prefers 10 partitions and leads 9 of them: exactly 10 % off, no rebalance;
    # broker 2 prefers 4 and leads 2: 50 % off, its two partitions are re-elected
    assignments = {f"a{i}": [1, 2] for i in range(10)} | {f"b{i}": [2, 1] for i in range(4)}
    leaders = {f"a{i}": 1 for i in range(9)} | {"a9": 2, "b0": 2, "b1": 2, "b2": 1, "b3": 1}
    assert imbalanced_brokers(assignments, leaders) == {2: ["b2", "b3"]}
    assert imbalanced_brokers(assignments, leaders, imbalance_percentage=5) == {1: ["a9"], 2: ["b2", "b3"]}
    assert imbalanced_brokers(assignments, leaders, excluded=["b2", "b3"]) == {}


def test_zk_rebalance_keeps_only_partitions_the_preferred_replica_would_win() -> None:
    assignments = {"p0": [2, 1], "p1": [2, 1]}
    leaders = {"p0": 1, "p1": 1}
    isr = {"p0": [1, 2], "p1": [1]}  # broker 2 is out of p1's ISR: a preferred election there would fail
    assert imbalanced_brokers(assignments, leaders, isr=isr, live={1, 2}) == {2: ["p0"]}
    assert imbalanced_brokers(assignments, leaders, isr=isr, live={1}) == {2: []}


def test_kraft_rebalance_takes_every_misled_partition_in_batches() -> None:
    assignments = {i: [i % 3, (i + 1) % 3] for i in range(2500)}
    leaders = {i: (i + 1) % 3 for i in range(2500)}
    batch, more = kraft_imbalanced_partitions(assignments, leaders)
    assert len(batch) == 1000 and more
    batch, more = kraft_imbalanced_partitions(assignments, leaders, limit=5000)
    assert len(batch) == 2500 and not more
    assert kraft_imbalanced_partitions({0: [1, 2]}, {0: 1}) == ([], False)
