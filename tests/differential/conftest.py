"""The two brokers the corpus is sent to, once per session: a one-broker Apache Kafka 3.9 on a real ZooKeeper and a
one-broker odradek, each with what a client needs to recognise it as itself (node id, host, port)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from differential_normalise import SelfIds
from differential_runner import Target, node_id_of
from provisional_kafka import ProvisionalKafka

from brokers import BrokerProcess
from odradek.coordination.localzk import LocalZooKeeper


@pytest.fixture(scope="session")
def kafka_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, SelfIds]]:
    base = tmp_path_factory.mktemp("kafka39")
    zk = LocalZooKeeper(base / "zk").start()
    (base / "kafka").mkdir()
    kafka = ProvisionalKafka(base / "kafka", zk.hosts).start()
    try:
        target = Target.of("kafka", kafka.bootstrap_servers)
        yield target, SelfIds(node_id_of(target), target.host, target.port)
    finally:
        kafka.stop()
        zk.stop()


@pytest.fixture(scope="session")
def odradek_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, SelfIds]]:
    base: Path = tmp_path_factory.mktemp("odradek")
    broker = BrokerProcess(base / "broker", ["--override", "group.initial.rebalance.delay.ms=0"]).start()
    try:
        target = Target.of("odradek", broker.bootstrap)
        yield target, SelfIds(node_id_of(target), target.host, target.port)
    finally:
        broker.kill()
