"""A Kafka 3.9 broker at its default ``inter.broker.protocol.version`` (3.9) beside odradek, which speaks 2.6's
controller requests only: each side refuses the other with one clear line naming the versions, never with
half-understood requests.

One cluster: odradek broker 1 starts first and is controller; Kafka broker 2 registers with version 5 (IBP 2.7+),
which odradek's controller refuses. Then odradek broker 1 is killed, Kafka's broker wins the controller, and
odradek broker 1 comes back to be sent UpdateMetadata v8, which it refuses, once in its log however often Kafka
resends it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from mixed_support import MixedCluster, controller_id

from brokers import wait_for
from odradek.admin import metadata
from odradek.client import KafkaConnection
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

ODRADEK_ID = 1
KAFKA_ID = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[MixedCluster]:
    mixed = MixedCluster(tmp_path_factory.mktemp("mixed-ibp-refused"), zookeeper.hosts,
                         kafka_ids=[KAFKA_ID], odradek_ids=[ODRADEK_ID], ibp="3.9")
    with mixed.start("odradek"):
        yield mixed


def test_odradeks_controller_refuses_a_kafka_broker_at_ibp_39(cluster: MixedCluster) -> None:
    odradek = cluster.odradek[ODRADEK_ID]

    def refusals() -> list[str]:
        return [ln for ln in odradek.log_text().splitlines() if f"refusing broker {KAFKA_ID}:" in ln]

    wait_for(refusals, 60, what="odradek's controller refusing Kafka broker 2")
    line = refusals()[0]
    assert "registration is version 5" in line and "inter.broker.protocol.version=2.6" in line
    with KafkaConnection(odradek.address) as conn:
        assert [b.node_id for b in metadata(conn, []).brokers] == [ODRADEK_ID]  # never made live
    assert "ERROR" in line and len(refusals()) == 1


def test_an_odradek_broker_refuses_a_kafka_controller_at_ibp_39_once(cluster: MixedCluster) -> None:
    odradek = cluster.odradek[ODRADEK_ID]
    odradek.signal(signal.SIGKILL)
    wait_for(lambda: controller_id(cluster) == KAFKA_ID, 60, what="Kafka broker 2 taking the controller")
    odradek.start()
    kafka_log = cluster.kafka.brokers[0].server_log

    def resent() -> bool:  # Kafka's controller has tried the refused request again and again
        text = kafka_log.read_text(errors="replace")
        return text.count("fails to send request (type: UpdateMetadataRequest") >= 5

    wait_for(resent, 60, what="Kafka's controller resending UpdateMetadata to odradek")
    refusals = [ln for ln in odradek.log_text().splitlines() if "refusing UpdateMetadata v8" in ln]
    assert len(refusals) == 1, refusals
    assert "inter.broker.protocol.version 3.4-IV0 or newer" in refusals[0]
    assert "set inter.broker.protocol.version=2.6" in refusals[0]
