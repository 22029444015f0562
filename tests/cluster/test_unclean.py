"""Unclean leader election (issue 5): off, a partition whose ISR is all dead waits for an ISR member; on, a replica
outside the ISR leads and the controller says data may be lost."""

from __future__ import annotations

import json
import logging

from confluent_kafka import Producer
from harness import ThreadedCluster
from workload import create_topic_with_assignment, partition_view, read_back

from brokers import wait_for
from kafka_clients import opened

TOPIC = "u"


def _produce(bootstrap: str, count: int) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}))
    errors: list[object] = []
    for i in range(count):
        producer.produce(TOPIC, value=b"%06d" % i, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(60) == 0
    assert not errors


def _kill_all_isr_members(c: ThreadedCluster) -> int:
    """Replicas 0,1,2; broker 3 stays up and hosts nothing. Broker 2 dies first and drops out of the ISR, then 0
    and 1 die. Returns the last ISR member (the one whose return brings the partition back cleanly)."""
    c.kill(2)
    wait_for(lambda: sorted(c.partition_meta(TOPIC, 0).isr) == [0, 1], 30, what="broker 2 out of the ISR")
    leader = c.leader_of(TOPIC, 0)
    other = 1 - leader
    c.kill(other)
    wait_for(lambda: list(c.partition_meta(TOPIC, 0).isr) == [leader], 30, what=f"ISR down to {leader}")
    c.kill(leader)
    wait_for(lambda: _offline(c), 30, what="the partition offline")
    return leader


def _offline(c: ThreadedCluster) -> bool:
    """No live leader in the store (-1, or a dead broker when the controller died with it) and none for clients."""
    state = json.loads(c.znode(f"/brokers/topics/{TOPIC}/partitions/0/state") or b"{}")
    live = c.run(lambda: {i for i, b in c.cluster.brokers.items() if b.running})
    return state.get("leader") not in live and partition_view(c.bootstrap, TOPIC)[0][0] == -1


def _cluster(cluster_factory, unclean: bool) -> ThreadedCluster:
    c = cluster_factory(4)
    create_topic_with_assignment(c.bootstrap, TOPIC, {0: [0, 1, 2]},
                                 {"min.insync.replicas": "1", "unclean.leader.election.enable": str(unclean).lower()})
    wait_for(lambda: c.leader_of(TOPIC, 0) == 0, 30, what="broker 0 leading")
    return c


def test_unclean_off_keeps_the_partition_offline_until_an_isr_member_returns(cluster_factory) -> None:
    c = _cluster(cluster_factory, unclean=False)
    _produce(c.bootstrap, 200)
    last = _kill_all_isr_members(c)
    c.start_broker(2)  # a live replica, but not in the ISR
    wait_for(lambda: c.run(lambda: 2 in c.broker(3).metadata.brokers), 30, what="broker 2 registered again")
    c.controller_idle()
    assert _offline(c), "a replica outside the ISR was elected"
    c.start_broker(last)
    wait_for(lambda: c.leaders_seen(TOPIC, 0) == {last}, 30, what=f"broker {last} (the last ISR member) leading")
    final = read_back(c.bootstrap, TOPIC, 1)
    assert sorted(final.values()) == [b"%06d" % i for i in range(200)]


def test_unclean_on_elects_a_replica_outside_the_isr_and_logs_possible_loss(cluster_factory, caplog) -> None:
    caplog.set_level(logging.WARNING)
    c = _cluster(cluster_factory, unclean=True)
    _produce(c.bootstrap, 50)
    _kill_all_isr_members(c)
    c.start_broker(2)
    wait_for(lambda: c.leader_of(TOPIC, 0) == 2, 30, what="broker 2 (outside the ISR) leading")
    assert list(c.partition_meta(TOPIC, 0).isr) == [2]
    warnings = [r.getMessage() for r in caplog.records if "data may be lost" in r.getMessage()]
    assert any("partition u-0" in w and "broker 2" in w for w in warnings), warnings
    _produce(c.bootstrap, 10)  # the partition serves again
