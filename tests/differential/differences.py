"""Every difference between Apache Kafka 3.9's answers and odradek's that the differential corpus accepts, each with
its reason. Anything the normaliser (``differential_normalise.RULES``) leaves and this list does not name fails the
test; ``docs/differences.md`` is rendered from this list and the rules by :func:`render`.

``scenario`` and ``path`` are patterns (``*`` matches any run of characters, the rest is literal). An entry whose
scenario has no ``*`` must still occur in that scenario's run (unless marked ``always=False``, where Kafka's own
answer varies): a difference fixed is an entry deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from differential_normalise import RULES

__all__ = ["DIFFERENCES", "Difference", "render"]


@dataclass(frozen=True)
class Difference:
    scenario: str
    path: str
    reason: str
    always: bool = True
    """False where Kafka's own answer varies from run to run (the entry is then not checked for staleness)."""


_KIP_896 = ("odradek serves Kafka 4.0's range: KIP-896 removed these old versions in 4.0, and 4.x clients (the "
            "ones odradek is tested with) never send them")
_TIERED = "tiered storage (KIP-405) is not implemented, so odradek does not list its topic configs"
_FIRST_JOIN = ("Kafka 4.x answers a consumer's first heartbeat at group epoch 2, sometimes with an empty assignment "
               "and the partitions on a later heartbeat (both seen here, run to run); odradek answers at epoch 1 with "
               "the assignment at once (the member reconciles to the same partitions)")
_NEWER = "odradek also serves the newer version Kafka 4.x added, for 4.x clients"


def _api(key: int, field: str, reason: str) -> Difference:
    return Difference("api-versions.v*", f"api_keys[{key}]{field}", reason)


