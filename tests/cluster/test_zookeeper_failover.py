"""Broker failure on a real ZooKeeper (issue 5): three ``odradek broker --zookeeper`` processes, the leader of each
partition killed with SIGKILL and restarted in turn under an idempotent acks=all load, then the same with SIGTERM
(controlled shutdown); every acknowledged message survives exactly once and in order, nothing seen disappears,
and every partition ends with its full ISR."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workload import Load, check_nothing_lost, create_replicated_topic, partition_view, read_back

from brokers import wait_for
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

TOPIC = "zk"
PARTITIONS = 3
OVERRIDES = {
    "zookeeper.session.timeout.ms": "2000", "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0", "leader.imbalance.check.interval.seconds": "300",
}


class ZkBroker:
    """One ``odradek broker`` process; restarts keep its id, data directory and port."""

    def __init__(self, broker_id: int, zookeeper: str, base: Path) -> None:
        self.broker_id = broker_id
        self.zookeeper = zookeeper
        self.data_dir = base / f"broker-{broker_id}"
        self.ready = base / f"broker-{broker_id}.ready"
        self.log_path = base / f"broker-{broker_id}.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ZkBroker:
        self.ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(self.broker_id), "--zookeeper", self.zookeeper,
               "--port", str(self.port), "--data-dir", str(self.data_dir), "--ready-file", str(self.ready)]
        for k, v in OVERRIDES.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"broker {self.broker_id} exited: {self.log_path.read_text()[-3000:]}")
            return self.ready.exists()

        wait_for(ready, 60, what=f"broker {self.broker_id} ready")
        self.port = int(self.ready.read_text().splitlines()[0].rsplit(":", 1)[1])
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(60)


@pytest.fixture
def zk_cluster(tmp_path: Path) -> Iterator[list[ZkBroker]]:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    brokers = [ZkBroker(i, f"{server.hosts}/odradek", tmp_path) for i in range(3)]
    try:
        for b in brokers:
            b.start()
        yield brokers
    finally:
        for b in brokers:
            if b.alive:
                b.signal(signal.SIGKILL)
        server.stop()


def _view(brokers: list[ZkBroker]) -> dict[int, Any]:
    for b in brokers:
        if b.alive:
            try:
                return partition_view(b.address, TOPIC)
            except OSError:
                continue
    return {}


def _full_isr(brokers: list[ZkBroker]) -> bool:
    view = _view(brokers)
    return len(view) == PARTITIONS and all(sorted(v[2]) == [0, 1, 2] and v[0] >= 0 for v in view.values())


def test_leaders_sigkilled_and_sigtermed_in_turn_on_zookeeper_lose_nothing(zk_cluster: list[ZkBroker]) -> None:
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
