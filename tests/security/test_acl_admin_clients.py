"""CreateAcls, DescribeAcls and DeleteAcls with confluent-kafka's AdminClient, on a PLAINTEXT listener where
ANONYMOUS is a super user; the ACLs land in the coordination store at Kafka's paths with Kafka's JSON, and every
broker of the cluster enforces them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acl_support import wait_for, znode
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kafka_clients import opened
from odradek.security.acl import Operation
from odradek.security.acl import ResourceType as RT
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

TIMEOUT = 30


def _admin(cluster: ThreadedCluster) -> AdminClient:
    return opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))


def _binding(name: str, principal: str, op: AclOperation, *, pattern: ResourcePatternType = ResourcePatternType.LITERAL,
             perm: AclPermissionType = AclPermissionType.ALLOW, restype: ResourceType = ResourceType.TOPIC,
             host: str = "*") -> AclBinding:
    return AclBinding(restype, name, pattern, principal, host, op, perm)


def test_create_describe_delete_with_admin_client(secured: ThreadedCluster) -> None:
    admin = _admin(secured)
    created = [
        _binding("payments", "User:alice", AclOperation.READ),
        _binding("payments", "User:bob", AclOperation.WRITE, perm=AclPermissionType.DENY, host="10.0.0.9"),
        _binding("pay-", "User:alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        _binding("billing", "User:alice", AclOperation.READ, restype=ResourceType.GROUP),
    ]
    for future in admin.create_acls(created, request_timeout=TIMEOUT).values():
        future.result()

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    found = admin.describe_acls(everything, request_timeout=TIMEOUT).result()
    assert set(created) <= set(found)
    # MATCH: the ACLs that would apply to the topic "pay-eu": the prefix "pay-" (nothing literal on that name)
    match = AclBindingFilter(ResourceType.TOPIC, "pay-eu", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert set(admin.describe_acls(match, request_timeout=TIMEOUT).result()) == {created[2]}
    by_principal = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(by_principal, request_timeout=TIMEOUT).result() == [created[1]]

    # the store holds them as Kafka does
    literal = json.loads(znode(secured, "/kafka-acl/Topic/payments") or b"{}")
    assert literal["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"} in literal["acls"]
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.9"} in \
        literal["acls"]
    prefixed = json.loads(znode(secured, "/kafka-acl-extended/prefixed/Topic/pay-") or b"{}")
    assert prefixed["acls"] == [{"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
                                 "host": "*"}]
    assert znode(secured, "/kafka-acl/Group/billing") is not None

    # both brokers enforce them
    for broker_id in (0, 1):
        def seen(b: int = broker_id) -> bool:
            return secured.run(lambda: secured.cluster.brokers[b].authorizer.authorize(
                "User:alice", "1.2.3.4", Operation.WRITE, RT.TOPIC, "pay-eu"))
        wait_for(seen)

    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL, None,
                                                  None, AclOperation.ANY, AclPermissionType.ANY)],
                                request_timeout=TIMEOUT)
    assert set(next(iter(deleted.values())).result()) == {created[0], created[1]}
    assert znode(secured, "/kafka-acl/Topic/payments") is None
    left = set(admin.describe_acls(everything, request_timeout=TIMEOUT).result())
    assert created[0] not in left and created[2] in left


def test_invalid_acls_are_refused_one_by_one(secured: ThreadedCluster) -> None:
    admin = _admin(secured)
    good = _binding("ok-topic", "User:carol", AclOperation.DESCRIBE)
    bad_cluster = _binding("not-kafka-cluster", "User:carol", AclOperation.ALTER, restype=ResourceType.BROKER)
    futures = admin.create_acls([good, bad_cluster], request_timeout=TIMEOUT)
    futures[good].result()
    with pytest.raises(KafkaException) as err:
        futures[bad_cluster].result()
    assert "INVALID_REQUEST" in str(err.value) or "kafka-cluster" in str(err.value)


def test_an_acl_made_through_one_broker_is_enforced_by_the_other(secured: ThreadedCluster) -> None:
    def decide(broker_id: int) -> bool:
        return secured.run(lambda: secured.cluster.brokers[broker_id].authorizer.authorize(
            "User:dave", "127.0.0.1", Operation.READ, RT.TOPIC, "shared"))

    assert not decide(1)
    admin = opened(AdminClient({"bootstrap.servers": secured.bootstrap.split(",")[0]}))
    for future in admin.create_acls([_binding("shared", "User:dave", AclOperation.READ)],
                                    request_timeout=TIMEOUT).values():
        future.result()
    wait_for(lambda: decide(0) and decide(1))
    admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL, "User:dave",
                                        None, AclOperation.ANY, AclPermissionType.ANY)], request_timeout=TIMEOUT)
    wait_for(lambda: not decide(0) and not decide(1))


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    cluster = ThreadedCluster(1, tmp_path / "plain", overrides=dict(FAST_TEST_OVERRIDES)).start()
    try:
        admin = _admin(cluster)
        binding = _binding("t", "User:alice", AclOperation.READ)
        with pytest.raises(KafkaException, match=r"SECURITY_DISABLED|No Authorizer"):
            admin.create_acls([binding], request_timeout=TIMEOUT)[binding].result()
        # librdkafka drops DescribeAcls' top-level error (an empty list comes back); kafka-python raises it
        from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
        from kafka.admin import ACLResourcePatternType as PT
        from kafka.admin import ResourceType as KRT
        from kafka.errors import SecurityDisabledError

        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            with pytest.raises(SecurityDisabledError):
                kp.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                           ResourcePatternFilter(KRT.ANY, None, PT.ANY)))
        finally:
            kp.close()
    finally:
        cluster.close()
