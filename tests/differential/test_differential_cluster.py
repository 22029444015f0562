"""The cluster corpus (``cluster_scenarios.py``): what only a cluster shows, sent to a three-broker Apache Kafka 3.9
(ZooKeeper mode) and a three-broker odradek with the same settings and racks, compared as the one-broker corpus is.

Both clusters are started once for the module; each scenario works on topics named for itself, and a broker it
stopped is started again (and every broker waited for) before the next one runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_scenarios import SCENARIOS, SETTINGS
from differential_check import Identified, run_both
from differential_corpus import Act, Scenario
from differential_normalise import SelfIds
from differential_runner import Target, settle

from odradek.apache_kafka import KAFKA_3, KafkaCluster
from odradek.coordination.localzk import LocalZooKeeper
from odradek.testing import ThreadedCluster

RACKS = ["rack-a", "rack-b", "rack-c"]


class _KafkaActor:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    def act(self, act: Act) -> None:
        broker = self.cluster.broker(act.broker)
        broker.stop() if act.verb == "stop" else broker.start()

    def restore(self) -> bool:
        stopped = [b for b in self.cluster.brokers if not b.running()]
        for broker in stopped:
            broker.start()
        return bool(stopped)


class _OdradekActor:
    def __init__(self, cluster: ThreadedCluster) -> None:
        self.cluster = cluster

    def act(self, act: Act) -> None:
        if act.verb == "stop":
            self.cluster.stop(act.broker)
        else:
            self.cluster.start_broker(act.broker)

    def restore(self) -> bool:
        stopped = self.cluster.run(lambda: [i for i, b in self.cluster.cluster.brokers.items() if not b.running])
        for broker_id in stopped:
            self.cluster.start_broker(broker_id)
        return bool(stopped)


def _identified(name: str, peers: dict[int, str], actor: _KafkaActor | _OdradekActor) -> Identified:
    target = Target.of(name, peers[min(peers)], peers=peers, actor=actor)
    settle(target)
    ports = {node: int(address.rsplit(":", 1)[1]) for node, address in peers.items()}
    return target, SelfIds(target.node_id, target.host, target.port, ports)


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[Identified]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-3.9-cluster"), version=KAFKA_3, brokers=3,
                           zookeeper=zookeeper.hosts, racks=RACKS, overrides=SETTINGS).start()
    try:
        yield _identified("kafka-3.9-cluster", {b.node_id: b.address for b in cluster.brokers}, _KafkaActor(cluster))
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def odradek_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identified]:
    cluster = ThreadedCluster(3, tmp_path_factory.mktemp("odradek-cluster"), first_broker_id=1, racks=RACKS,
                              overrides=SETTINGS).start()
    try:
        peers = dict(zip(cluster.broker_ids, cluster.bootstrap.split(","), strict=True))
        yield _identified("odradek-cluster", peers, _OdradekActor(cluster))
    finally:
        cluster.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_cluster_scenario(scenario: Scenario, kafka_cluster: Identified, odradek_cluster: Identified) -> None:
    run_both(scenario, kafka_cluster, odradek_cluster)