DIFFERENCES: tuple[Difference, ...] = (
    # ApiVersions: the served ranges, API by API (min_version, max_version, or the whole entry)
    _api(0, ".min_version", _KIP_896), _api(0, ".max_version", _NEWER + " (Produce v12: KIP-890 part 2)"),
    _api(1, ".min_version", _KIP_896),
    _api(1, ".max_version", "Fetch v17 (KIP-853's replica directory id for KRaft followers) is not served: odradek "
                            "has no KRaft"),
    _api(2, ".min_version", _KIP_896), _api(2, ".max_version", _NEWER + " (ListOffsets v10-v11)"),
    _api(3, ".max_version", _NEWER + " (Metadata v13: a top-level error code)"),
    _api(4, ".min_version", "LeaderAndIsr below v4 is not served: every broker odradek mixes with is 2.8+"),
    _api(4, ".max_version", "LeaderAndIsr v5-v7 (topic ids, KRaft-era fields) are not sent by ZooKeeper-mode "
                            "controllers odradek mixes with at the versions it negotiates"),
    _api(5, ".min_version", "StopReplica below v3 is not served: every broker odradek mixes with is 2.8+"),
    _api(5, ".max_version", "StopReplica v4 (KIP-516 topic ids) is not served"),
    _api(6, ".min_version", "UpdateMetadata below v6 is not served: every broker odradek mixes with is 2.8+"),
    _api(6, ".max_version", "UpdateMetadata v7-v8 (topic ids, KRaft migration) are not served"),
    _api(7, ".min_version", "ControlledShutdown below v3 is not served (v0 has no header client id)"),
    _api(8, ".min_version", _KIP_896), _api(9, ".min_version", _KIP_896),
    _api(15, ".max_version", _NEWER + " (DescribeGroups v6: per-group error messages)"),
    _api(19, ".min_version", _KIP_896), _api(20, ".min_version", _KIP_896), _api(23, ".min_version", _KIP_896),
    _api(27, ".min_version", _KIP_896), _api(29, ".min_version", _KIP_896), _api(30, ".min_version", _KIP_896),
    _api(31, ".min_version", _KIP_896), _api(32, ".min_version", _KIP_896), _api(34, ".min_version", _KIP_896),
    _api(35, ".min_version", _KIP_896),
    *(_api(key, "", "delegation tokens (KIP-48) are not implemented") for key in (38, 39, 40, 41)),
    _api(45, ".max_version", _NEWER + " (AlterPartitionReassignments v1: allowReplicationFactorChange)"),
    _api(56, "", "AlterPartition is the KRaft-migration-era controller API; odradek's ISR changes go through "
                 "ZooKeeper as a 2.x ZooKeeper-mode broker's do"),
    _api(57, "", "UpdateFeatures is not served: odradek's finalized features are fixed (group.version=1)"),
    _api(58, "", "Envelope is forwarding to a KRaft controller; odradek has none"),
    _api(60, ".max_version", _NEWER + " (DescribeCluster v2: endpoint type)"),
    _api(67, "", "AllocateProducerIds is the KRaft-migration-era controller API; odradek allocates id blocks on "
                 "/latest_producer_id_block as ZooKeeper-mode brokers do"),
    _api(68, ".max_version", _NEWER + " (ConsumerGroupHeartbeat v1, KIP-848 as released in 4.0)"),
    _api(69, ".max_version", _NEWER + " (ConsumerGroupDescribe v1, KIP-848 as released in 4.0)"),
    _api(75, "", "DescribeTopicPartitions (KIP-966) is served by odradek for 4.x admin clients; Kafka 3.9 serves it "
                 "only in KRaft mode"),
    *(Difference(f"api-versions.v{v}", "*features*",
                 "odradek advertises and finalizes group.version=1 (the KIP-848 consumer protocol is on, as in "
                 "Kafka 4.0); Kafka 3.9 in ZooKeeper mode has no finalized features (epoch 0)") for v in (3, 4)),
    # topic configs Kafka 3.9 lists that odradek does not implement
    *(Difference(scenario, f"*configs[{name}]", reason)
      for scenario in ("create-topics.v5.one-partition", "create-topics.v6.one-partition",
                       "create-topics.v7.one-partition", "create-topics.v7.three-partitions-with-config",
                       "create-topics.v7.min-isr-bigger-than-rf", "create-topics.v7.validate-only",
                       "create-topics.v5.default-partitions", "describe-configs.v4.topic-all",
                       "cluster.create-topics.v7.replica-assignment", "cluster.create-topics.v7.rack-aware")
      for name, reason in (
          ("remote.*", _TIERED), ("local.retention.*", _TIERED),
          ("compression.*.level", "compression levels (KIP-390, Kafka 3.8) are not implemented: odradek stores "
                                  "producers' batches as they were compressed"),
          ("message.format.version", "deprecated since Kafka 3.0 and removed in 4.0 (KIP-724); odradek writes "
                                     "only the v2 format and follows 4.0"))),
    Difference("delete-topics.v6.existing", "*topic_id",
               "odradek answers with the deleted topic's id, as KRaft brokers and Kafka 4.x do; Kafka 3.9 in "
               "ZooKeeper mode leaves it zero"),
    # produce
    # admin messages in Scala's words
    Difference("alter-partition-reassignments.v0.unknown-broker", "*partitions[0].error_message",
               "Kafka's message prints Scala collections (`ArrayBuffer(77)`, `Set(1)`); odradek names the "
               "brokers plainly (same error code)"),
    Difference("incremental-alter-configs.v1.invalid-operation", "*",
               "Kafka 3.9 fails an unknown operation id with UNKNOWN_SERVER_ERROR (OpType.forId throws); odradek "
               "answers INVALID_REQUEST naming the operation, the error the bad input deserves"),
    Difference("controlled-shutdown.v3.unknown-broker-with-epoch", "error_code",
               "Kafka 3.9 looks an unknown broker's epoch up before checking the broker exists and fails with "
               "UNKNOWN_SERVER_ERROR (NoSuchElementException); odradek answers BROKER_NOT_AVAILABLE, as Kafka "
               "does for the same request without an epoch (controlled-shutdown.v3.unknown-broker)"),
    # KIP-848 consumer groups, compared with Kafka 4.x
    *(Difference(scenario, path, _FIRST_JOIN, always=False) for scenario, path in (
        ("consumer-group-heartbeat.v0.join", "member_epoch"),
        ("consumer-group-heartbeat.v0.join", "assignment.topic_partitions*"),
        ("consumer-group-describe.v0.one-member", "*_epoch"),
        ("consumer-group-describe.v0.one-member", "*assignment.topic_partitions*"))),
    Difference("describe-configs.v4.other-broker", "results[77].error_message",
               "the message names the answering broker's own id (Kafka's test broker is 1, odradek's 0); the words "
               "are Kafka's"),
    Difference("describe-configs.v4.broker-logger", "*",
               "broker loggers (KIP-412, BROKER_LOGGER resources) are not served: odradek answers INVALID_REQUEST"),
    # client telemetry
    Difference("get-telemetry-subscriptions.v0.kafka-*", "*",
               "Kafka without a client-telemetry metrics reporter neither advertises nor serves "
               "GetTelemetrySubscriptions (it closes the connection); odradek hides it from ApiVersions too but "
               "answers a client that asks anyway with an empty subscription"),
    Difference("incremental-alter-configs.v1.broker-other-id", "responses[77].error_message",
               "the message names the answering broker's own id (Kafka's test broker is 1, odradek's 0); the words "
               "are Kafka's"),
    # three-broker clusters
    Difference("cluster.create-topics.v7.unknown-broker-in-assignment", "*",
               "Kafka 3.9 in ZooKeeper mode accepts a hand-written assignment naming a broker that is not registered "
               "(the partition waits for it); odradek refuses it with INVALID_REPLICA_ASSIGNMENT, as Kafka in KRaft "
               "mode does"),
    Difference("cluster.create-topics.v7.duplicate-broker-in-assignment", "*error_message",
               "Kafka's message prints the whole assignment as a Scala map (`HashMap(0 -> ArrayBuffer(1, 1))`); "
               "odradek prints the partition's replicas (same error code)"),
    *(Difference(f"cluster.{scenario}.not-controller", "*",
                 "odradek serves topic administration on every broker; Kafka 3.9 in ZooKeeper mode only on the "
                 "controller (NOT_CONTROLLER elsewhere), where its clients send it anyway")
      for scenario in ("create-topics.v7", "delete-topics.v6", "create-partitions.v3")),
    Difference("cluster.fetch.v12.from-follower", "*",
               "fetching from a follower (KIP-392, Fetch v11+) is not implemented: odradek answers a consumer's "
               "fetch only on the leader (NOT_LEADER_OR_FOLLOWER elsewhere); Kafka serves it from the follower up "
               "to its high watermark"),
    # the secured pair
    *(Difference(f"secured.{scenario}", path, "Kafka's message for a refused ACL request prints its internal request "
                 "object (connection id, buffer), different on every run; odradek names the principal and the "
                 "operation it lacks (same error code)")
      for scenario, path in (("create-acls.v3.no-acl", "results[0].error_message"),
                             ("describe-acls.v3.no-acl", "error_message"),
                             ("delete-acls.v3.no-acl", "filter_results[0].error_message"),
                             ("alter-partition-reassignments.v0.no-acl", "*error_message"),
                             ("list-partition-reassignments.v0.no-acl", "error_message"))),
    Difference("secured.describe-user-scram-credentials.v0.no-acl", "<connection>",
               "Kafka 3.9 closes the connection: building its refusal for a request that lists every user (a null "
               "list) fails on the null; odradek answers CLUSTER_AUTHORIZATION_FAILED with no results"),
    Difference("secured.create-acls.v3.invalid", "results[*",
               "Kafka's authorizer throws on an ANY operation, a principal without a type or a MATCH pattern, and "
               "the API answers UNKNOWN_SERVER_ERROR with no message; odradek answers INVALID_REQUEST naming what "
               "is wrong, the error the bad input deserves"),
    Difference("describe-configs.v4.broker-keys", "*configs[num.partitions].config_source",
               "the Kafka test broker sets num.partitions in its server.properties (STATIC_BROKER_CONFIG); the "
               "odradek broker runs on its default"),
)


