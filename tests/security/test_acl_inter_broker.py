"""Brokers are principals too: with the inter-broker listener on SASL_PLAINTEXT the brokers log in as ``admin``,
and with ``super.users=User:admin`` (and no ACL at all) their follower fetches, the controller's requests and
transaction markers pass the authorizer, so an acks=all write to a replicated topic is acknowledged, while an
anonymous PLAINTEXT client may do nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_support import wait_for
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from security_helpers import PLAIN_JAAS

from kafka_clients import opened
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    overrides = {
        **FAST_TEST_OVERRIDES,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "2",
        "min.insync.replicas": "2",
    }
    c = ThreadedCluster(2, tmp_path / "cluster", overrides=overrides).start()
    try:
        yield c
    finally:
        c.close()


def test_brokers_in_super_users_replicate_and_anonymous_may_not(cluster: ThreadedCluster) -> None:
    async def on(listener: str) -> str:
        return cluster.cluster.bootstrap_on(listener)

    sasl = {"bootstrap.servers": cluster.call(on("SASL_PLAINTEXT")), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
    topic = f"rep-{uuid.uuid4().hex[:8]}"
    admin = opened(AdminClient(sasl))
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)

    def full_isr() -> bool:
        return cluster.run(lambda: all(
            topic in b.metadata.topics and sorted(b.metadata.topics[topic].partitions[0].isr) == [0, 1]
            for b in cluster.cluster.brokers.values()))

    wait_for(full_isr, 30)
    outcome: list[KafkaError | None] = []
    producer = opened(Producer({**sasl, "acks": "all", "message.timeout.ms": 30000}))
    producer.produce(topic, b"replicated", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(40)
    assert outcome == [None]  # min.insync.replicas=2: the follower (a super user) fetched it

    anonymous = opened(Producer({"bootstrap.servers": cluster.call(on("PLAINTEXT")), "message.timeout.ms": 10000}))
    refused: list[KafkaError | None] = []
    anonymous.produce(topic, b"x", on_delivery=lambda err, _msg: refused.append(err))
    anonymous.flush(20)
    assert refused and refused[0] is not None and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
