"""Real clients against ACLs, before any listener authenticates: every PLAINTEXT client is ``User:ANONYMOUS``, so
the ACLs here are about ANONYMOUS, ``User:*`` and hosts. ANONYMOUS is not a super user: it holds All on the Cluster
(the broker's own requests need ClusterAction) and whatever topic and group ACLs say; a resource without any ACL
is open (``allow.everyone.if.no.acl.found``), the others are not.

* ``open``: ALLOW User:* All; ``closed``: ALLOW User:bob Read only; ``elsewhere``: ALLOW ANONYMOUS All, but only
  from host 10.9.9.9; ``denied``: ALLOW User:* All and DENY ANONYMOUS Write; ``free``: no ACL at all;
* groups: ``g-open`` ALLOW User:* Read; ``g-closed`` ALLOW User:bob Read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_support import wait_for
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafka_clients import opened
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

ANON = "User:ANONYMOUS"
LIT = ResourcePatternType.LITERAL
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPICS = ("open", "closed", "elsewhere", "denied", "free")


@pytest.fixture(scope="module")
def anonymous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    overrides = {**FAST_TEST_OVERRIDES,
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin",
                 "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"}
    cluster = ThreadedCluster(1, Path(tmp_path_factory.mktemp("anon")) / "c", overrides=overrides).start()
    try:
        admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
        acls = [
            AclBinding(ResourceType.BROKER, "kafka-cluster", LIT, ANON, "*", AclOperation.ALL, ALLOW),
            AclBinding(ResourceType.TOPIC, "open", LIT, "User:*", "*", AclOperation.ALL, ALLOW),
            AclBinding(ResourceType.TOPIC, "closed", LIT, "User:bob", "*", AclOperation.READ, ALLOW),
            AclBinding(ResourceType.TOPIC, "elsewhere", LIT, ANON, "10.9.9.9", AclOperation.ALL, ALLOW),
            AclBinding(ResourceType.TOPIC, "denied", LIT, "User:*", "*", AclOperation.ALL, ALLOW),
            AclBinding(ResourceType.TOPIC, "denied", LIT, ANON, "*", AclOperation.WRITE, DENY),
            AclBinding(ResourceType.GROUP, "g-open", LIT, "User:*", "*", AclOperation.READ, ALLOW),
            AclBinding(ResourceType.GROUP, "g-closed", LIT, "User:bob", "*", AclOperation.READ, ALLOW),
        ]
        for f in admin.create_acls(acls, request_timeout=30).values():
            f.result()
        # ANONYMOUS holds All on the Cluster, so it may create topics it could not otherwise touch
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
            f.result(30)
        wait_for(lambda: cluster.run(lambda: all(
            cluster.cluster.brokers[0].metadata.leader_for(t, 0) is not None for t in TOPICS)))
        yield cluster
    finally:
        cluster.close()


def _produce(bootstrap: str, topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = opened(Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000}))
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_confluent_producer(anonymous: ThreadedCluster) -> None:
    bootstrap = anonymous.bootstrap
    assert _produce(bootstrap, "open") is None
    assert _produce(bootstrap, "free") is None  # no ACL at all: allow.everyone.if.no.acl.found
    for topic in ("closed", "elsewhere", "denied"):
        error = _produce(bootstrap, topic)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (topic, error)


def test_metadata_hides_topics_anonymous_may_not_describe(anonymous: ThreadedCluster) -> None:
    admin = opened(AdminClient({"bootstrap.servers": anonymous.bootstrap}))
    listed = set(admin.list_topics(timeout=20).topics)
    # "denied": the ALLOW All implies Describe and the DENY is on Write only
    assert {"open", "free", "denied"} <= listed
    assert not {"closed", "elsewhere"} & listed


def _consume(bootstrap: str, topic: str, group: str) -> KafkaError | bytes:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
                    return msg.error()
                continue
            return bytes(msg.value() or b"")
        raise AssertionError("neither a message nor an authorization error")
    finally:
        consumer.close()


def test_confluent_consumer_needs_topic_and_group(anonymous: ThreadedCluster) -> None:
    bootstrap = anonymous.bootstrap
    assert _produce(bootstrap, "open") is None
    assert _consume(bootstrap, "open", "g-open") == b"v"
    closed_group = _consume(bootstrap, "open", "g-closed")
    assert isinstance(closed_group, KafkaError) and closed_group.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    closed_topic = _consume(bootstrap, "closed", f"free-{uuid.uuid4().hex[:6]}")
    assert isinstance(closed_topic, KafkaError) and closed_topic.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_producer_and_consumer(anonymous: ThreadedCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    producer = KafkaProducer(bootstrap_servers=anonymous.bootstrap, max_block_ms=10000)
    try:
        producer.send("free", b"kp").get(timeout=20)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("denied", b"kp").get(timeout=20)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=anonymous.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition("free", 0)])
        assert b"kp" in [m.value for m in consumer]
    finally:
        consumer.close()