def render() -> str:
    """The differences document (docs/differences.md)."""
    out = [
        "# Where odradek answers differently from Apache Kafka 3.9",
        "",
        "Generated by `tests/differential` from `tests/differential/differences.py` and the normaliser's rules; do "
        "not edit by hand (the test run rewrites this file and fails while the committed copy is stale).",
        "",
        "The differential corpus sends each scenario's request to a one-broker Apache Kafka 3.9 (ZooKeeper mode; "
        "Kafka 4.x in KRaft mode for the APIs 3.9 does not serve: KIP-848's consumer groups, DescribeTopicPartitions) "
        "and to a one-broker odradek, and compares the answers field by field. Run it with "
        "`.venv/bin/python -m pytest tests/differential -q -p no:cacheprovider`.",
        "",
        "Two more pairs are compared the same way. Scenarios named `cluster.*` run on a three-broker Kafka 3.9 "
        "cluster (ZooKeeper mode) and a three-broker odradek cluster, with the same racks and settings: leaders, "
        "ISRs and leader epochs after a broker stops (a controlled shutdown) and returns, preferred elections, "
        "reassignments, hand-placed and rack-aware topic creation, requests to a follower, and acks=all under "
        "`min.insync.replicas` (`tests/differential/test_differential_cluster.py`). Scenarios named `secured.*` "
        "run on one broker of each with only a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256) and the ACL "
        "authorizer: each API refused without an ACL and allowed with one, the authorized-operations bitfields, the "
        "ACL APIs' filters, and the SASL errors clients print (`tests/differential/test_differential_secured.py`).",
        "",
        "## What is normalised before comparing",
        "",
        "| field path | reason |",
        "|---|---|",
    ]
    by_reason: dict[str, list[str]] = {}
    for rule in RULES:
        by_reason.setdefault(rule.reason, []).append(f"`{rule.pattern}`")
    out += [f"| {', '.join(patterns)} | {reason} |" for reason, patterns in by_reason.items()]
    out += ["", "## Differences kept, with their reasons", "", "| scenario | field path | reason |", "|---|---|---|"]
    for d in DIFFERENCES:
        out.append(f"| `{d.scenario}` | `{d.path}` | {d.reason} |")
    return "\n".join(out) + "\n"
