"""Cluster-wide and security APIs on a broker without an authorizer or SASL: DescribeCluster (60),
DescribeLogDirs (35), ElectLeaders (43), partition reassignments (45, 46), AlterReplicaLogDirs (34), ACLs (29, 30,
31), SASL on a PLAINTEXT listener (17, 36), client quotas (48, 49), SCRAM credentials (50, 51), telemetry (71) and
KIP-848's consumer group APIs (68, 69) and DescribeTopicPartitions (75), which Kafka 3.9 in ZooKeeper mode does not
serve: those are compared with Kafka 4.x."""

from __future__ import annotations

from differential_corpus import Call, Scenario, Topic, coordinator

_T = (Topic(),)
_GROUP = (coordinator("{group}"), Call(69, 0, {"group_ids": ["{group}"]},
                                      until=lambda r: r["groups"][0]["error_code"] not in (14, 15, 16)))
"""The group's coordinator found and loaded (Kafka 4's answers NOT_COORDINATOR a while after FindCoordinator)."""
_ANY, _LITERAL, _TOPIC_RESOURCE = 1, 3, 2

SCENARIOS = [
    *(Scenario(f"describe-cluster.v{v}", Call(60, v, {"include_cluster_authorized_operations": True,
                                                      "endpoint_type": 1})) for v in range(2)),
    *(Scenario(f"describe-log-dirs.v{v}.topic", Call(35, v, {"topics": [{"topic": "{topic}", "partitions": [0]}]}),
               topics=_T) for v in range(1, 5)),
    Scenario("describe-log-dirs.v4.unknown-topic", Call(35, 4, {"topics": [{"topic": "{topic}",
                                                                           "partitions": [0]}]})),
    *(Scenario(f"elect-leaders.v{v}.preferred", Call(43, v, {"election_type": 0, "topic_partitions": [
        {"topic": "{topic}", "partitions": [0]}], "timeout": 10000}), topics=_T) for v in range(3)),
    Scenario("elect-leaders.v2.unclean", Call(43, 2, {"election_type": 1, "topic_partitions": [
        {"topic": "{topic}", "partitions": [0]}], "timeout": 10000}), topics=_T),
    Scenario("elect-leaders.v2.unknown-partition", Call(43, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "{topic}", "partitions": [3]}], "timeout": 10000}), topics=_T),
    Scenario("alter-partition-reassignments.v0.same-replicas", Call(45, 0, {"timeout": 10000, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "replicas": None}]}]}), topics=_T),
    Scenario("alter-partition-reassignments.v0.unknown-broker", Call(45, 0, {"timeout": 10000, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "replicas": [77]}]}]}), topics=_T),
    Scenario("alter-partition-reassignments.v0.unknown-topic", Call(45, 0, {"timeout": 10000, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "replicas": None}]}]})),
    Scenario("list-partition-reassignments.v0.none", Call(46, 0, {"timeout": 10000, "topics": [
        {"name": "{topic}", "partition_indexes": [0]}]}), topics=_T),
    Scenario("list-partition-reassignments.v0.all", Call(46, 0, {"timeout": 10000, "topics": None})),
    *(Scenario(f"alter-replica-log-dirs.v{v}.unknown-dir", Call(34, v, {"dirs": [
        {"path": "/nonexistent", "topics": [{"name": "{topic}", "partitions": [0]}]}]}), topics=_T)
      for v in range(1, 3)),
    *(Scenario(f"describe-acls.v{v}.no-authorizer", Call(29, v, {
        "resource_type_filter": _ANY, "resource_name_filter": None, "pattern_type_filter": _LITERAL,
        "principal_filter": None, "host_filter": None, "operation": _ANY, "permission_type": _ANY}))
      for v in range(1, 4)),
    *(Scenario(f"create-acls.v{v}.no-authorizer", Call(30, v, {"creations": [{
        "resource_type": _TOPIC_RESOURCE, "resource_name": "{topic}", "resource_pattern_type": _LITERAL,
        "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})) for v in range(1, 4)),
    *(Scenario(f"delete-acls.v{v}.no-authorizer", Call(31, v, {"filters": [{
        "resource_type_filter": _ANY, "resource_name_filter": None, "pattern_type_filter": _LITERAL,
        "principal_filter": None, "host_filter": None, "operation": _ANY, "permission_type": _ANY}]}))
      for v in range(1, 4)),
    *(Scenario(f"sasl-handshake.v{v}.plain-on-plaintext", Call(17, v, {"mechanism": "PLAIN"})) for v in range(2)),
    Scenario("sasl-handshake.v1.unknown-mechanism", Call(17, 1, {"mechanism": "NOPE"})),
    Scenario("sasl-authenticate.v2.without-handshake", Call(36, 2, {"auth_bytes": b"\x00u\x00p"})),
    *(Scenario(f"describe-client-quotas.v{v}.all", Call(48, v, {"components": [], "strict": False}))
      for v in range(2)),
    *(Scenario(f"alter-client-quotas.v{v}.validate-client", Call(49, v, {"entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": "{group}"}],
        "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}], "validate_only": True}))
      for v in range(2)),
    Scenario("alter-client-quotas.v1.unknown-key", Call(49, 1, {"entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": "{group}"}],
        "ops": [{"key": "no_such_quota", "value": 1.0, "remove": False}]}], "validate_only": True})),
    Scenario("describe-user-scram-credentials.v0.unknown-user", Call(50, 0, {"users": [{"name": "{group}"}]})),
    Scenario("describe-user-scram-credentials.v0.all", Call(50, 0, {"users": None})),
    Scenario("alter-user-scram-credentials.v0.delete-unknown", Call(51, 0, {
        "deletions": [{"name": "{group}", "mechanism": 1}], "upsertions": []})),
    Scenario("alter-user-scram-credentials.v0.bad-iterations", Call(51, 0, {"deletions": [], "upsertions": [{
        "name": "{group}", "mechanism": 1, "iterations": 1, "salt": b"salt", "salted_password": b"x" * 32}]})),
    *(Scenario(f"get-telemetry-subscriptions.v0.kafka-{v}", Call(71, 0, {
        "client_instance_id": "00000000-0000-0000-0000-000000000000"}), against=v) for v in ("3.9", "4")),
    Scenario("consumer-group-heartbeat.v0.join", Call(68, 0, {
        "group_id": "{group}", "member_id": "", "member_epoch": 0, "rebalance_timeout": 30000,
        "subscribed_topic_names": ["{topic}"], "topic_partitions": []}), topics=_T, setup=_GROUP, against="4"),
    Scenario("consumer-group-heartbeat.v0.unknown-member", Call(68, 0, {
        "group_id": "{group}", "member_id": "nobody", "member_epoch": 3, "rebalance_timeout": 30000,
        "subscribed_topic_names": ["{topic}"], "topic_partitions": []}), topics=_T, setup=_GROUP, against="4"),
    Scenario("consumer-group-describe.v0.unknown", Call(69, 0, {"group_ids": ["{group}"]}), setup=_GROUP,
             against="4"),
    Scenario("consumer-group-describe.v0.one-member", Call(69, 0, {"group_ids": ["{group}"]}), topics=_T,
             setup=(*_GROUP, Call(68, 0, {
                 "group_id": "{group}", "member_id": "", "member_epoch": 0, "rebalance_timeout": 30000,
                 "subscribed_topic_names": ["{topic}"], "topic_partitions": []})), against="4"),
    Scenario("write-txn-markers.v1.unknown-topic", Call(27, 1, {"markers": [{
        "producer_id": 4242, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
        "topics": [{"name": "{topic}", "partition_indexes": [0]}]}]})),
    Scenario("write-txn-markers.v1.commit-without-transaction", Call(27, 1, {"markers": [{
        "producer_id": 4242, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
        "topics": [{"name": "{topic}", "partition_indexes": [0]}]}]}), topics=_T),
    Scenario("describe-topic-partitions.v0.topic", Call(75, 0, {"topics": [{"name": "{topic}"}],
                                                                "response_partition_limit": 100}), topics=_T,
             against="4"),
]
