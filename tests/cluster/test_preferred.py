"""Preferred leaders (issue 5): a bounce leaves leaderships on the brokers that stayed up; ElectLeaders (and the
``odradek elect --preferred`` tool) puts them back on each partition's first replica, and so does auto rebalance."""

from __future__ import annotations

from click.testing import CliRunner
from harness import ThreadedCluster
from workload import create_topic_with_assignment, partition_view

from brokers import wait_for
from odradek.cli.cluster import PREFERRED, controller_connection, elect, elect_leaders
from odradek.errors import ErrorCode

TOPIC = "pref"
ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1], 3: [1, 0, 2]}


def _leaders(c: ThreadedCluster) -> dict[int, int]:
    return {p: v[0] for p, v in partition_view(c.bootstrap, TOPIC).items()}


def _preferred(c: ThreadedCluster) -> bool:
    return _leaders(c) == {p: r[0] for p, r in ASSIGNMENT.items()}


def _full_isr(c: ThreadedCluster) -> bool:
    return all(sorted(v[2]) == [0, 1, 2] for v in partition_view(c.bootstrap, TOPIC).values())


def _bounce_broker_1(c: ThreadedCluster) -> None:
    """Broker 1 prefers partitions 1 and 3; after a clean bounce it leads neither until someone rebalances."""
    wait_for(lambda: _preferred(c) and _full_isr(c), 30, what="preferred leaders with full ISRs")
    c.stop_broker(1, controlled=True)
    wait_for(lambda: all(v[0] not in (1, -1) for v in partition_view(c.bootstrap, TOPIC).values()), 30,
             what="broker 1's leaderships moved")
    c.start_broker(1)
    wait_for(lambda: _full_isr(c), 30, what="broker 1 back in every ISR")


def test_elect_leaders_restores_preferred_leaders_after_a_bounce(cluster_factory) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, TOPIC, ASSIGNMENT)
    _bounce_broker_1(c)
    c.controller_idle()
    leaders = _leaders(c)
    assert leaders[1] != 1 and leaders[3] != 1, f"leaders {leaders} are not unbalanced (auto rebalance is off)"
    with controller_connection(c.bootstrap) as conn:
        outcome = elect_leaders(conn, PREFERRED, [(TOPIC, 1), (TOPIC, 0)])
    assert outcome[(TOPIC, 1)][0] == ErrorCode.none
    assert outcome[(TOPIC, 0)][0] == ErrorCode.election_not_needed
    result = CliRunner().invoke(elect, ["--bootstrap-server", c.bootstrap, "--preferred", "--all-topic-partitions"])
    assert result.exit_code == 0, result.output
    assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-3" in result.output
    wait_for(lambda: _preferred(c), 30, what="every partition led by its preferred replica")


def test_auto_rebalance_restores_preferred_leaders_after_a_bounce(cluster_factory) -> None:
    c = cluster_factory(3, overrides={"leader.imbalance.check.interval.seconds": "1"})
    create_topic_with_assignment(c.bootstrap, TOPIC, ASSIGNMENT)
    _bounce_broker_1(c)
    wait_for(lambda: _preferred(c), 30, what="auto rebalance moving leaders back to preferred replicas")
