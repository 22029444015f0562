"""The brokers the corpus is sent to, once per session: a one-broker Apache Kafka 3.9 of its own (ZooKeeper
mode), the session's 4.x (KRaft, only for APIs 3.9 does not serve) and a one-broker odradek; each with what
identifies it as itself (node id, host, port) for the normaliser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from differential_normalise import SelfIds
from differential_runner import Target

from apache_kafka_brokers import kafka_39
from brokers import BrokerProcess
from odradek.apache_kafka import KafkaCluster
from odradek.coordination.localzk import LocalZooKeeper

Identified = tuple[Target, SelfIds]


def _identified(name: str, bootstrap: str) -> Identified:
    target = Target.of(name, bootstrap)
    return target, SelfIds(target.node_id, target.host, target.port)


@pytest.fixture(scope="session")
def apache_kafka_39(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[KafkaCluster]:
    """A Kafka 3.9 broker of this suite's own, not the session's shared one (see ``tests/apache_kafka_brokers.py``)."""
    with kafka_39(tmp_path_factory.mktemp("kafka-3.9-differential"), zookeeper) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_target(apache_kafka_39: KafkaCluster) -> Identified:
    return _identified("kafka-3.9", apache_kafka_39.bootstrap_servers)


@pytest.fixture(scope="session")
def kafka4_target(apache_kafka_4: KafkaCluster) -> Identified:
    return _identified("kafka-4", apache_kafka_4.bootstrap_servers)


@pytest.fixture(scope="session")
def odradek_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identified]:
    base: Path = tmp_path_factory.mktemp("odradek")
    broker = BrokerProcess(base / "broker", ["--override", "group.initial.rebalance.delay.ms=0"]).start()
    try:
        yield _identified("odradek", broker.bootstrap)
    finally:
        broker.kill()
