"""Scenarios for the secured pair (``test_differential_secured.py``): one Kafka 3.9 broker and one odradek broker,
each with only a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256) and the ACL authorizer, ``User:admin`` a super
user. Requests run as ``alice`` (``to="alice"``), first with no ACL (each API's authorization error, or what it hides),
then with the ACL that allows them; ``admin`` grants ACLs and creates topics. After each scenario every ACL of
``User:alice`` is deleted (:data:`TEARDOWN`)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from differential_corpus import Batch, Call, Derived, Scenario, Topic, produce

_T = (Topic(),)
_ANY, _MATCH, _LITERAL, _PREFIXED = 1, 2, 3, 4
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, IDEMPOTENT_WRITE = 3, 4, 5, 6, 7, 8, 12
_ALLOW, _DENY = 3, 2
ALICE = "User:alice"


def plain_login(user: str, password: str) -> tuple[Call, ...]:
    """SaslHandshake PLAIN and the one PLAIN token: a connection logged in as ``user``."""
    return (Call(17, 1, {"mechanism": "PLAIN"}),
            Call(36, 2, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()}))


SCRAM_SALT, SCRAM_ITERATIONS = b"differential-salt", 4096


def scram_user(user: str, password: str) -> Call:
    """AlterUserScramCredentials as admin: ``user`` gets a SCRAM-SHA-256 credential for ``password``."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), SCRAM_SALT, SCRAM_ITERATIONS)
    return Call(51, 0, {"deletions": [], "upsertions": [{
        "name": user, "mechanism": 1, "iterations": SCRAM_ITERATIONS, "salt": SCRAM_SALT,
        "salted_password": salted}]}, to="admin", until=lambda r: all(x["error_code"] == 0 for x in r["results"]))


def _wrong_proof(server_first_hex: str) -> bytes:
    """A client-final message with the server's nonce and a proof no password gives."""
    fields = dict(part.split("=", 1) for part in bytes.fromhex(server_first_hex).decode().split(","))
    return f"c=biws,r={fields['r']},p={base64.b64encode(bytes(32)).decode()}".encode()


def acl(resource_type: int, name: str, operation: int, *, permission: int = _ALLOW, pattern: int = _LITERAL,
        principal: str = ALICE) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


def grant(*acls: dict[str, Any]) -> Call:
    """CreateAcls as admin (waiting until every creation succeeded)."""
    return Call(30, 3, {"creations": list(acls)}, to="admin",
                until=lambda r: all(c["error_code"] == 0 for c in r["results"]))


def _filter(resource_type: int = _ANY, name: str | None = None, pattern: int = _ANY, principal: str | None = None,
            operation: int = _ANY, permission: int = _ANY) -> dict[str, Any]:
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": None, "operation": operation, "permission_type": permission}


TEARDOWN = (Call(31, 3, {"filters": [_filter(principal=ALICE)]}, to="admin",
                 until=lambda r: all(f["error_code"] == 0 for f in r["filter_results"])),)
"""Every ACL of alice's deleted, so a scenario's grants never reach the next one."""


def _as(call: Call, who: str = "alice") -> Call:
    return Call(call.api_key, call.version, call.body, to=who)


def _metadata(*, auto_create: bool = False, operations: bool = True) -> Call:
    return Call(3, 12, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": auto_create,
                        "include_topic_authorized_operations": operations}, to="alice")


def _fetch() -> Call:
    return Call(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "{topic}", "partitions": [{
                            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""},
                to="alice")


_LIST_OFFSETS = Call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "{topic}", "partitions": [
    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}, to="alice")
