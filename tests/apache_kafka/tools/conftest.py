"""One odradek broker per module beside the session's Apache Kafka 3.9 broker, both with node id 1, for comparing
Kafka's tools on them; each test works on topics and groups named for itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tools_support import Pair

from brokers import BrokerProcess
from odradek.apache_kafka import KafkaCluster


@pytest.fixture(scope="module")
def odradek_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("odradek") / "data",
                           ["--broker-id", "1", "--override", "group.initial.rebalance.delay.ms=0"]).start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def pair(apache_kafka_39: KafkaCluster, odradek_broker: BrokerProcess) -> Pair:
    return Pair(apache_kafka_39.bootstrap_servers, odradek_broker.bootstrap, apache_kafka_39.brokers[0].log_dir,
                odradek_broker.data_dir / "broker-1")


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name for this test, the same on both brokers (no underscores: they draw a metric-name warning)."""
    return "t-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in request.node.name)[:120]
