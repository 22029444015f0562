"""Broker failure on a real ZooKeeper (issue 5): three ``odradek broker --zookeeper`` processes, the leader of each
partition killed with SIGKILL and restarted in turn under an idempotent acks=all load, then the same with SIGTERM
(controlled shutdown); every acknowledged message survives exactly once and in order, nothing seen disappears,
and every partition ends with its full ISR."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workload import Load, check_nothing_lost, create_replicated_topic, partition_view, read_back

from brokers import ZooKeeperBroker, wait_for
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

TOPIC = "zk"
PARTITIONS = 3
OVERRIDES = {
    "zookeeper.session.timeout.ms": "2000", "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0", "leader.imbalance.check.interval.seconds": "300",
}


@pytest.fixture
def zk_cluster(tmp_path: Path) -> Iterator[list[ZooKeeperBroker]]:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    brokers = [ZooKeeperBroker(i, f"{server.hosts}/odradek", tmp_path, OVERRIDES) for i in range(3)]
    try:
        for b in brokers:
            b.start()
        yield brokers
    finally:
        for b in brokers:
            if b.alive:
                b.signal(signal.SIGKILL)
        server.stop()


def _view(brokers: list[ZooKeeperBroker]) -> dict[int, Any]:
    for b in brokers:
        if b.alive:
            try:
                return partition_view(b.address, TOPIC)
            except OSError:
                continue
    return {}


def _full_isr(brokers: list[ZooKeeperBroker]) -> bool:
    view = _view(brokers)
    return len(view) == PARTITIONS and all(sorted(v[2]) == [0, 1, 2] and v[0] >= 0 for v in view.values())


def test_leaders_sigkilled_and_sigtermed_in_turn_on_zookeeper_lose_nothing(zk_cluster: list[ZooKeeperBroker]) -> None:
    brokers = zk_cluster
    bootstrap = ",".join(b.address for b in brokers)
    create_replicated_topic(brokers[0].address, TOPIC, PARTITIONS)
    wait_for(lambda: _full_isr(brokers), 30, what="the topic online with full ISRs")
    load = Load(bootstrap, TOPIC, PARTITIONS)
    try:
        load.progress(500)
        for sig in (signal.SIGKILL, signal.SIGTERM):
            for p in range(PARTITIONS):
                leader = _view(brokers)[p][0]
                brokers[leader].signal(sig)
                wait_for(lambda p=p, leader=leader: _view(brokers).get(p, (-1,))[0] not in (leader, -1), 60,
                         what=f"a new leader for {TOPIC}-{p} after signal {sig}")
                load.progress(300)
                brokers[leader].start()
                wait_for(lambda: _full_isr(brokers), 60, what="every partition back to its full ISR")
                load.progress(300)
    finally:
        load.finish()
    check_nothing_lost(load, read_back(bootstrap, TOPIC, PARTITIONS))
    assert _full_isr(brokers)
