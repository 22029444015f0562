"""Brokers die and come back under load; nothing acknowledged is lost, nothing seen disappears (issue 5)."""

from __future__ import annotations

from workload import Load, check_nothing_lost, create_replicated_topic, read_back

from brokers import wait_for
from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "ha"
PARTITIONS = 3


def test_leaders_killed_and_stopped_in_turn_lose_nothing(cluster_factory) -> None:
    c = cluster_factory(3)
    create_replicated_topic(c.bootstrap, TOPIC, PARTITIONS)
    load = Load(c.bootstrap, TOPIC, PARTITIONS)
    try:
        load.progress(500)
        for clean in (False, True):
            for p in range(PARTITIONS):
                leader = c.leader_of(TOPIC, p)
                if clean:
                    c.stop_broker(leader, controlled=True)
                else:
                    c.kill(leader)
                wait_for(lambda p=p, leader=leader: c.leader_of(TOPIC, p) not in (leader, -1), 60,
                         what=f"a new leader for {TOPIC}-{p}")
                load.progress(300)
                c.start_broker(leader)
                wait_for(lambda: c.full_isr(TOPIC, PARTITIONS), 60, what="every partition back to its full ISR")
                load.progress(300)
    finally:
        load.finish()
    check_nothing_lost(load, read_back(c.bootstrap, TOPIC, PARTITIONS))
    assert c.full_isr(TOPIC, PARTITIONS)


def test_controller_failover_moves_to_another_broker_with_a_higher_epoch(cluster_factory) -> None:
    c = cluster_factory(3)
    wait_for(lambda: c.controller_id() is not None, 30, what="a controller")
    first = c.controller_id()
    assert first is not None
    epoch = c.controller_epoch(first)
    c.kill(first)
    wait_for(lambda: c.controller_id() not in (None, first), 30, what="a new controller")
    new = c.controller_id()
    assert new is not None
    assert c.controller_epoch(new) > epoch
    # the new controller serves at once: a topic created now gets leaders
    with KafkaConnection(c.bootstrap) as conn:
        assert create_topic(conn, "after-failover", 2, 2, {})[0] == ErrorCode.none
