"""The ACL matrix with real clients authenticated as different principals: one broker with a PLAINTEXT listener
(the broker's own requests; ``User:ANONYMOUS`` is a super user for them, as Kafka needs its brokers to be) and a
SASL_PLAINTEXT listener where confluent-kafka and kafka-python log in with PLAIN as alice, bob or admin (a super
user). The ACLs, made by admin with the admin client:

* alice: WRITE and READ on ``orders``; WRITE and CREATE on topics prefixed ``team-``; READ on group ``g-alice``;
  WRITE on transactional id ``tx-alice``;
* everyone (``User:*``): READ on ``shared`` and on group ``g-shared``; but bob is DENIED READ on ``shared``;
* ``secret``: nobody but super users.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from brokers import BrokerProcess
from kafka_clients import opened

pytestmark = pytest.mark.timeout(180)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-secret\" " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
LIT, PFX = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("acl-sasl") / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--override", "super.users=User:admin;User:ANONYMOUS",
        "--override", "group.initial.rebalance.delay.ms=0",
        "--override", "offsets.topic.replication.factor=1", "--override", "offsets.topic.num.partitions=2",
        "--override", "transaction.state.log.replication.factor=1", "--override", "transaction.state.log.min.isr=1",
        "--override", "transaction.state.log.num.partitions=2",
    ])
    b.start()
    admin = opened(AdminClient(conf(b, "admin")))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "shared", "secret", "team-1")]).values():
        f.result(30)
    acls = [
        AclBinding(ResourceType.TOPIC, "orders", LIT, "User:alice", "*", AclOperation.WRITE, ALLOW),
        AclBinding(ResourceType.TOPIC, "orders", LIT, "User:alice", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.TOPIC, "team-", PFX, "User:alice", "*", AclOperation.WRITE, ALLOW),
        AclBinding(ResourceType.TOPIC, "team-", PFX, "User:alice", "*", AclOperation.CREATE, ALLOW),
        AclBinding(ResourceType.GROUP, "g-alice", LIT, "User:alice", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.TRANSACTIONAL_ID, "tx-alice", LIT, "User:alice", "*", AclOperation.WRITE, ALLOW),
        AclBinding(ResourceType.TOPIC, "shared", LIT, "User:*", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.GROUP, "g-shared", LIT, "User:*", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.TOPIC, "shared", LIT, "User:bob", "*", AclOperation.READ, DENY),
    ]
    for f in admin.create_acls(acls, request_timeout=30).values():
        f.result()
    producer = opened(Producer(conf(b, "admin")))
    for topic in ("orders", "shared", "secret"):
        producer.produce(topic, b"seed")
    assert producer.flush(30) == 0
    yield b
    b.stop()


def conf(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def kp_conf(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker.listeners["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def produce(broker: BrokerProcess, user: str, topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = opened(Producer({**conf(broker, user), "message.timeout.ms": 10000}))
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def consume(broker: BrokerProcess, user: str, topic: str, group: str) -> bytes | int:
    """The first record, or the authorization error code the consumer got."""
    consumer = opened(Consumer({**conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                                "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                consumer.commit(msg, asynchronous=False)
                return bytes(msg.value() or b"")
            if msg.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
                return int(msg.error().code())
        raise AssertionError("neither a record nor an authorization error")
    finally:
        consumer.close()


def test_produce(broker: BrokerProcess) -> None:
    assert produce(broker, "alice", "orders") is None
    assert produce(broker, "alice", "team-1") is None  # prefixed
    assert produce(broker, "admin", "secret") is None  # super user
    for user, topic in (("bob", "orders"), ("alice", "secret"), ("alice", "shared")):
        error = produce(broker, user, topic)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (user, topic, error)


def test_consume_groups_and_offsets(broker: BrokerProcess) -> None:
    assert consume(broker, "alice", "orders", "g-alice") == b"seed"
    consumer = opened(Consumer({**conf(broker, "alice"), "group.id": "g-alice"}))
    try:
        [committed] = consumer.committed([TopicPartition("orders", 0)], timeout=20)
        assert committed.offset == 1
    finally:
        consumer.close()
    assert consume(broker, "alice", "orders", "g-bob") == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume(broker, "alice", "shared", "g-shared") == b"seed"  # User:*
    assert consume(broker, "bob", "shared", "g-shared") == KafkaError.TOPIC_AUTHORIZATION_FAILED  # DENY wins
    assert consume(broker, "bob", "orders", "g-shared") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics(broker: BrokerProcess) -> None:
    def visible(user: str) -> set[str]:
        admin = opened(AdminClient(conf(broker, user)))
        return set(admin.list_topics(timeout=20).topics)

    assert {"orders", "shared", "team-1"} <= visible("alice") and "secret" not in visible("alice")
    assert visible("bob") & {"orders", "secret", "team-1"} == set()
    assert {"orders", "shared", "secret", "team-1"} <= visible("admin")


def test_admin(broker: BrokerProcess) -> None:
    alice = opened(AdminClient(conf(broker, "alice")))
    topic = f"team-{uuid.uuid4().hex[:6]}"
    alice.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)  # CREATE on the prefix
    with pytest.raises(KafkaException) as refused:
        alice.create_topics([NewTopic("elsewhere", 1, 1)])["elsewhere"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = AclBinding(ResourceType.TOPIC, "orders", LIT, "User:bob", "*", AclOperation.READ, ALLOW)
    bob = opened(AdminClient(conf(broker, "bob")))
    with pytest.raises(KafkaException) as refused:
        bob.create_acls([binding], request_timeout=30)[binding].result()
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_transactions(broker: BrokerProcess) -> None:
    producer = opened(Producer({**conf(broker, "alice"), "transactional.id": "tx-alice"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", b"in-txn")
    producer.commit_transaction(30)
    thief = opened(Producer({**conf(broker, "bob"), "transactional.id": "tx-alice"}))
    with pytest.raises(KafkaException) as refused:
        thief.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_kafka_python(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    alice = KafkaProducer(**kp_conf(broker, "alice"))
    try:
        alice.send("orders", b"kp").get(timeout=30)
    finally:
        alice.close()
    bob = KafkaProducer(**kp_conf(broker, "bob"), max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            bob.send("orders", b"kp").get(timeout=30)
    finally:
        bob.close()
    consumer = KafkaConsumer("orders", **kp_conf(broker, "alice"), group_id="g-alice", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    try:
        assert b"kp" in [m.value for m in consumer]
    finally:
        consumer.close()


def test_idempotent_producers_need_write_somewhere(broker: BrokerProcess) -> None:
    outcome: list[KafkaError | None] = []
    alice = opened(Producer({**conf(broker, "alice"), "enable.idempotence": True}))
    alice.produce("orders", b"idem", on_delivery=lambda err, _msg: outcome.append(err))
    alice.flush(30)
    assert outcome == [None]  # WRITE on a topic is enough for a producer id (KIP-679)
    # bob may describe "shared" (User:* READ) but write nowhere: no producer id for him
    errors: list[KafkaError | None] = []
    bob = opened(Producer({**conf(broker, "bob"), "enable.idempotence": True, "message.timeout.ms": 10000,
                           "error_cb": lambda err: errors.append(err)}))
    bob.produce("shared", b"idem")
    try:
        bob.flush(20)
    except KafkaException as exc:  # librdkafka raises the fatal error from the call that serves callbacks
        errors.append(exc.args[0])
    assert any(e is not None and e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in errors), errors


def test_acls_cli_over_sasl(broker: BrokerProcess, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from odradek.cli import main

    def properties(user: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
                        f"sasl.password={USERS[user]}\n")
        return str(path)

    def acls(user: str, *args: str) -> Any:
        return CliRunner().invoke(main, ["acls", "--bootstrap-server", broker.listeners["SASL_PLAINTEXT"],
                                         "--command-config", properties(user), *args], catch_exceptions=False)

    added = acls("admin", "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", "orders")
    assert added.exit_code == 0, added.output
    assert "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)" in added.stdout
    refused = acls("bob", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders")
    assert refused.exit_code != 0 and "CLUSTER_AUTHORIZATION_FAILED" in refused.output
    bob = opened(AdminClient(conf(broker, "bob")))
    assert "orders" in set(bob.list_topics(timeout=20).topics)  # DESCRIBE for bob: he sees the topic now
    removed = acls("admin", "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Describe",
                   "--topic", "orders")
    assert removed.exit_code == 0, removed.output
    assert "orders" not in set(bob.list_topics(timeout=20).topics)
