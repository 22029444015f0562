"""The election and failover scenario on a real ZooKeeper, through the kazoo backend."""

from __future__ import annotations

import uuid

import pytest
from controller_support import SimCluster, wait_for

from odradek.coordination import ZooKeeperBackend


@pytest.mark.zookeeper
async def test_election_failover_and_leader_moves_on_real_zookeeper(zookeeper_hosts: str) -> None:
    backend = ZooKeeperBackend(zookeeper_hosts, f"/odradek-controller-{uuid.uuid4().hex[:12]}")
    c = await SimCluster(backend, {"auto.leader.rebalance.enable": False}).start(3)
    try:
        first = await c.wait_controller()
        assert first.epoch == 1
        await c.create_topic("t", {0: [first.broker_id, (first.broker_id + 1) % 3]})
        state = await wait_for(lambda: c.state("t", 0), what="t-0 created on ZooKeeper")
        assert state[0].leader == first.broker_id
        await c.brokers[first.broker_id].kill()
        second = await c.wait_controller(not_on=first.broker_id)
        assert second.epoch == 2

        async def moved() -> bool:
            found = await c.state("t", 0)
            return found is not None and found[0].leader == (first.broker_id + 1) % 3

        await wait_for(moved, what="t-0 led by the surviving replica")
        found = await c.state("t", 0)
        assert found is not None and found[0].leader_epoch == 1 and found[0].controller_epoch == 2
    finally:
        await c.stop()