_CREATE = Call(19, 7, {"topics": [{"name": "{topic}", "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [], "configs": []}], "timeout": 30000}, to="alice")
_DELETE = Call(20, 6, {"topics": [{"name": "{topic}", "topic_id": "00000000-0000-0000-0000-000000000000"}],
                       "timeout_ms": 30000}, to="alice")
_JOIN = Call(11, 7, {"group_id": "{group}", "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b""}], "reason": None}, to="alice")
_DESCRIBE_GROUPS = Call(15, 5, {"groups": ["{group}"], "include_authorized_operations": True}, to="alice")
_OFFSET_FETCH = Call(9, 7, {"group_id": "{group}", "topics": None, "require_stable": False}, to="alice")
_DESCRIBE_CLUSTER = Call(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
_ELECT = Call(43, 2, {"election_type": 0, "topic_partitions": [{"topic": "{topic}", "partitions": [0]}],
                      "timeout": 10000}, to="alice")
_LOG_DIRS = Call(35, 4, {"topics": [{"topic": "{topic}", "partitions": [0]}]}, to="alice")
_INIT_TXN = Call(22, 4, {"transactional_id": "{txn}", "transaction_timeout": 60000, "producer_id": -1,
                         "producer_epoch": -1}, to="alice")
_INIT_IDEMPOTENT = Call(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                "producer_epoch": -1}, to="alice")
_CREATE_ACL = Call(30, 3, {"creations": [acl(TOPIC, "{topic}", READ)]}, to="alice")
_DESCRIBE_ACLS = Call(29, 3, _filter(TOPIC, "{topic}", _MATCH), to="admin")

_GROUP_READY = Call(10, 3, {"key": "{group}", "key_type": 0}, to="admin", until=lambda r: r["error_code"] == 0)
"""The group's coordinator found by admin (which creates and loads ``__consumer_offsets`` on first use)."""
_IDS_READY = Call(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                          "producer_epoch": -1}, to="admin", until=lambda r: r["error_code"] == 0)
"""An idempotent producer id handed to admin: Kafka 3.9 fetches its first block of ids from the controller on the
first request (COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""

_PARTITION = [{"name": "{topic}", "partition_indexes": [0]}]
_COMMIT = {"group_id": "{group}", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
           "topics": [{"name": "{topic}", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
_BROKER = 4
"""ConfigResource.Type.BROKER (its TOPIC is 2, as the ACL resource type is)."""
_TXN = {"transactional_id": "{txn}", "producer_id": 1, "producer_epoch": 0}
_REFUSED: list[tuple[str, int, int, dict[str, Any]]] = [
    ("offset-commit.v9", 8, 9, _COMMIT),
    ("sync-group.v5", 14, 5, {"group_id": "{group}", "generation_id": 1, "member_id": "nobody",
                              "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
    ("heartbeat.v4", 12, 4, {"group_id": "{group}", "generation_id": 1, "member_id": "nobody"}),
    ("leave-group.v4", 13, 4, {"group_id": "{group}", "members": [{"member_id": "nobody",
                                                                   "group_instance_id": None}]}),
    ("list-groups.v4", 16, 4, {"states_filter": []}),
    ("delete-groups.v2", 42, 2, {"groups_names": ["{group}"]}),
    ("offset-delete.v0", 47, 0, {"group_id": "{group}", "topics": [{"name": "{topic}",
                                                                    "partitions": [{"partition_index": 0}]}]}),
    ("describe-configs.v4.topic", 32, 4, {"resources": [{"resource_type": TOPIC, "resource_name": "{topic}",
                                                         "configuration_keys": None}]}),
    ("describe-configs.v4.broker", 32, 4, {"resources": [{"resource_type": _BROKER, "resource_name": "{broker}",
                                                          "configuration_keys": ["log.retention.ms"]}]}),
    ("alter-configs.v2", 33, 2, {"resources": [{"resource_type": TOPIC, "resource_name": "{topic}", "configs": [
        {"name": "retention.ms", "value": "1000"}]}], "validate_only": True}),
    ("incremental-alter-configs.v1", 44, 1, {"resources": [{"resource_type": TOPIC, "resource_name": "{topic}",
                                                            "configs": [{"name": "retention.ms",
                                                                         "config_operation": 0, "value": "1000"}]}],
                                             "validate_only": True}),
    ("create-partitions.v3", 37, 3, {"topics": [{"name": "{topic}", "count": 2, "assignments": None}],
                                     "timeout_ms": 30000, "validate_only": True}),
    ("delete-records.v2", 21, 2, {"topics": [{"name": "{topic}", "partitions": [{"partition_index": 0,
                                                                                 "offset": 0}]}],
                                  "timeout_ms": 10000}),
    ("offset-for-leader-epoch.v4", 23, 4, {"replica_id": -1, "topics": [{"topic": "{topic}", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
    ("add-partitions-to-txn.v3", 24, 3, {"v3_and_below_transactional_id": "{txn}", "v3_and_below_producer_id": 1,
                                         "v3_and_below_producer_epoch": 0,
                                         "v3_and_below_topics": [{"name": "{topic}", "partitions": [0]}]}),
    ("add-offsets-to-txn.v3", 25, 3, {**_TXN, "group_id": "{group}"}),
    ("end-txn.v3", 26, 3, {**_TXN, "committed": True}),
    ("txn-offset-commit.v3", 28, 3, {**_TXN, "group_id": "{group}", "generation_id": -1, "member_id": "",
                                     "group_instance_id": None, "topics": [{"name": "{topic}", "partitions": [
                                         {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]}]}),
    ("describe-producers.v0", 61, 0, {"topics": _PARTITION}),
    ("describe-transactions.v0", 65, 0, {"transactional_ids": ["{txn}"]}),
    ("list-transactions.v0", 66, 0, {"state_filters": [], "producer_id_filters": []}),
    ("alter-partition-reassignments.v0", 45, 0, {"timeout": 10000, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "replicas": None}]}]}),
    ("list-partition-reassignments.v0", 46, 0, {"timeout": 10000, "topics": None}),
    ("describe-user-scram-credentials.v0", 50, 0, {"users": None}),
    ("describe-user-scram-credentials.v0.named", 50, 0, {"users": [{"name": "alice"}, {"name": "bob"}]}),
    ("alter-user-scram-credentials.v0", 51, 0, {"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": []}),
    ("describe-client-quotas.v1", 48, 1, {"components": [], "strict": False}),
    ("alter-client-quotas.v1", 49, 1, {"entries": [{"entity": [{"entity_type": "client-id",
                                                                "entity_name": "{group}"}],
                                                    "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                                                             "remove": False}]}], "validate_only": True}),
]
"""Requests alice makes with no ACL at all (each API's own refusal: per resource, per partition, or at the top)."""

SCENARIOS = [
    # before logging in: only ApiVersions and the SASL APIs are answered
    Scenario("secured.metadata.v12.before-login", Call(3, 12, {"topics": None})),
    # SASL: the messages clients show
    Scenario("secured.sasl-handshake.v1.plain", Call(17, 1, {"mechanism": "PLAIN"})),
    Scenario("secured.sasl-handshake.v1.unknown-mechanism", Call(17, 1, {"mechanism": "GSSAPI"})),
    Scenario("secured.sasl-authenticate.v2.plain-wrong-password", Call(36, 2, {"auth_bytes": b"\0alice\0wrong"}),
             setup=(Call(17, 1, {"mechanism": "PLAIN"}),)),
    Scenario("secured.sasl-authenticate.v2.plain-unknown-user", Call(36, 2, {"auth_bytes": b"\0nobody\0x"}),
             setup=(Call(17, 1, {"mechanism": "PLAIN"}),)),
    Scenario("secured.sasl-authenticate.v2.scram-unknown-user", Call(36, 2, {"auth_bytes": b"n,,n=nobody,r=abc"}),
             setup=(Call(17, 1, {"mechanism": "SCRAM-SHA-256"}),)),
    Scenario("secured.sasl-authenticate.v2.scram-wrong-password", Call(36, 2, {
        "auth_bytes": Derived("server_first", _wrong_proof)}), setup=(
        Call(17, 1, {"mechanism": "SCRAM-SHA-256"}),
        Call(36, 2, {"auth_bytes": b"n,,n=alice,r=differential"}, capture={"server_first": "auth_bytes"},
             until=lambda r: r["error_code"] == 0))),
    Scenario("secured.sasl-authenticate.v2.scram-malformed", Call(36, 2, {"auth_bytes": b"not scram"}),
             setup=(Call(17, 1, {"mechanism": "SCRAM-SHA-256"}),)),
    # topics: no ACL, then the ACL that allows
    Scenario("secured.metadata.v12.no-acl", _metadata(), topics=_T),
    Scenario("secured.metadata.v12.no-acl-unknown-topic", _metadata()),
    Scenario("secured.metadata.v12.describe", _metadata(), topics=_T, setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.metadata.v12.read-write", _metadata(), topics=_T, setup=(grant(
        acl(TOPIC, "{topic}", READ), acl(TOPIC, "{topic}", WRITE)),)),
    Scenario("secured.metadata.v12.auto-create-describe-only", _metadata(auto_create=True),
             setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.produce.v9.no-acl", _as(produce()), topics=_T),
    Scenario("secured.produce.v9.no-acl-unknown-topic", _as(produce())),
    Scenario("secured.produce.v9.describe-only", _as(produce()), topics=_T,
             setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.produce.v9.write", _as(produce()), topics=_T, setup=(grant(acl(TOPIC, "{topic}", WRITE)),)),
    Scenario("secured.produce.v9.idempotent-write-only-topic", _as(produce(Batch(producer_id=5, producer_epoch=0,
                                                                                  base_sequence=0))),
             topics=_T, setup=(grant(acl(TOPIC, "{topic}", WRITE)),)),
    Scenario("secured.fetch.v12.no-acl", _fetch(), topics=_T),
    Scenario("secured.fetch.v12.read", _fetch(), topics=_T, setup=(grant(acl(TOPIC, "{topic}", READ)),)),
    Scenario("secured.list-offsets.v7.no-acl", _LIST_OFFSETS, topics=_T),
    Scenario("secured.list-offsets.v7.describe", _LIST_OFFSETS, topics=_T,
             setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.create-topics.v7.no-acl", _CREATE),
    Scenario("secured.create-topics.v7.no-acl-existing", _CREATE, topics=_T),
    Scenario("secured.create-topics.v7.describe-existing", _CREATE, topics=_T,
             setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.create-topics.v7.create-on-topic", _CREATE, setup=(grant(acl(TOPIC, "{topic}", CREATE)),)),
    Scenario("secured.delete-topics.v6.no-acl", _DELETE, topics=_T),
    Scenario("secured.delete-topics.v6.no-acl-unknown-topic", _DELETE),
    Scenario("secured.delete-topics.v6.describe-only", _DELETE, topics=_T,
             setup=(grant(acl(TOPIC, "{topic}", DESCRIBE)),)),
    Scenario("secured.delete-topics.v6.delete-unknown-topic", _DELETE,
             setup=(grant(acl(TOPIC, "{topic}", DELETE)),)),
    # groups
    Scenario("secured.find-coordinator.v3.group-no-acl", Call(10, 3, {"key": "{group}", "key_type": 0}, to="alice")),
    Scenario("secured.join-group.v7.no-acl", _JOIN),
    Scenario("secured.describe-groups.v5.no-acl", _DESCRIBE_GROUPS, setup=(_GROUP_READY,)),
    Scenario("secured.describe-groups.v5.describe", _DESCRIBE_GROUPS, setup=(
        _GROUP_READY, grant(acl(GROUP, "{group}", DESCRIBE)))),
    Scenario("secured.describe-groups.v5.prefixed-read", _DESCRIBE_GROUPS, setup=(
        _GROUP_READY, grant(acl(GROUP, "g.", READ, pattern=_PREFIXED)))),
    Scenario("secured.offset-fetch.v7.no-acl", _OFFSET_FETCH, setup=(_GROUP_READY,)),
    Scenario("secured.offset-fetch.v7.group-describe", _OFFSET_FETCH, setup=(
        _GROUP_READY, grant(acl(GROUP, "{group}", DESCRIBE)))),
    # the cluster
    Scenario("secured.describe-cluster.v1.no-acl", _as(_DESCRIBE_CLUSTER)),
    Scenario("secured.describe-cluster.v1.describe-and-alter", _as(_DESCRIBE_CLUSTER), setup=(grant(
        acl(CLUSTER, "kafka-cluster", DESCRIBE), acl(CLUSTER, "kafka-cluster", ALTER)),)),
    Scenario("secured.describe-cluster.v1.super-user", _as(_DESCRIBE_CLUSTER, "admin")),
    Scenario("secured.elect-leaders.v2.no-acl", _ELECT, topics=_T),
    Scenario("secured.describe-log-dirs.v4.no-acl", _LOG_DIRS, topics=_T),
    Scenario("secured.create-acls.v3.no-acl", _CREATE_ACL),
    Scenario("secured.describe-acls.v3.no-acl", _as(_DESCRIBE_ACLS)),
    # transactions and idempotence
    Scenario("secured.init-producer-id.v4.transactional-no-acl", _INIT_TXN),
    Scenario("secured.init-producer-id.v4.idempotent-no-acl", _INIT_IDEMPOTENT),
    Scenario("secured.init-producer-id.v4.idempotent-with-topic-write", _INIT_IDEMPOTENT,
             topics=_T, setup=(_IDS_READY, grant(acl(TOPIC, "{topic}", WRITE)))),
    Scenario("secured.init-producer-id.v4.idempotent-write-on-cluster", _INIT_IDEMPOTENT,
             setup=(_IDS_READY, grant(acl(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE)))),
    # every other API a client may be refused, with no ACL
    *(Scenario(f"secured.{name}.no-acl", Call(key, version, body, to="alice"), topics=_T, setup=(_GROUP_READY,))
      for name, key, version, body in _REFUSED),
    Scenario("secured.offset-commit.v9.group-read-only", Call(8, 9, _COMMIT, to="alice"), topics=_T,
             setup=(_GROUP_READY, grant(acl(GROUP, "{group}", READ)))),
    Scenario("secured.metadata.v10.cluster-operations", Call(3, 10, {
        "topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": False}, to="alice"),
        setup=(grant(acl(CLUSTER, "kafka-cluster", DESCRIBE), acl(CLUSTER, "kafka-cluster", CREATE)),)),
    # the ACL APIs' filters, as admin
    Scenario("secured.create-acls.v3.literal-prefixed-and-deny", Call(30, 3, {"creations": [
        acl(TOPIC, "{topic}", READ), acl(TOPIC, "{topic}", WRITE, permission=_DENY),
        acl(GROUP, "{group}", READ, pattern=_PREFIXED)]}, to="admin")),
    Scenario("secured.create-acls.v3.invalid", Call(30, 3, {"creations": [
        acl(TOPIC, "{topic}", _ANY), acl(TOPIC, "{topic}", READ, principal="alice"),
        acl(TOPIC, "{topic}", READ, pattern=_MATCH)]}, to="admin")),
    Scenario("secured.describe-acls.v3.match", _DESCRIBE_ACLS, setup=(grant(
        acl(TOPIC, "{topic}", READ), acl(TOPIC, "d.", WRITE, pattern=_PREFIXED), acl(TOPIC, "x.", WRITE,
                                                                                     pattern=_PREFIXED)),)),
    Scenario("secured.describe-acls.v3.literal-only", Call(29, 3, _filter(TOPIC, "{topic}", _LITERAL), to="admin"),
             setup=(grant(acl(TOPIC, "{topic}", READ), acl(TOPIC, "d.", WRITE, pattern=_PREFIXED)),)),
    Scenario("secured.describe-acls.v3.by-principal-and-operation", Call(29, 3, _filter(
        GROUP, "{group}", _ANY, principal=ALICE, operation=READ), to="admin"),
        setup=(grant(acl(GROUP, "{group}", READ), acl(GROUP, "{group}", DESCRIBE)),)),
    Scenario("secured.describe-acls.v3.invalid-filter", Call(29, 3, _filter(TOPIC, "{topic}", 0), to="admin")),
    Scenario("secured.delete-acls.v3.literal-and-prefixed", Call(31, 3, {"filters": [
        _filter(TOPIC, "{topic}", _LITERAL), _filter(GROUP, "{group}", _PREFIXED)]}, to="admin"),
        setup=(grant(acl(TOPIC, "{topic}", READ), acl(TOPIC, "{topic}", WRITE),
                     acl(GROUP, "{group}", READ, pattern=_PREFIXED)),)),
    Scenario("secured.delete-acls.v3.deny-only", Call(31, 3, {"filters": [
        _filter(TOPIC, "{topic}", _LITERAL, permission=_DENY)]}, to="admin"),
        setup=(grant(acl(TOPIC, "{topic}", READ), acl(TOPIC, "{topic}", WRITE, permission=_DENY)),)),
    Scenario("secured.delete-acls.v3.no-acl", Call(31, 3, {"filters": [_filter(TOPIC, "{topic}", _LITERAL)]},
                                                   to="alice")),
]
