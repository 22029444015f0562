"""A single ``odradek up`` is a cluster of one: its controller is live, and the controller's APIs answer as a
single-node Kafka cluster does, through kafka-python's and confluent-kafka's admin clients."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.errors import ElectionNotNeededError, InvalidReplicationAssignmentError, NoReassignmentInProgressError
from kafka.structs import TopicPartition

from brokers import BrokerProcess
from kafka_clients import opened

TOPIC = "solo"


@pytest.fixture
def solo(broker: BrokerProcess) -> BrokerProcess:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    return broker


def test_describe_cluster_names_the_broker_as_controller(solo: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": solo.bootstrap}))
    described = admin.describe_cluster(request_timeout=20).result(30)
    assert [n.id for n in described.nodes] == [0]
    assert described.controller.id == 0
    assert described.cluster_id
    kp = KafkaAdminClient(bootstrap_servers=solo.bootstrap)
    try:
        cluster = kp.describe_cluster()
        assert cluster["controller_id"] == 0
        assert [b["broker_id"] for b in cluster["brokers"]] == [0]
        assert cluster["cluster_id"] == described.cluster_id
    finally:
        kp.close()


def test_preferred_election_is_not_needed(solo: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": solo.bootstrap}))
    futures = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(TOPIC, 0), CTopicPartition(TOPIC, 1)])
    results = futures.result(30)
    assert {tp.partition for tp in results} == {0, 1}
    for error in results.values():
        assert error.name() == "ELECTION_NOT_NEEDED"
    kp = KafkaAdminClient(bootstrap_servers=solo.bootstrap)
    try:
        response = kp.elect_leaders(0, {TOPIC: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to kafka-python
        (result,) = response.replica_election_results
        assert sorted((p.partition_id, p.error_code) for p in result.partition_result) == [
            (0, ElectionNotNeededError.errno), (1, ElectionNotNeededError.errno)]
    finally:
        kp.close()
    assert "election for partition" not in solo.log_text(), "an election that was not needed was logged as failed"


def test_reassignments_on_one_broker(solo: BrokerProcess) -> None:
    kp = KafkaAdminClient(bootstrap_servers=solo.bootstrap)
    try:
        assert kp.list_partition_reassignments() == {}
        results = kp.alter_partition_reassignments({
            TopicPartition(TOPIC, 0): [0],  # onto the replica it already has: accepted, and done at once
            TopicPartition(TOPIC, 1): [7],  # onto a broker that does not exist: refused for that partition
        })
        assert results == {TopicPartition(TOPIC, 0): None, TopicPartition(TOPIC, 1): InvalidReplicationAssignmentError}
        # cancelling what is not in progress
        assert kp.alter_partition_reassignments({TopicPartition(TOPIC, 1): None}) == {
            TopicPartition(TOPIC, 1): NoReassignmentInProgressError}
        assert kp.list_partition_reassignments() == {}
        assert kp.describe_topics([TOPIC])[0]["partitions"][1]["replica_nodes"] == [0]
    finally:
        kp.close()
