"""A Kafka 3.9 controller and odradek brokers on one ZooKeeper: one Kafka broker (id 1, started first, so it wins
``/controller``) and two odradek brokers (ids 2 and 3), Kafka at ``inter.broker.protocol.version=2.6``.

odradek reads every znode Kafka's controller and broker wrote; Kafka's controller reads odradek's registrations and
sends them LeaderAndIsr v4, UpdateMetadata v6 and StopReplica v3, which they obey; an odradek broker asks Kafka's
controller for a controlled shutdown; replicas of both kinds replicate each other under an idempotent acks=all load.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from mixed_support import MixedCluster, controller_id, load_through, wait_full_isr
from workload import create_replicated_topic, partition_view

from brokers import wait_for
from odradek.coordination import znodes as zn
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

KAFKA_ID = 1
ODRADEK_IDS = (2, 3)
TOPIC = "mixed-kc"
PARTITIONS = 3
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[MixedCluster]:
    mixed = MixedCluster(tmp_path_factory.mktemp("mixed-kafka-controller"), zookeeper.hosts,
                         kafka_ids=[KAFKA_ID], odradek_ids=ODRADEK_IDS, ibp="2.6", racks=RACKS)
    with mixed.start("kafka"):
        yield mixed


def test_odradek_reads_the_znodes_kafka_wrote(cluster: MixedCluster) -> None:
    with cluster.zk() as zk:
        registration = zn.BrokerRegistration.from_json(zk.get(zn.broker_path(KAFKA_ID))[0], zn.broker_path(KAFKA_ID))
        assert registration.version == 4  # IBP 2.6: features (version 5) came with 2.7
        assert [str(e) for e in registration.endpoints] == [f"PLAINTEXT://{cluster.kafka.brokers[0].address}"]
        assert registration.jmx_port == -1 and registration.rack == RACKS[KAFKA_ID]
        assert zn.ControllerRegistration.from_json(zk.get(zn.CONTROLLER)[0]).broker_id == KAFKA_ID
        assert zn.decode_controller_epoch(zk.get(zn.CONTROLLER_EPOCH)[0]) >= 1
        assert zn.ClusterId.from_json(zk.get(zn.CLUSTER_ID)[0]).id
        feature = zn.FeatureZnode.from_json(zk.get(zn.FEATURE)[0])
        assert (feature.version, feature.enabled, dict(feature.features)) == (1, False, {})  # IBP < 2.7


def test_kafka_reads_the_registrations_odradek_wrote(cluster: MixedCluster) -> None:
    """Kafka's controller read ``/brokers/ids/2`` and ``/3`` and told its own broker where they listen, and their
    racks."""
    from odradek.admin import metadata
    from odradek.client import KafkaConnection

    def brokers_seen_by_kafka() -> dict[int, tuple[str, str | None]]:
        with KafkaConnection(cluster.kafka.brokers[0].address) as conn:
            response = metadata(conn, [])
        return {b.node_id: (f"{b.host}:{b.port}", b.rack) for b in response.brokers}

    expected = {KAFKA_ID: (cluster.kafka.brokers[0].address, RACKS[KAFKA_ID])} | {
        i: (b.address, RACKS[i]) for i, b in cluster.odradek.items()}
    wait_for(lambda: brokers_seen_by_kafka() == expected, 60, what="Kafka's metadata listing the odradek brokers")


def test_an_rf3_topic_replicates_across_kinds_through_a_controlled_shutdown(cluster: MixedCluster) -> None:
    kafka_address = cluster.kafka.brokers[0].address
    create_replicated_topic(kafka_address, TOPIC, PARTITIONS)  # through Kafka: its controller assigns and elects
    view = wait_full_isr(kafka_address, TOPIC, PARTITIONS, 3)
    assert {leader for leader, _r, _i in view.values()} == {KAFKA_ID, *ODRADEK_IDS}  # each kind leads a partition
    with cluster.zk() as zk:
        assignment = zn.TopicAssignment.from_json(zk.get(zn.topic_path(TOPIC))[0], zn.topic_path(TOPIC))
        assert assignment.topic_id is None  # topic ids came with IBP 2.8
        for p in range(PARTITIONS):
            path = zn.partition_state_path(TOPIC, p)
            state = zn.PartitionState.from_json(zk.get(path)[0], path)
            assert sorted(state.isr) == [1, 2, 3] and state.leader_recovery_state == 0

    odradek = cluster.odradek[ODRADEK_IDS[0]]

    def controlled_shutdown() -> None:  # asks Kafka's controller (ControlledShutdown v3) to move its leaderships
        odradek.signal(signal.SIGTERM)
        assert "Controlled shutdown request returned successfully" in odradek.log_text()

    load_through(cluster, TOPIC, PARTITIONS, controlled_shutdown, odradek.start)
    for b in cluster.odradek.values():  # odradek's metadata (from Kafka's UpdateMetadata) agrees with Kafka's
        wait_for(lambda b=b: partition_view(b.address, TOPIC) == partition_view(kafka_address, TOPIC), 30,
                 what=f"odradek broker {b.broker_id}'s metadata agreeing with Kafka's")


def test_the_kafka_controller_killed_an_odradek_broker_takes_over_and_leads_the_kafka_broker(
    cluster: MixedCluster,
) -> None:
    topic = f"{TOPIC}-failover"
    odradek_address = cluster.odradek[ODRADEK_IDS[0]].address
    create_replicated_topic(odradek_address, topic, PARTITIONS)
    wait_full_isr(odradek_address, topic, PARTITIONS, 3)
    kafka = cluster.kafka.brokers[0]

    def kill_the_controller() -> None:  # SIGKILL: its session expires and an odradek broker wins /controller
        kafka.kill()
        wait_for(lambda: controller_id(cluster) in ODRADEK_IDS, 60, what="an odradek broker taking the controller")

    load_through(cluster, topic, PARTITIONS, kill_the_controller, kafka.start)  # back as odradek's follower
    wait_for(lambda: partition_view(kafka.address, topic) == partition_view(odradek_address, topic), 30,
             what="Kafka's metadata (now from odradek's controller) agreeing with odradek's")
